"""Runs inside the image with this checkout's entrypoint/, imagefacts/ and contract/ first on
PYTHONPATH. `judge CASES_JSON`: for each case (the --quantization flag, config.json, the device's
capability), what vLLM's own ModelConfig._verify_quantization decides (the method, or "refused") and
what entrypoint/checks/quant_method.py decides. vLLM's function runs on a stand-in for the
ModelConfig it is a method of, holding what that function reads: the flag, the checkpoint's
quantization config as vLLM's own convertor normalizes it (after the model's own config hook, as
_try_verify_and_update_model_config runs it first), the HF config's model_type. The build host has no
driver, so the platform answers as CUDA does for what the function asks: is_cuda() and the device's
capability (CUDA restricts no quantization method). Prints one JSON list."""
import copy
import json
import sys
import types

from vllm.config.model import ModelConfig
from vllm.model_executor.models.config import MODELS_CONFIG_MAP
from vllm.platforms import current_platform
from vllm.platforms.interface import DeviceCapability
from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

from door.problem import Problem
from entrypoint.checks.quant_method import checkpoint_quantization, effective_method

import vllm.model_executor.layers.quantization as quantization  # noqa: E402
import vllm.models.deepseek_v41  # noqa: E402,F401  (CUDA's DeepSeek V4 config, imported before is_cuda answers)

quantization.get_quantization_config("fp8")  # its imports made while the platform still says what it is
DEVICE = {"cc": (7, 5)}
type(current_platform).is_cuda = classmethod(lambda cls: True)
type(current_platform).get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(*DEVICE["cc"]))


def namespace(section: dict) -> types.SimpleNamespace:
    found = types.SimpleNamespace(**{key: value for key, value in section.items() if key != "text_config"})
    if isinstance(section.get("text_config"), dict):
        found.text_config = namespace(section["text_config"])
    return found


def vllm_decides(flag, config: dict):
    hf_config = namespace(copy.deepcopy(config))
    convertor = types.SimpleNamespace(hf_config=hf_config)
    convertor._normalize_quantization_config = lambda section: \
        ModelArchConfigConvertorBase._normalize_quantization_config(convertor, section)
    try:
        arch_quantization = copy.deepcopy(ModelArchConfigConvertorBase.get_quantization_config(convertor))
        model_config = types.SimpleNamespace(
            quantization=flag.lower() if flag else None, hf_config=hf_config,
            hf_text_config=getattr(hf_config, "text_config", hf_config),
            model_arch_config=types.SimpleNamespace(quantization_config=arch_quantization),
            allow_deprecated_quantization=True)
        hook = MODELS_CONFIG_MAP.get((config.get("architectures") or [None])[0])
        if hook is not None:
            hook.verify_and_update_model_config(model_config)
        ModelConfig._verify_quantization(model_config)
    except ValueError:
        return "refused"
    return model_config.quantization


def ours(flag, config: dict, cc):
    try:
        point = checkpoint_quantization(config, config.get("model_type", ""), (config.get("architectures") or [""])[0])
        method = effective_method(flag, point, cc).method
    except Problem:
        return "refused"
    return method if method is None or method in quantization.QUANTIZATION_METHODS else "refused"  # vLLM's "Unknown method"


def main(cases: list[dict]) -> list[dict]:
    outcomes = []
    for case in cases:
        DEVICE["cc"] = tuple(case["cc"])
        outcomes.append({**case, "vllm": vllm_decides(case["flag"], case["config"]),
                         "ours": ours(case["flag"], case["config"], tuple(case["cc"]))})
    return outcomes


if __name__ == "__main__":
    assert sys.argv[1] == "judge"
    print(json.dumps(main(json.loads(sys.argv[2]))))
