"""SIGTERM and SIGINT during the preflight end the container at once, with the conventional code
(128 + the signal). The entrypoint is PID 1 in a container, and the kernel drops a signal PID 1 has
no handler for: without these, `docker stop` would wait out its grace period and kill. Once the
server is exec'd, its own handlers take over (exec resets ours)."""
from __future__ import annotations

import glob
import os
import signal
from door import files

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def children() -> list[int]:
    """This process's children (the fit check's compile, the NCCL probe), from /proc."""
    found = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            found += [int(pid) for pid in (files.read_system(path) or "").split()]
        except ValueError:
            continue
    return found


def _stop(signum, frame) -> None:
    for pid in children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)


def end_on_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
