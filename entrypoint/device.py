"""The CUDA devices this container sees, read through the driver API with ctypes: no torch import,
so a host without GPU learns it in milliseconds."""
from __future__ import annotations

import ctypes
import dataclasses

LIBCUDA = "libcuda.so.1"
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


class NoDevice(Exception):
    """Why no CUDA device could be read (library missing, cuInit error)."""


def cuda_error(lib, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode()} ({code})"
    return f"CUDA error {code}"


def load_libcuda(libcuda: str = LIBCUDA):
    try:
        return ctypes.CDLL(libcuda)
    except OSError as error:
        raise NoDevice(f"{libcuda} does not load: {error}") from None


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
        raise NoDevice(f"cuInit failed: {cuda_error(lib, code)}")
    count = ctypes.c_int()
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code or count.value == 0:
        raise NoDevice(f"no CUDA device visible ({cuda_error(lib, code) if code else '0 devices'})")
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


def context_error(ordinal: int = 0, libcuda: str = LIBCUDA) -> str | None:
    """Whether the driver makes a CUDA context on the device (what torch's first CUDA call does):
    None when it does, else the driver's error. The device's primary context is retained and released."""
    try:
        lib = load_libcuda(libcuda)
    except NoDevice as error:
        return str(error)
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(handle), ordinal)),
                       ("cuDevicePrimaryCtxRetain", (ctypes.byref(context), handle))):
        code = getattr(lib, call)(*args)
        if code:
            return f"{call} failed: {cuda_error(lib, code)}"
    lib.cuDevicePrimaryCtxRelease(handle)
    return None
