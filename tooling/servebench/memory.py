"""Peak memory while a benchmark runs: GPU memory through NVML (ctypes on the driver's
libnvidia-ml, nothing to install) when the host has a GPU, else a container's memory."""
from __future__ import annotations

import ctypes
import re
from typing import Callable

from .periodic import Periodic
from door import children

UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
         "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def docker_mem_bytes(text: str) -> int | None:
    """The usage half of `docker stats`' MemUsage ("1.5GiB / 31.2GiB"); None when unreadable."""
    m = re.match(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*/", text)
    if m is None or m.group(2).upper() not in UNITS:
        return None
    return int(float(m.group(1)) * UNITS[m.group(2).upper()])


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_reader() -> Callable[[], int] | None:
    """A function returning the memory used on all GPUs, or None when NVML is not there."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        count = ctypes.c_uint()
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value == 0:
            return None
    except (OSError, AttributeError):
        return None
    handles = []
    for i in range(count.value):
        h = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0:
            handles.append(h)

    def used() -> int:
        total = 0
        for h in handles:
            mem = _NvmlMemory()
            if lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)) == 0:
                total += mem.used
        return total
    return used


def container_reader(container: str) -> Callable[[], int | None]:
    def used() -> int | None:
        done = children.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", container])
        return docker_mem_bytes(done.stdout) if done.returncode == 0 else None
    return used


class PeakSampler(Periodic):
    """Calls a reader every interval in a thread; keeps the highest value."""

    def __init__(self, kind: str | None, where: str, reader: Callable[[], int | None] | None, interval_s: float = 1.0):
        self.kind, self.where, self.reader, self.interval_s = kind, where, reader, interval_s
        self.peak: int | None = None

    def sample(self) -> None:
        value = self.reader() if self.reader else None
        if value is not None and (self.peak is None or value > self.peak):
            self.peak = value


def sampler(container: str | None) -> PeakSampler:
    """NVML when this host has a GPU; the named container's memory otherwise; else nothing."""
    gpu = nvml_reader()
    if gpu is not None:
        return PeakSampler("gpu", "NVML, all GPUs", gpu)
    if container:
        shown = container[:12] if re.fullmatch(r"[0-9a-f]{64}", container) else container   # docker's short id
        return PeakSampler("container", f"docker stats of {shown}", container_reader(container))
    return PeakSampler(None, "", None)
