"""The host driver against the floor of the image's CUDA runtime, and NVIDIA's forward-compatibility
libraries (CUDA_COMPAT=auto|on|off). Below the floor cuInit still passes and torch fails later with a
vague message; datacenter and professional cards can run the newer runtime on the older driver with
the compat libcuda first on the library path, GeForce cards cannot."""
from __future__ import annotations

import dataclasses
import os
import re

from contract.verdict import Result, Status, failed, passed, warned

from ..cuda_stack import driver_floor

NAME = "driver"
COMPAT_DIR = "/usr/local/cuda/compat"
COMPAT_LIB = "libcuda.so.1"
GEFORCE = re.compile(r"GeForce|TITAN", re.I)
# Tesla, Quadro, RTX A-series / Ada / PRO, and the datacenter letters: T4, V100, A100, A10, L4, L40S, H100, ...
PROFESSIONAL = re.compile(r"Tesla|Quadro|RTX\s+(A\d+|\d+\s+Ada|PRO)|\b[TVAHLB]\d+[A-Z]?\b|\bGH\d+|\bGB\d+", re.I)


COMPAT_FIRST = f"{COMPAT_DIR} goes first on LD_LIBRARY_PATH"


@dataclasses.dataclass(frozen=True)
class Compat:
    """The driver floor's verdict and whether to put COMPAT_DIR first on LD_LIBRARY_PATH before exec."""
    result: Result | None   # None: the driver meets the floor (or the floor is unknown)
    use_compat: bool


def driver_major(version: str) -> int | None:
    match = re.match(r"(\d+)", version)
    return int(match.group(1)) if match else None


def compat_capable(gpu_name: str | None) -> bool:
    """Forward compatibility is supported on datacenter and professional parts, not on GeForce."""
    return bool(gpu_name) and not GEFORCE.search(gpu_name) and bool(PROFESSIONAL.search(gpu_name))


def judge_floor(driver: str, cuda_version: str | None, gpu_name: str | None, mode: str,
                compat_present: bool) -> Compat:
    floor, major = driver_floor(cuda_version), driver_major(driver)
    if floor is None or major is None or major >= floor:
        if mode == "on" and compat_present:
            return Compat(passed(NAME, f"driver {driver} meets the floor; {COMPAT_FIRST} "
                                       "all the same (CUDA_COMPAT=on)"), True)
        return Compat(None, False)
    below = f"driver {driver} is below {floor}, the minimum for the image's CUDA {cuda_version} runtime"
    upgrade = f"upgrade the host driver to {floor} or newer"
    if mode == "off":
        return Compat(failed(NAME, below + " (CUDA_COMPAT=off)", upgrade), False)
    if not compat_present:
        return Compat(failed(NAME, below + f"; this image has no forward-compatibility libraries in {COMPAT_DIR} "
                                           "(images on the PyPI base lack them)",
                             upgrade + ", or build on the official vLLM image (it carries them)"), False)
    if mode == "auto" and not compat_capable(gpu_name):
        return Compat(failed(NAME, below + f"; {gpu_name or 'this GPU'} is not a datacenter or professional card, "
                                           "so forward compatibility does not apply (CUDA_COMPAT=auto)",
                             upgrade), False)
    return Compat(warned(NAME, below + f"; {COMPAT_FIRST} (CUDA_COMPAT={mode})",
                         upgrade + " to run without the compat libraries"), True)


def floor_passed(driver: str, cuda_version: str | None) -> Result:
    floor = driver_floor(cuda_version)
    known = f", at least {floor} for CUDA {cuda_version}" if floor else ""
    return passed(NAME, f"driver {driver}{known}")


def compat_present(compat_dir: str = COMPAT_DIR) -> bool:
    return os.path.exists(os.path.join(compat_dir, COMPAT_LIB))


def with_compat(ld_library_path: str | None, compat_dir: str = COMPAT_DIR) -> str:
    """LD_LIBRARY_PATH with the compat directory first (once)."""
    rest = [entry for entry in (ld_library_path or "").split(":") if entry and entry != compat_dir]
    return ":".join([compat_dir, *rest])


def compat_applied(results) -> bool:
    """Whether the driver check decided on the compat libraries (the exec then puts them first)."""
    return any(result.name == NAME and result.status is not Status.FAIL and COMPAT_FIRST in result.message
               for result in results)
