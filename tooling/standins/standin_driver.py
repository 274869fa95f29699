"""StandIn NVIDIA driver libraries (libcuda.so.1, libnvidia-ml.so.1) compiled with gcc, for what a
CPU machine cannot have: a GPU behind the driver API. They answer like a driver of the given
version with one device of the given capability, so the entrypoint's ctypes code runs for real."""
from __future__ import annotations

import pathlib
import subprocess
from typing import Mapping

from contract.devices import TURING

# Each call the driver takes time over answers after its LATENCY_US_<name> microseconds (0: at once);
# note() is not the driver's: where STANDIN_DRIVER_LOG names a file, it adds a line per event there
# (a context retained or released, a card's memory read), for a test to read their order.
COMMON_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void note(const char *event) {
    const char *path = getenv("STANDIN_DRIVER_LOG");
    FILE *log = path ? fopen(path, "a") : NULL;
    if (log) { fprintf(log, "%s\n", event); fclose(log); }
}
static void pause_us(long long us) {
    struct timespec left = {us / 1000000, (us % 1000000) * 1000};
    while (us > 0 && nanosleep(&left, &left) != 0) {}
}
"""
TIMED_CALLS = ("cuInit", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "nvmlInit_v2", "nvmlShutdown")

STANDIN_LIBCUDA_C = COMMON_C + r"""
#include <string.h>
static const char *names[] = {"CUDA_SUCCESS", "CUDA_ERROR_NO_DEVICE"};
static int initialised;  /* as the driver: only the first cuInit, retain and last release take time */
int cuInit(unsigned flags) { if (!initialised++) pause_us(LATENCY_US_cuInit); return CU_INIT_CODE; }
int cuGetErrorName(int code, const char **name) { *name = code == 100 ? names[1] : names[0]; return 0; }
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetAttribute(int *value, int attribute, int device) {
    *value = attribute == 75 ? CC_MAJOR : attribute == 76 ? CC_MINOR : attribute == 97 ? SMEM_OPTIN : 0;
    return 0;
}
int cuDeviceGetName(char *name, int length, int device) { strncpy(name, DEVICE_NAME, length); return 0; }
static int context_token, retained;
int cuDevicePrimaryCtxRetain(void **context, int device) {
    if (!retained) pause_us(LATENCY_US_cuDevicePrimaryCtxRetain);
    *context = &context_token; retained += CTX_CODE == 0;
    if (CTX_CODE == 0) note("retain");
    return CTX_CODE;
}
int cuDevicePrimaryCtxRelease(int device) {
    if (retained == 1) pause_us(LATENCY_US_cuDevicePrimaryCtxRelease);
    retained--; note("release"); return 0;
}
/* Not the driver's: how many retains are not yet released, for a test to read. */
int standin_retained(void) { return retained; }
"""

STANDIN_NVML_C = COMMON_C + r"""
#include <string.h>
int nvmlInit_v2(void) { pause_us(LATENCY_US_nvmlInit_v2); return NVML_INIT_CODE; }
int nvmlShutdown(void) { pause_us(LATENCY_US_nvmlShutdown); return 0; }
int nvmlSystemGetDriverVersion(char *version, unsigned length) { strncpy(version, DRIVER_VERSION, length); return 0; }
typedef struct { unsigned long long total, free, used; } standin_memory;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gpu_instance, compute_instance; } standin_process;
int nvmlDeviceGetCount_v2(unsigned *count) { *count = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device) { *device = (void *)(long)(index + 1); return 0; }
int nvmlDeviceGetMemoryInfo(void *device, standin_memory *memory) {
    note("memory read");
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
                         smem_optin: int = TURING.limit, name: str = "StandIn Tesla T4", cu_init_code: int = 0,
                         latency_ms: Mapping[str, float] | None = None,
                         nvml_init_code: int = 0, context_code: int = 0, gpu_total: int = 15 * 2**30,
                         others_used: int = 0, other_pid: int = 4242) -> pathlib.Path:
    """Writes libcuda.so.1 and libnvidia-ml.so.1 into `directory`; returns it (for LD_LIBRARY_PATH).
    NVML reports one card of `gpu_total` bytes, `others_used` of them taken by process `other_pid`;
    each call of TIMED_CALLS answers after its `latency_ms` (a slow or blocking driver; at once without)."""
    unknown = set(latency_ms or {}) - set(TIMED_CALLS)
    if unknown:
        raise ValueError(f"no latency for {sorted(unknown)}: the stand-in times {', '.join(TIMED_CALLS)}")
    latencies = {f"LATENCY_US_{call}": round((latency_ms or {}).get(call, 0) * 1000) for call in TIMED_CALLS}
    directory.mkdir(parents=True, exist_ok=True)
    _compile(STANDIN_LIBCUDA_C, directory / "libcuda.so.1",
             {"CU_INIT_CODE": cu_init_code, "CC_MAJOR": cc[0], "CC_MINOR": cc[1], "SMEM_OPTIN": smem_optin,
              "DEVICE_NAME": f'"{name}"', "CTX_CODE": context_code, **latencies})
    _compile(STANDIN_NVML_C, directory / "libnvidia-ml.so.1",
             {"NVML_INIT_CODE": nvml_init_code, "DRIVER_VERSION": f'"{driver_version}"',
              "GPU_TOTAL": f"{gpu_total}ULL", "OTHERS_USED": f"{others_used}ULL", "OTHER_PID": other_pid, **latencies})
    return directory


def proc_driver_version_text(version: str) -> str:
    """/proc/driver/nvidia/version as the proprietary kernel module writes it."""
    return (f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
