"""The container's linker cache as the NVIDIA container toolkit's hook leaves it, and where each loader
finds libcuda.so.1. Triton asks `ldconfig -p` first and reads LD_LIBRARY_PATH only when the cache
lists no libcuda.so.1; torch and the entrypoint dlopen through the loader (LD_LIBRARY_PATH first).
Without the toolkit nothing refreshes the cache, and a stale libcuda in it wins for Triton alone."""
from __future__ import annotations

import os
import subprocess
from typing import Callable, Mapping

from contract.verdict import Result, failed

NVIDIA_LIB_DIR = "/usr/local/nvidia/lib64"
LDCONFIG = "/sbin/ldconfig"  # the path Triton runs
LIBCUDA = "libcuda.so.1"
TRITON_LIBCUDA_PATH = "TRITON_LIBCUDA_PATH"  # Triton's own override: a directory


def refresh_argv(euid: int, lib_dir: str = NVIDIA_LIB_DIR, is_dir: Callable[[str], bool] = os.path.isdir) -> list[str] | None:
    """The ldconfig run that adds the mounted driver directory to the cache: only as root (rootful, or
    rootless podman's user-namespace root), whose cache file lives in the container layer."""
    if euid != 0 or not is_dir(lib_dir):
        return None
    return [LDCONFIG, lib_dir]


def cache_paths(ldconfig_p: str, soname: str = LIBCUDA) -> list[str]:
    """The paths `ldconfig -p` lists for a soname, in its order (Triton's parse: the last word)."""
    return [line.split()[-1] for line in ldconfig_p.splitlines() if soname in line and "=>" in line]


def triton_libcuda(ldconfig_p: str, env: Mapping[str, str], exists: Callable[[str], bool] = os.path.exists) -> str | None:
    """The libcuda.so.1 Triton's libcuda_dirs() puts first."""
    override = env.get(TRITON_LIBCUDA_PATH)
    if override:
        return os.path.join(override, LIBCUDA)
    listed = cache_paths(ldconfig_p)
    if listed:
        return listed[0]
    for entry in (env.get("LD_LIBRARY_PATH") or "").split(":"):
        if entry and exists(os.path.join(entry, LIBCUDA)):
            return os.path.join(entry, LIBCUDA)
    return None


def loaded_path(maps: str, soname: str = LIBCUDA) -> str | None:
    """The file the loader mapped for a soname, from /proc/self/maps text (after it was dlopened)."""
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and os.path.basename(fields[5]).startswith(soname.split(".so")[0] + ".so"):
            return fields[5].strip()
    return None


def judge_agreement(name: str, triton: str | None, loader: str | None,
                    realpath: Callable[[str], str] = os.path.realpath) -> Result | None:
    """A failure naming both files when Triton and the loader would use different libcuda.so.1; else None."""
    if triton is None or loader is None or realpath(triton) == realpath(loader):
        return None
    return failed(name, f"Triton would use {triton} (the linker cache lists it first) but the loader "
                        f"loaded {loader}: two different libcuda.so.1",
                  f"remove the stale {triton} from the image or run as root so the entrypoint refreshes the "
                  f"cache for {NVIDIA_LIB_DIR} (or set {TRITON_LIBCUDA_PATH}={os.path.dirname(loader)})")


def refresh(euid: int) -> None:
    """The effect: run ldconfig for the driver directory; a read-only root filesystem leaves the cache
    as it was, and the driver check then reports any disagreement."""
    argv = refresh_argv(euid)
    if argv:
        try:
            subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            pass


def ldconfig_listing() -> str:
    try:
        return subprocess.run([LDCONFIG, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
