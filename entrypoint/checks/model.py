"""Model and drafter: weights present (a local directory, or the Hugging Face cache already holding
them), config.json readable, every safetensors file complete, total bytes known; a drafter that is
not quantized."""
from __future__ import annotations

import dataclasses
import json
import os
import struct

from contract.verdict import Result, failed, passed, warned

MODEL = "model"
DRAFTER = "drafter"
INDEX = "model.safetensors.index.json"
QUANTIZED_DRAFTER = ("a {method} drafter loads without the Marlin kernel on these GPUs and drafts garbage: "
                     "acceptance stays at 1.00 (the bf16 drafter reaches 2.8 to 3.6)")


class ModelProblem(Exception):
    """What is wrong with a model directory, and the fix."""

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


@dataclasses.dataclass(frozen=True)
class ModelDir:
    path: str
    config: dict
    weight_files: tuple[str, ...]
    weight_bytes: int


def hf_cache_snapshot(model_id: str, hub_cache: str) -> str | None:
    """The snapshot directory of `model_id` in a huggingface_hub cache (refs/main first), if any."""
    repo = os.path.join(hub_cache, "models--" + model_id.replace("/", "--"))
    snapshots = os.path.join(repo, "snapshots")
    try:
        with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as handle:
            candidate = os.path.join(snapshots, handle.read().strip())
        if os.path.isdir(candidate):
            return candidate
    except OSError:
        pass
    try:
        entries = [os.path.join(snapshots, name) for name in os.listdir(snapshots)]
    except OSError:
        return None
    entries = [entry for entry in entries if os.path.isdir(entry)]
    return max(entries, key=os.path.getmtime) if entries else None


def locate(model: str, hub_cache: str) -> str | None:
    """A local directory as given, else the HF cache's snapshot of that id; None when neither exists."""
    if os.path.isdir(model):
        return model
    if os.path.isabs(model) or model.startswith("."):
        return None
    return hf_cache_snapshot(model, hub_cache)


def safetensors_problem(path: str) -> str | None:
    """Why a .safetensors file is unusable (truncated download, bad header), or None."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                return f"{path} is {size} bytes, shorter than a safetensors header"
            (header_len,) = struct.unpack("<Q", raw)
            if 8 + header_len > size:
                return f"{path} is truncated: its header alone claims {8 + header_len} bytes, the file has {size}"
            header = json.loads(handle.read(header_len))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        return f"{path} is not a readable safetensors file ({error})"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + header_len + max(ends, default=0)
    if size != expected:
        return f"{path} is truncated or corrupt: {size} bytes on disk, its header describes {expected}"
    return None


def _redownload(path: str) -> str:
    return f"download the model again into {path} (huggingface-cli download, or copy it whole)"


def read_config(path: str) -> dict:
    """The model directory's config.json; raises ModelProblem with the fix."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ModelProblem(f"{path} has no config.json", _redownload(path)) from None
    except (OSError, ValueError) as error:
        raise ModelProblem(f"{path}/config.json is unreadable ({error})", _redownload(path)) from None


def read_model_dir(path: str, config: dict | None = None) -> ModelDir:
    """The model directory's config (`config` when already read) and weights; raises ModelProblem
    with the fix."""
    redownload = _redownload(path)
    config = read_config(path) if config is None else config
    files = sorted(name for name in os.listdir(path) if name.endswith(".safetensors"))
    if os.path.exists(os.path.join(path, INDEX)):
        try:
            with open(os.path.join(path, INDEX), encoding="utf-8") as handle:
                listed = set(json.load(handle)["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError) as error:
            raise ModelProblem(f"{path}/{INDEX} is unreadable ({error})", redownload) from None
        missing = sorted(listed - set(files))
        if missing:
            raise ModelProblem(f"{path} lacks {len(missing)} shard(s) listed in {INDEX}: {', '.join(missing[:3])}",
                               redownload)
    if not files:
        raise ModelProblem(f"{path} has no .safetensors weights", redownload)
    for name in files:
        problem = safetensors_problem(os.path.join(path, name))
        if problem:
            raise ModelProblem(problem, redownload)
    total = sum(os.path.getsize(os.path.join(path, name)) for name in files)
    return ModelDir(path, config, tuple(files), total)


def gib(count: float) -> str:
    return f"{count / 2**30:.2f} GiB"


def not_found(name: str, variable: str, model: str, hub_cache: str, offline: bool) -> Result:
    if os.path.isabs(model) or model.startswith("."):
        return failed(name, f"{variable} directory {model} does not exist",
                      f"mount the model directory at {model} (compose `volumes:`, Quadlet `Volume=`)")
    if offline:
        return failed(name, f"{model} is not in the Hugging Face cache {hub_cache} and HF_HUB_OFFLINE is set",
                      f"download it first (huggingface-cli download {model}) into the mounted HF_HOME")
    return warned(name, f"{model} is not in the Hugging Face cache {hub_cache}: it will be downloaded at start, "
                        "its size is unknown to the disk and memory checks",
                  f"download it first (huggingface-cli download {model}) into the mounted HF_HOME")


@dataclasses.dataclass(frozen=True)
class Resolved:
    """MODEL or DRAFTER resolved once for every check that needs it (model, drafter, fit, memory,
    parsers): the directory found, and its contents read, or the result that says why not."""
    path: str | None
    found: ModelDir | None
    problem: Result | None
    # config.json as read, also when the weights are not whole (the fit and parallel checks judge it)
    config: dict | None = None

    @property
    def config_file(self) -> str | None:
        """The config.json to hand to a subprocess (the fit check), when the directory has one."""
        config = os.path.join(self.path, "config.json") if self.path else None
        return config if config and os.path.isfile(config) else None


def resolve(name: str, variable: str, model: str, hub_cache: str, offline: bool) -> Resolved:
    """Finds the model directory and reads it (config.json, each safetensors header) once."""
    path = locate(model, hub_cache)
    if path is None:
        return Resolved(None, None, not_found(name, variable, model, hub_cache, offline))
    try:
        config = read_config(path)
    except ModelProblem as problem:
        return Resolved(path, None, failed(name, str(problem), problem.fix))
    try:
        return Resolved(path, read_model_dir(path, config), None, config)
    except ModelProblem as problem:
        return Resolved(path, None, failed(name, str(problem), problem.fix), config)


def check_model(model: Resolved) -> Result:
    if model.found is None:
        return model.problem
    found = model.found
    return passed(MODEL, f"{found.path}: {len(found.weight_files)} safetensors file(s), {gib(found.weight_bytes)}")


def check_drafter(drafter: Resolved | None) -> Result:
    if drafter is None:
        return passed(DRAFTER, "no drafter configured")
    if drafter.found is None:
        return drafter.problem
    found = drafter.found
    path = found.path
    quantization = found.config.get("quantization_config")
    if isinstance(quantization, dict):
        method = quantization.get("quant_method", "unknown")
        if method == "compressed-tensors":
            return failed(DRAFTER, f"{path} is quantized (compressed-tensors): " + QUANTIZED_DRAFTER.format(method=method),
                          "use the bf16 drafter checkpoint (one without quantization_config)")
        return warned(DRAFTER, f"{path} is quantized ({method}); only the bf16 drafter is known to draft well",
                      "prefer the bf16 drafter checkpoint")
    return passed(DRAFTER, f"{path}: not quantized, {gib(found.weight_bytes)}")


def staged_bytes(models: list[Resolved]) -> int | None:
    """Total safetensors bytes of the models to load; None when one of them is not present and readable."""
    if any(model.found is None for model in models):
        return None
    return sum(model.found.weight_bytes for model in models)
