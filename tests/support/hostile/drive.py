"""One surface run as a process and measured from outside: exit code, stdout and stderr, wall time,
peak memory (the child's own rusage), the files it left outside its target, and whether anything it
started outlived it. Nothing here judges: registry.py states the invariants once."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from tests import REPO

KILL_AFTER_S = 120.0  # a run still going then is a hang: stopped, and reported as one
# The address space each surface gets: a reader of /dev/zero or an 8 GiB file meets MemoryError here
# (a traceback, so a failure of the memory invariant) instead of taking this shared host's memory.
ADDRESS_SPACE_BYTES = 3 * 2**30


@dataclasses.dataclass
class Outcome:
    argv: list[str]
    returncode: int | None        # None: it had to be killed (a hang)
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_bytes: int
    survivors: bool               # a process of its group still ran after it exited

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def tree_state(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """path -> sha256 (or the kind) of everything under `root`, `skip` left out: a state to compare
    byte for byte before and after."""
    state = {}
    if not os.path.lexists(root):
        return state
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip and not (here / d).is_symlink()]
        for name in names + [d for d in os.listdir(here) if (here / d).is_symlink() and d not in names]:
            path = here / name
            if path in skip:
                continue
            key = str(path.relative_to(root))
            if path.is_symlink():
                state[key] = "symlink:" + os.readlink(path)
            elif path.is_file():
                if path.stat().st_size > 64 * 2**20:
                    state[key] = f"large:{path.stat().st_size}:{path.stat().st_mtime_ns}"
                else:
                    state[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[key] = "special"
        for d in dirs:
            state[str((here / d).relative_to(root)) + "/"] = "dir"
    return state


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run(argv: list[str], env: dict[str, str], cwd: Path, kill_after_s: float = KILL_AFTER_S) -> Outcome:
    """`argv` in a session of its own, its address space limited, output read while it runs, reaped
    with wait4 for its peak RSS."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_limited)
    chunks = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s=stream, k=key: chunks[k].append(s.read()), daemon=True)
               for stream, key in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for reader in readers:
        reader.start()
    returncode, usage = None, None
    while time.monotonic() - started < kill_after_s:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            returncode = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.02)
    wall = time.monotonic() - started
    if returncode is None:
        os.killpg(proc.pid, signal.SIGKILL)
        _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = returncode if returncode is not None else -9  # reaped here: Popen must not wait again
    survivors = _group_alive(proc.pid)
    if survivors:
        os.killpg(proc.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(10)
    out = b"".join(chunks["out"]).decode(errors="replace")
    err = b"".join(chunks["err"]).decode(errors="replace")
    return Outcome(argv, returncode, out, err, wall, usage.ru_maxrss * 1024, survivors)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def python(*words: str) -> list[str]:
    return [sys.executable, *words]


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: this checkout on PYTHONPATH, HOME and caches in the test's folder."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(REPO),
           "LANG": "C.UTF-8", "XDG_CACHE_HOME": str(home / ".cache"), "HF_HOME": str(home / "hf"),
           "HF_HUB_OFFLINE": "0", "NO_COLOR": "1"}
    env.update(extra)
    return env
