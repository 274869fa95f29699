"""What NVML says of the host's driver and cards, read in one session (nvmlInit to nvmlShutdown) with
ctypes: the driver's version for the driver check, each card's memory and the processes using it for
the memory check. The entrypoint reads it as it starts, before the preflight makes a CUDA context of
its own (device.Probe), so that no card counts the preflight's context as used."""
from __future__ import annotations

import ctypes
import dataclasses

LIBNVML = "libnvidia-ml.so.1"
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_VALUE_NOT_AVAILABLE = 2**64 - 1
VERSION_BUFFER = 96


@dataclasses.dataclass(frozen=True)
class GpuMemory:
    """One card as NVML reports it: bytes in all and free, and the processes using it (pid, bytes;
    None where NVML cannot say, as in a container without the host's pid namespace)."""

    index: int
    total: int
    free: int
    processes: tuple[tuple[int, int | None], ...] = ()


@dataclasses.dataclass(frozen=True)
class NvmlView:
    """One session's answers. `load_error`: why the library did not load; `code`: NVML's first nonzero
    return code (nvmlInit's, or the driver version's), `reason` its nvmlErrorString; `present`: how many
    cards NVML counts, `cards` their memory in NVML's order, up to the first it could not read."""

    load_error: str | None = None
    code: int = 0
    reason: str = ""
    driver_version: str = ""
    present: int = 0
    cards: tuple[GpuMemory, ...] = ()

    def memory(self, count: int) -> tuple[GpuMemory, ...]:
        """The first `count` cards (those the server's ranks take), () unless NVML read each of them.
        NVML's indices, not CUDA_VISIBLE_DEVICES's: the units pass a server exactly its cards."""
        wanted = min(count, self.present)
        return self.cards[:wanted] if len(self.cards) >= wanted else ()


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _NvmlProcess(ctypes.Structure):  # nvmlProcessInfo_t of the _v2 and _v3 calls
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def read(libnvml: str = LIBNVML) -> NvmlView:
    """NVML's view of this host now: its library loaded, initialised, read and shut down."""
    try:
        lib = ctypes.CDLL(libnvml)
    except OSError as error:
        return NvmlView(load_error=f"{libnvml} does not load ({error})")
    try:
        return _session(lib)
    except AttributeError as error:  # a library of that name without NVML's calls
        return NvmlView(load_error=f"{libnvml} is not NVML ({error})")


def _session(lib) -> NvmlView:
    code = lib.nvmlInit_v2()
    if code:
        return NvmlView(code=code, reason=_reason(lib, code))
    try:
        buffer = ctypes.create_string_buffer(VERSION_BUFFER)
        code = lib.nvmlSystemGetDriverVersion(buffer, VERSION_BUFFER)
        if code:
            return NvmlView(code=code, reason=_reason(lib, code))
        present, cards = _cards(lib)
        return NvmlView(driver_version=buffer.value.decode(errors="replace"), present=present, cards=cards)
    finally:
        lib.nvmlShutdown()


def _reason(lib, code: int) -> str:
    lib.nvmlErrorString.restype = ctypes.c_char_p
    return (lib.nvmlErrorString(code) or b"").decode(errors="replace") or f"NVML error {code}"


def _cards(lib) -> tuple[int, tuple[GpuMemory, ...]]:
    present = ctypes.c_uint(0)
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(present)):
        return 0, ()
    cards = []
    for index in range(present.value):
        handle, memory = ctypes.c_void_p(), _NvmlMemory()
        if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) or \
                lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)):
            break
        cards.append(GpuMemory(index, memory.total, memory.free, _processes(lib, handle)))
    return present.value, tuple(cards)


def _processes(lib, handle) -> tuple[tuple[int, int | None], ...]:
    call = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or getattr(
        lib, "nvmlDeviceGetComputeRunningProcesses_v2", None)
    if call is None:
        return ()
    count = ctypes.c_uint(0)
    code = call(handle, ctypes.byref(count), None)  # asks how many
    if code not in (0, NVML_ERROR_INSUFFICIENT_SIZE) or not count.value:
        return ()
    room = count.value + 8  # a process may start between the two calls
    infos = (_NvmlProcess * room)()
    count = ctypes.c_uint(room)
    if call(handle, ctypes.byref(count), infos):
        return ()
    return tuple((p.pid, None if p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE else p.usedGpuMemory)
                 for p in infos[:count.value])
