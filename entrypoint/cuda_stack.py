"""What CUDA the image ships, read without importing torch: torch's CUDA version (from torch/version.py),
the host driver that runtime needs (one table), and the CUDA majors of the libcudart and NCCL wheels
installed beside torch (two stacks in one image break at import or at the first collective)."""
from __future__ import annotations

import ast
import importlib.util
import os
import re

from contract.distributions import installed
from contract.verdict import Result, failed, passed
from door import files

# The one table: a CUDA major's minimum Linux driver (NVIDIA's CUDA toolkit release notes, table 3,
# "minimum required driver version" for the major's minor-version compatibility).
DRIVER_FLOOR = {11: 450, 12: 525, 13: 580}

# Wheels that carry a CUDA runtime or NCCL: CUDA 12 wheels say their major in the name (-cu12),
# CUDA 13 wheels mostly in their version (nvidia-cuda-runtime 13.0.96).
STACK_WHEEL = re.compile(r"^nvidia-(?P<part>cuda-runtime|nccl)(?:-cu(?P<major>\d+))?$")
PART_NAMES = {"cuda-runtime": "libcudart", "nccl": "NCCL"}


def cuda_major(version: str | None) -> int | None:
    match = re.match(r"(\d+)", version or "")
    return int(match.group(1)) if match else None


def driver_floor(cuda_version: str | None) -> int | None:
    """The minimum driver major for a CUDA runtime version ("13.0" -> 580); None when unknown."""
    return DRIVER_FLOOR.get(cuda_major(cuda_version))


def torch_version_file(module: str = "torch") -> str | None:
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(locations[0], "version.py") if locations else None


def torch_cuda_version(version_py: str | None) -> str | None:
    """torch.version.cuda as torch/version.py assigns it, without importing torch (seconds)."""
    try:
        tree = ast.parse(files.read_own(version_py or ""))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
            return node.value.value if isinstance(node.value.value, str) else None
    return None


def stack_wheels(distributions: list[tuple[str, str]]) -> list[tuple[str, str, str, int]]:
    """(part, wheel name, version, CUDA major) of each libcudart/NCCL wheel among (name, version) pairs."""
    found = []
    for name, version in distributions:
        match = STACK_WHEEL.match(name.lower().replace("_", "-"))
        if match:
            major = int(match.group("major")) if match.group("major") else cuda_major(version)
            if major is not None:
                found.append((PART_NAMES[match.group("part")], name, version, major))
    return sorted(found)


def judge_stack(name: str, torch_version: str, torch_cuda: str, wheels: list[tuple[str, str, str, int]]) -> Result:
    """One CUDA major across torch, libcudart and NCCL, or a failure naming each."""
    major = cuda_major(torch_cuda)
    others = [wheel for wheel in wheels if wheel[3] != major]
    if not others:
        return passed(name, f"torch {torch_version} (CUDA {torch_cuda}) and its libcudart/NCCL wheels are one CUDA {major} stack")
    listed = ", ".join(f"{part} from {wheel} {version} (CUDA {wheel_major})"
                       for part, wheel, version, wheel_major in others)
    return failed(name, f"two CUDA stacks: torch {torch_version} is CUDA {torch_cuda}, but {listed}",
                  f"pip uninstall the CUDA {' '.join(sorted({str(w[3]) for w in others}))} wheels named here and "
                  "reinstall the torch this vLLM pins with its own nvidia-* wheels (or rebuild the image; "
                  "do not pip install torch into it)")


def installed_distributions() -> list[tuple[str, str]]:
    return installed()


def stack_problem(name: str, module: str = "torch") -> Result | None:
    """Two CUDA stacks in this environment, judged before torch is imported (an import can die of it)."""
    torch_cuda = torch_cuda_version(torch_version_file(module))
    if torch_cuda is None:
        return None
    distributions = installed_distributions()
    torch_version = next((version for dist, version in distributions if dist.lower() == module), "?")
    result = judge_stack(name, torch_version, torch_cuda, stack_wheels(distributions))
    return result if result.failed else None
