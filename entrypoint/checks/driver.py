"""Driver libraries: libcuda.so.1 and libnvidia-ml.so.1 load, NVML initialises, and NVML's driver
version equals the kernel module's (/proc/driver/nvidia/version). Libraries copied from another
driver release give NVML's "driver/library version mismatch"."""
from __future__ import annotations

import ctypes
import os
import re

from .. import cuda_stack, linker_cache, nvml
from ..device import LIBCUDA, cuda_error
from ..nvml import LIBNVML
from contract.verdict import Result, Status, failed, passed

from . import driver_floor
from door import files

NAME = "driver"
PROC_VERSION = "/proc/driver/nvidia/version"
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
MOUNT_LIBS = ("mount the host's own libcuda.so.1, libcuda.so and libnvidia-ml.so.1 read-only into "
              "/usr/local/nvidia/lib64 (or use the NVIDIA container toolkit)")
KERNEL_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def kernel_driver_version(text: str) -> str | None:
    """The version in /proc/driver/nvidia/version text (proprietary and open kernel modules)."""
    match = KERNEL_VERSION.search(text)
    return match.group(1) if match else None


def compare_versions(library: str, kernel: str | None) -> Result:
    if kernel is None:
        return failed(NAME, f"NVML reports driver {library} but the kernel module version is unreadable",
                      "check that /proc/driver/nvidia/version is visible in the container")
    if library != kernel:
        return failed(NAME, f"driver/library version mismatch: libnvidia-ml is {library}, the kernel module is {kernel}",
                      f"mount the libraries of the host's driver {kernel} (not copies from another release) "
                      "into /usr/local/nvidia/lib64")
    return passed(NAME, f"libcuda and NVML load, driver {library} matches the kernel module")


def nvml_failure(code: int, reason: str, kernel: str | None) -> Result:
    if code == NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return failed(NAME, f"NVML: {reason} (kernel module {kernel or 'unknown'})",
                      f"mount the host driver's own libraries (version {kernel or 'of the host'}) into /usr/local/nvidia/lib64")
    if code == NVML_ERROR_DRIVER_NOT_LOADED:
        return failed(NAME, f"NVML: {reason}", "load the nvidia kernel module on the host and pass the device nodes")
    return failed(NAME, f"nvmlInit failed: {reason}", "run nvidia-smi on the host; fix the driver there first")


def read_text(path: str) -> str | None:
    return files.read_system(path)


def check_driver(libcuda: str = LIBCUDA, libnvml: str = LIBNVML, proc_version: str = PROC_VERSION,
                 gpu_name: str | None = None, compat_mode: str = "auto", torch_module: str = "torch",
                 seen: nvml.NvmlView | None = None) -> Result:
    """`seen`: NVML's view as the entrypoint read it at its start (else read now, from `libnvml`)."""
    try:
        cuda = ctypes.CDLL(libcuda)
    except OSError as error:
        return failed(NAME, f"{libcuda} does not load ({error})", MOUNT_LIBS)
    seen = seen or nvml.read(libnvml)
    if seen.load_error:
        return failed(NAME, seen.load_error, MOUNT_LIBS)
    proc_text = read_text(proc_version)
    kernel = kernel_driver_version(proc_text) if proc_text else None
    if seen.code:
        return nvml_failure(seen.code, seen.reason, kernel)
    library = seen.driver_version
    result = compare_versions(library, kernel)
    if result.status is not Status.PASS:
        return result
    code = cuda.cuInit(0)
    if code:
        return failed(NAME, f"cuInit failed: {cuda_error(cuda, code)}",
                      "pass the device nodes and the host driver's own libcuda.so.1 into the container")
    cuda_version = cuda_stack.torch_cuda_version(cuda_stack.torch_version_file(torch_module))
    floor = driver_floor.judge_floor(library, cuda_version, gpu_name, compat_mode, driver_floor.compat_present())
    # As the server will run: TRITON_LIBCUDA_PATH the user's, else the loader's directory (cli.py).
    loader = linker_cache.loaded_libcuda()
    triton_env = {**os.environ, **linker_cache.triton_override(os.environ, loader)}
    disagreement = linker_cache.judge_agreement(
        NAME, linker_cache.triton_libcuda(linker_cache.ldconfig_listing(), triton_env), loader)
    return next((r for r in (floor.result, disagreement) if r is not None and r.failed),
                floor.result or disagreement or result)
