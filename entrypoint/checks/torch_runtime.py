"""torch: a CUDA build (not +cpu) that imports with its NVIDIA libraries, compiled for this device's
sm_XY, with CUDA available and a tiny fp16 matmul that runs. The only module that imports torch."""
from __future__ import annotations

import importlib

from contract.verdict import Result, failed, passed

from ..cuda_stack import stack_problem

NAME = "torch"
REINSTALL = ("install the CUDA build of torch that this vLLM pins, with its nvidia-* dependency wheels "
             "(or use the image as built: do not pip install torch into it)")


def judge_torch(version: str, cuda_version: str | None, arch_list: list[str], sm: str,
                available: bool, matmul_error: str | None) -> Result:
    if cuda_version is None or "+cpu" in version:
        return failed(NAME, f"torch {version} is a CPU build", REINSTALL)
    if sm not in arch_list:
        return failed(NAME, f"torch {version} has no kernels for {sm} (it has {' '.join(arch_list) or 'none'})",
                      f"install a torch CUDA build whose arch list includes {sm}")
    if not available:
        return failed(NAME, f"torch {version} (CUDA {cuda_version}) sees no CUDA device",
                      "pass the device nodes and the host driver's libraries (see the devices and driver checks)")
    if matmul_error:
        return failed(NAME, f"a 64x64 fp16 matmul on the GPU failed: {matmul_error}", REINSTALL)
    return passed(NAME, f"torch {version}, CUDA {cuda_version}, {sm} in its arch list, fp16 matmul runs")


def arch_list(torch) -> list[str]:
    listed = torch.cuda.get_arch_list()
    # Older torch returns [] without a device; the compiled flags are there all the same.
    return listed or torch._C._cuda_getArchFlags().split()


def fp16_matmul_error(torch) -> str | None:
    try:
        a = torch.ones((64, 64), dtype=torch.float16, device="cuda")
        product = (a @ a).float().sum().item()
        torch.cuda.synchronize()
    except Exception as error:  # any CUDA failure here is the finding
        return f"{type(error).__name__}: {error}".splitlines()[0]
    return None if product == 64 * 64 * 64 else f"wrong result {product}"


def check_torch_from_facts(torch_facts: dict, cc: tuple[int, int], context_error: str | None) -> Result:
    """The same judgement from what the build recorded about torch (the image facts) and what the
    driver says about the device: no torch import, so the preflight does not pay its seconds."""
    sm = f"sm_{cc[0]}{cc[1]}"
    result = judge_torch(str(torch_facts.get("version")), torch_facts.get("cuda"), list(torch_facts.get("arch_list") or []),
                         sm, True, None)
    if result.failed:
        return result
    if context_error:
        return failed(NAME, f"the driver makes no CUDA context on the device ({context_error})",
                      "pass the device nodes and the host driver's libraries (see the devices and driver checks)")
    return passed(NAME, f"torch {torch_facts.get('version')}, CUDA {torch_facts.get('cuda')}, {sm} in its arch list "
                        "(the image's facts, as built); the driver makes a CUDA context on the device")


def check_torch(cc: tuple[int, int], module: str = "torch") -> Result:
    stack = stack_problem(NAME, module)
    if stack is not None:
        return stack
    try:
        torch = importlib.import_module(module)
    except Exception as error:  # ImportError, OSError (libcudart.so.13), ValueError (libcublasLt not found), ...
        return failed(NAME, f"torch does not import: {str(error).splitlines()[0][:300]}", REINSTALL)
    sm = f"sm_{cc[0]}{cc[1]}"
    available = torch.cuda.is_available()
    return judge_torch(torch.__version__, torch.version.cuda, arch_list(torch), sm, available,
                       fp16_matmul_error(torch) if available else None)
