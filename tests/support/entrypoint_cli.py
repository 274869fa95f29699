"""Runs `python3 -m entrypoint` from this checkout in a clean environment."""
from __future__ import annotations

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_entrypoint(env: dict, *args: str, library_path=None, timeout: int = 120) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PYTHONPATH": str(REPO)}
    if library_path:
        base["LD_LIBRARY_PATH"] = str(library_path)
    return subprocess.run([sys.executable, "-m", "entrypoint", *args], env={**base, **env}, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
