"""StandIn NVIDIA driver libraries (libcuda.so.1, libnvidia-ml.so.1) compiled with gcc, for what a
CPU machine cannot have: a GPU behind the driver API. They answer like a driver of the given
version with one device of the given capability, so the entrypoint's ctypes code runs for real."""
from __future__ import annotations

import pathlib
import subprocess

STANDIN_LIBCUDA_C = r"""
#include <string.h>
#include <unistd.h>
static const char *names[] = {"CUDA_SUCCESS", "CUDA_ERROR_NO_DEVICE"};
int cuInit(unsigned flags) { sleep(CU_INIT_SECONDS); return CU_INIT_CODE; }
int cuGetErrorName(int code, const char **name) { *name = code == 100 ? names[1] : names[0]; return 0; }
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetAttribute(int *value, int attribute, int device) {
    *value = attribute == 75 ? CC_MAJOR : attribute == 76 ? CC_MINOR : attribute == 97 ? SMEM_OPTIN : 0;
    return 0;
}
int cuDeviceGetName(char *name, int length, int device) { strncpy(name, DEVICE_NAME, length); return 0; }
static int context_token;
int cuDevicePrimaryCtxRetain(void **context, int device) { *context = &context_token; return CTX_CODE; }
int cuDevicePrimaryCtxRelease(int device) { return 0; }
"""

STANDIN_NVML_C = r"""
#include <string.h>
int nvmlInit_v2(void) { return NVML_INIT_CODE; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *version, unsigned length) { strncpy(version, DRIVER_VERSION, length); return 0; }
typedef struct { unsigned long long total, free, used; } standin_memory;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gpu_instance, compute_instance; } standin_process;
int nvmlDeviceGetCount_v2(unsigned *count) { *count = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device) { *device = (void *)(long)(index + 1); return 0; }
int nvmlDeviceGetMemoryInfo(void *device, standin_memory *memory) {
    memory->total = GPU_TOTAL; memory->used = OTHERS_USED; memory->free = GPU_TOTAL - OTHERS_USED; return 0;
}
/* Another process's use, as NVML lists it: one process when OTHERS_USED is not 0. */
int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned *count, standin_process *infos) {
    unsigned present = OTHERS_USED ? 1 : 0;
    if (*count < present) { *count = present; return 7; }
    *count = present;
    if (present) { infos[0].pid = OTHER_PID; infos[0].used = OTHERS_USED; infos[0].gpu_instance = infos[0].compute_instance = 0xFFFFFFFF; }
    return 0;
}
const char *nvmlErrorString(int code) {
    return code == 18 ? "Driver/library version mismatch" : code == 9 ? "Driver Not Loaded" : "Unknown Error";
}
"""


def _compile(source: str, target: pathlib.Path, defines: dict[str, object]) -> None:
    c_file = target.with_suffix(".c")
    c_file.write_text(source)
    flags = [f"-D{key}={value}" for key, value in defines.items()]
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(target), str(c_file), *flags], check=True)


def build_standin_driver(directory: pathlib.Path, driver_version: str = "535.104.05", cc: tuple[int, int] = (7, 5),
                         smem_optin: int = 65536, name: str = "StandIn Tesla T4", cu_init_code: int = 0,
                         cu_init_seconds: int = 0,
                         nvml_init_code: int = 0, context_code: int = 0, gpu_total: int = 15 * 2**30,
                         others_used: int = 0, other_pid: int = 4242) -> pathlib.Path:
    """Writes libcuda.so.1 and libnvidia-ml.so.1 into `directory`; returns it (for LD_LIBRARY_PATH).
    NVML reports one card of `gpu_total` bytes, `others_used` of them taken by process `other_pid`;
    cuInit answers after `cu_init_seconds` (a driver that blocks)."""
    directory.mkdir(parents=True, exist_ok=True)
    _compile(STANDIN_LIBCUDA_C, directory / "libcuda.so.1",
             {"CU_INIT_CODE": cu_init_code, "CU_INIT_SECONDS": cu_init_seconds, "CC_MAJOR": cc[0], "CC_MINOR": cc[1],
              "SMEM_OPTIN": smem_optin,
              "DEVICE_NAME": f'"{name}"', "CTX_CODE": context_code})
    _compile(STANDIN_NVML_C, directory / "libnvidia-ml.so.1",
             {"NVML_INIT_CODE": nvml_init_code, "DRIVER_VERSION": f'"{driver_version}"',
              "GPU_TOTAL": f"{gpu_total}ULL", "OTHERS_USED": f"{others_used}ULL", "OTHER_PID": other_pid})
    return directory


def proc_driver_version_text(version: str) -> str:
    """/proc/driver/nvidia/version as the proprietary kernel module writes it."""
    return (f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
