"""The CUDA devices this container sees, read through the driver API with ctypes: no torch import,
so a host without GPU learns it in milliseconds."""
from __future__ import annotations

import ctypes
import dataclasses
import threading
from typing import Callable

from door.problem import Problem
from . import nvml

LIBCUDA = "libcuda.so.1"
# cuInit with every GPU of a host visible takes seconds on a machine without persistence mode; one that
# has not answered by then is a driver that blocks, and the preflight says so instead of hanging.
DEVICES_DEADLINE_S = 60.0
# NVML's read (20 ms on an H200) comes before the preflight's context is made, so that no card counts
# that context as used; an NVML that has not answered by then holds the context back no longer.
NVML_FIRST_S = 5.0
# The server is exec'd once the preflight's context is released; a release that takes longer is left to
# the exec (the driver frees what a process image held).
RELEASE_DEADLINE_S = 10.0
# CUdevice_attribute values from cuda.h
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
ATTR_SMEM_OPTIN = 97


@dataclasses.dataclass(frozen=True)
class Device:
    name: str
    cc: tuple[int, int]
    smem_optin: int
    count: int
    ordinal: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "cc": f"{self.cc[0]}.{self.cc[1]}", "smem_optin": self.smem_optin,
                "count": self.count}


def cuda_error(lib, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode()} ({code})"
    return f"CUDA error {code}"


def load_libcuda(libcuda: str = LIBCUDA):
    try:
        return ctypes.CDLL(libcuda)
    except OSError as error:
        raise Problem(f"{libcuda} does not load: {error}") from None


def weakest(devices: list[Device]) -> Device:
    """Lowest capability, then smallest shared memory: what vLLM must fit."""
    return min(devices, key=lambda device: (device.cc, device.smem_optin))


def probe_device(libcuda: str = LIBCUDA) -> Device:
    return weakest(probe_devices(libcuda))


def probe_devices(libcuda: str = LIBCUDA) -> list[Device]:
    """Every visible device in CUDA's order (CUDA_VISIBLE_DEVICES applied by the driver)."""
    lib = load_libcuda(libcuda)
    code = lib.cuInit(0)
    if code:
        raise Problem(f"cuInit failed: {cuda_error(lib, code)}")
    count = ctypes.c_int()
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code or count.value == 0:
        raise Problem(f"no CUDA device visible ({cuda_error(lib, code) if code else '0 devices'})")
    devices = []
    for ordinal in range(count.value):
        handle = ctypes.c_int()
        lib.cuDeviceGet(ctypes.byref(handle), ordinal)
        values = []
        for attribute in (ATTR_CC_MAJOR, ATTR_CC_MINOR, ATTR_SMEM_OPTIN):
            value = ctypes.c_int()
            lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, handle)
            values.append(value.value)
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, handle)
        devices.append(Device(name.value.decode(errors="replace"), (values[0], values[1]), values[2], count.value,
                              ordinal))
    return devices


def retain_context(ordinal: int = 0, libcuda: str = LIBCUDA) -> tuple[str | None, Callable[[], None]]:
    """Whether the driver makes a CUDA context on the device (what torch's first CUDA call does): None
    when it does, else the driver's error; with what releases the device's primary context (nothing
    to release where it was not made)."""
    try:
        lib = load_libcuda(libcuda)
    except Problem as error:
        return str(error), _nothing
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(handle), ordinal)),
                       ("cuDevicePrimaryCtxRetain", (ctypes.byref(context), handle))):
        code = getattr(lib, call)(*args)
        if code:
            return f"{call} failed: {cuda_error(lib, code)}", _nothing
    return None, lambda: lib.cuDevicePrimaryCtxRelease(handle)


def _nothing() -> None:
    return None


def context_error(ordinal: int = 0, libcuda: str = LIBCUDA) -> str | None:
    """retain_context()'s answer, the context released before it is given."""
    error, release = retain_context(ordinal, libcuda)
    release()
    return error


class Probe:
    """The driver's slow calls, begun on a thread as the entrypoint starts (entrypoint/__main__.py) so
    that they run while Python imports and parses the rest (ctypes releases the GIL): cuInit and the
    device list, then the primary context on the weakest device, which the torch check asks for (the
    answer is given once it is made, and the context released after); beside them, NVML's view (the
    driver and memory checks'), read before that context is made. Daemon threads, as the preflight's
    other background work; the exit and the exec wait for the release (released()), at most
    RELEASE_DEADLINE_S."""

    def __init__(self, libcuda: str = LIBCUDA, libnvml: str = nvml.LIBNVML):
        self.libcuda, self.libnvml = libcuda, libnvml
        self._listed, self._made, self._over = threading.Event(), threading.Event(), threading.Event()
        self._nvml_read = threading.Event()
        self._devices: list[Device] | Exception = Problem("not probed")
        self._context: tuple[int, str | None] | None = None
        self._seen: nvml.NvmlView | None = None
        threading.Thread(target=self._read_nvml, daemon=True, name="nvml-probe").start()
        threading.Thread(target=self._run, daemon=True, name="device-probe").start()

    def _read_nvml(self) -> None:
        try:
            self._seen = nvml.read(self.libnvml)
        finally:
            self._nvml_read.set()

    def _run(self) -> None:
        try:
            self._devices = probe_devices(self.libcuda)
        except Exception as error:  # raised in the caller's thread by devices()
            self._devices = error
        finally:
            self._listed.set()
        release = _nothing
        try:
            if isinstance(self._devices, list):
                self._nvml_read.wait(NVML_FIRST_S)
                ordinal = weakest(self._devices).ordinal
                error, release = retain_context(ordinal, self.libcuda)
                self._context = (ordinal, error)
        finally:
            self._made.set()
        try:
            release()  # after the answer: the torch check does not wait for it (60 ms on an H200)
        finally:
            self._over.set()

    def devices(self, deadline_s: float = DEVICES_DEADLINE_S) -> list[Device]:
        """probe_devices()'s answer; Problem when the driver has not given it within deadline_s."""
        if not self._listed.wait(deadline_s):
            raise Problem(f"no answer from cuInit in {deadline_s:g} s")
        if isinstance(self._devices, Exception):
            raise self._devices
        return self._devices

    def nvml_view(self) -> nvml.NvmlView:
        """NVML's view as read at the start, before the context; read now where that read raised. Blocks
        until NVML answers: the caller bounds the wait (the check's deadline)."""
        self._nvml_read.wait()
        return self._seen if self._seen is not None else nvml.read(self.libnvml)

    def released(self, deadline_s: float = RELEASE_DEADLINE_S) -> bool:
        """Whether the driver's calls are over, the context released, within deadline_s."""
        return self._over.wait(deadline_s)

    def context_error(self, ordinal: int) -> str | None:
        """context_error(ordinal): the early answer for the weakest device, another ordinal asked now.
        Blocks until the driver answers: the caller bounds the wait (preflight.in_thread)."""
        self._made.wait()
        if self._context is not None and self._context[0] == ordinal:
            return self._context[1]
        return context_error(ordinal, self.libcuda)
