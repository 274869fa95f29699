"""Runs `python3 -m entrypoint` from this checkout in a clean environment, as this process's user
or (run_entrypoint_as) as another uid, as a container started with `--user UID:GID` runs it."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from tests import REPO

SYSTEM_PYTHON = "/usr/bin/python3"


def run_entrypoint(env: dict, *args: str, library_path=None, timeout: int = 120) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PYTHONPATH": str(REPO)}
    if library_path:
        base["LD_LIBRARY_PATH"] = str(library_path)
    return subprocess.run([sys.executable, "-m", "entrypoint", *args], env={**base, **env}, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def python_for_others() -> str | None:
    """A Python another uid can run (this one may live under /root), or None."""
    for candidate in (sys.executable, SYSTEM_PYTHON, shutil.which("python3") or ""):
        if candidate and os.path.exists(candidate) and all(
                os.stat(folder).st_mode & 0o001 for folder in pathlib.Path(candidate).resolve().parents):
            if os.stat(pathlib.Path(candidate).resolve()).st_mode & 0o001:
                return candidate
    return None


def can_switch_uid() -> bool:
    return os.geteuid() == 0 and python_for_others() is not None and all(
        os.stat(folder).st_mode & 0o001 for folder in (REPO, *REPO.parents))


def run_entrypoint_as(uid: int, gid: int, env: dict, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """`python3 -m entrypoint ARGS` as uid:gid (this process must be root; see can_switch_uid)."""
    base = {"PATH": "/usr/bin:/bin", "HOME": "/", "PYTHONPATH": str(REPO)}
    return subprocess.run([python_for_others(), "-m", "entrypoint", *args], env={**base, **env}, cwd="/",
                          user=uid, group=gid, extra_groups=[], capture_output=True, text=True, timeout=timeout)
