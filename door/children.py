"""Long-running children (docker buildx build, debootstrap) that end when build.py ends.

Each child runs in its own process group (session): a Ctrl-C at the terminal reaches build.py
alone, and whatever way build.py leaves the `with` block (a failure, KeyboardInterrupt, SIGTERM
turned into an exception by build.py) the whole group is stopped: SIGTERM, then SIGKILL after a
grace period. No child outlives the command that started it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Iterator

STOP_GRACE_S = 10.0


def start(argv: list[str], **popen) -> subprocess.Popen:
    """The child, in a process group of its own (FileNotFoundError when argv[0] is not there)."""
    return subprocess.Popen(argv, start_new_session=True, **popen)


@contextlib.contextmanager
def stopped_on_exit(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Ends the child's process group (a no-op once the child has exited and been reaped)."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run(argv: list[str], timeout_s: float | None = None, check: bool = False, **popen) -> subprocess.CompletedProcess:
    """subprocess.run's capture_output/text (unless `popen` says otherwise: stdout=DEVNULL, cwd,
    env, ...), but stopped with its group when build.py stops, or past `timeout_s` (then
    subprocess.TimeoutExpired is raised once the group is stopped); `check` as subprocess.run's."""
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    with stopped_on_exit(start(argv, **popen)) as proc:
        out, err = proc.communicate(timeout=timeout_s)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv, out, err)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
