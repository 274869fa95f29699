"""What a start-time benchmark must not hold while it times: a CUDA context, or the CUDA driver loaded,
in its own process. A container start meets a driver that no process of its own has initialised (cuInit,
the primary context's retain); a bench that imported torch and asked the device anything has done both,
and the driver then answers every timed child faster than any start gets (the preflight read 0.24-0.25 s
so, against 0.37-0.40 s timed from outside, and its fit check 9 ms against 0.3 ms).

Pure reading of this process's state: `held(...)` names what is held, empty when nothing is."""
from __future__ import annotations

import sys
from pathlib import Path

# shared objects whose mapping into a process means the CUDA driver or runtime was loaded there
DRIVER_LIBRARIES = ("libcuda.so", "libcudart.so", "libnvidia-ml.so")
# modules whose import loads the CUDA runtime or initialises the driver
CUDA_MODULES = ("torch", "triton", "pycuda", "cupy", "numba.cuda")


def held(maps: str, modules: list[str] | tuple[str, ...]) -> list[str]:
    """What of CUDA a process holds, from its /proc/<pid>/maps text and its imported module names:
    one phrase per finding, empty when it holds nothing."""
    found = [f"module {name} imported" for name in CUDA_MODULES if name in modules]
    mapped = sorted({Path(line.split()[-1]).name for line in maps.splitlines()
                     if len(line.split()) >= 6 and any(lib in line.split()[-1] for lib in DRIVER_LIBRARIES)})
    return found + [f"{name} loaded" for name in mapped]


def held_here() -> list[str]:
    """held() for this process (nothing readable of /proc: its modules alone)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    return held(maps, list(sys.modules))
