"""The container's linker cache as the NVIDIA container toolkit's hook leaves it, and where each loader
finds libcuda.so.1. Triton asks `ldconfig -p` first and reads LD_LIBRARY_PATH only when the cache
lists no libcuda.so.1; torch and the entrypoint dlopen through the loader (LD_LIBRARY_PATH first).
Without the toolkit nothing refreshes the cache, and a stale libcuda in it would win for Triton alone.
So the server is started with TRITON_LIBCUDA_PATH, Triton's own override, naming the directory of the
libcuda.so.1 the loader mapped: Triton then never reads the cache, and the entrypoint never has to
rewrite /etc/ld.so.cache (which took root and a writable root filesystem)."""
from __future__ import annotations

import functools
import os
import subprocess
from typing import Callable, Mapping

from contract.verdict import Result, failed

from .device import LIBCUDA
from door import files

LDCONFIG = "/sbin/ldconfig"  # the path Triton runs
TRITON_LIBCUDA_PATH = "TRITON_LIBCUDA_PATH"  # Triton's own override: a directory


def triton_override(env: Mapping[str, str], loader: str | None,
                    exists: Callable[[str], bool] = os.path.exists) -> dict[str, str]:
    """What the server's environment gets so that Triton uses the loader's libcuda.so.1: its directory
    as TRITON_LIBCUDA_PATH, unless the user set that (theirs is judged by the driver check), no
    libcuda was loaded (no GPU: nothing to point at), or the mapped file's directory holds no
    libcuda.so.1 (a symlink into another folder: Triton links against that name in the directory)."""
    if (env.get(TRITON_LIBCUDA_PATH) or "").strip() or not loader:
        return {}
    directory = os.path.dirname(loader)
    return {TRITON_LIBCUDA_PATH: directory} if exists(os.path.join(directory, LIBCUDA)) else {}


def cache_paths(ldconfig_p: str, soname: str = LIBCUDA) -> list[str]:
    """The paths `ldconfig -p` lists for a soname, in its order (Triton's parse: the last word)."""
    return [line.split()[-1] for line in ldconfig_p.splitlines() if soname in line and "=>" in line]


def loader_finds(soname: str, ldconfig_p: str, env: Mapping[str, str],
                 listdir: Callable[[str], list[str]] = os.listdir) -> bool:
    """Whether the dynamic loader finds a library of this soname, or a versioned one ("libavcodec.so"
    finds libavcodec.so.59), through the linker cache or a folder of LD_LIBRARY_PATH."""
    if cache_paths(ldconfig_p, soname):
        return True
    for entry in filter(None, (env.get("LD_LIBRARY_PATH") or "").split(":")):
        try:
            names = listdir(entry)
        except OSError:
            continue
        if any(name.startswith(soname) for name in names):
            return True
    return False


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
    return failed(name, f"Triton would use {triton} ({TRITON_LIBCUDA_PATH} names its directory) but the "
                        f"loader loaded {loader}: two different libcuda.so.1",
                  f"unset {TRITON_LIBCUDA_PATH} (the entrypoint then points it at the loader's) or set "
                  f"{TRITON_LIBCUDA_PATH}={os.path.dirname(loader)}")


def loaded_libcuda(maps_path: str = "/proc/self/maps") -> str | None:
    """The effect: the libcuda this process mapped (the device probe loaded it), None when none."""
    maps = files.read_system(maps_path, 64 * files.MiB)
    return loaded_path(maps) if maps is not None else None


@functools.cache  # the driver and audio checks both read it; it does not change within a preflight
def ldconfig_listing() -> str:
    try:
        return subprocess.run([LDCONFIG, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
