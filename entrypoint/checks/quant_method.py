"""The quantization method vLLM 0.33.0 runs, decided as its ModelConfig._verify_quantization decides
it (config/model.py), from the --quantization flag and the checkpoint's quantization config: pure
functions over typed values, so the quantization check judges the method that will run, not the one
written.

vLLM's rule:
- the checkpoint's config is config.json's `quantization_config` (else `compression_config`), at the
  top level, else in `text_config`; its `quant_method` lower-cased, `compressed_tensors` spelled
  `compressed-tensors`, a ModelOpt producer's method set from its `quant_algo`
  (transformers_utils/model_arch_config_convertor.py _normalize_quantization_config); Kimi-K3's
  MXFP4-packed compressed-tensors checkpoints run as `mxfp4` (models/config.py);
- the quantization configs that override the method are asked in vLLM's order, the first answer
  wins and replaces both the checkpoint's method and the flag (each rule below cites its class);
- then a flag that differs from the checkpoint's method is an error ("does not match"), and the
  effective method must be one vLLM knows and, when deprecated, allowed by
  --allow-deprecated-quantization.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

from door.files import shown
from door.problem import Problem, UsageError

MODELOPT_METHODS = {"FP8": "modelopt", "FP8_PER_CHANNEL_PER_TOKEN": "modelopt", "FP8_PB_WO": "modelopt",
                    "NVFP4": "modelopt_fp4", "MIXED_PRECISION": "modelopt_mixed"}
KIMI_K3 = ("KimiK3ForConditionalGeneration", "KimiK3MTPModel")
DEEPSEEK_V4_TYPES = ("deepseek_v4", "deepseek_v4_text", "deepseek_v41", "deepseek_v41_text")
AWQ_MIN_CC = (7, 5)  # AutoAWQConfig.get_min_capability(), which MoeWNA16Config compares the device with


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """The checkpoint's quantization config as vLLM reads it, and what the override rules look at."""
    config: Mapping[str, object]  # quant_method normalized
    model_type: str = ""
    architecture: str = ""

    @property
    def method(self) -> str:
        return str(self.config.get("quant_method", ""))


def _section_quantization(section: Mapping[str, object]) -> Mapping[str, object] | None:
    found = section.get("quantization_config")
    if found is None:
        found = section.get("compression_config")
        return found if isinstance(found, dict) else None
    if not isinstance(found, dict):
        return None
    found = dict(found)
    producer = found.get("producer")
    modelopt = found.get("quantization")
    legacy = isinstance(modelopt, dict) and "modelopt_quant_config" in modelopt
    if ((isinstance(producer, dict) and producer.get("name") == "modelopt") or legacy) and isinstance(modelopt, dict):
        algo = modelopt.get("quant_algo")
        if algo is not None:
            if str(algo).upper() not in MODELOPT_METHODS:
                raise Problem(f"quant_algo {str(algo)[:80]!r} is no ModelOpt algorithm vLLM knows",
                              "use a ModelOpt checkpoint of " + ", ".join(MODELOPT_METHODS))
            found["quant_method"] = MODELOPT_METHODS[str(algo).upper()]
    return found


def checkpoint_quantization(top: Mapping[str, object], model_type: str = "",
                            architecture: str = "") -> Checkpoint | None:
    """The checkpoint's quantization config in a config.json object `top` (None: not quantized);
    Problem where vLLM stops reading it (an unknown ModelOpt algorithm)."""
    found = _section_quantization(top)
    text = top.get("text_config")
    if found is None and isinstance(text, dict):
        found = _section_quantization(text)
    if found is None:
        return None
    method = found.get("quant_method", "")
    method = (method if isinstance(method, str) else "").lower().replace("compressed_tensors", "compressed-tensors")
    if architecture in KIMI_K3 and method == "compressed-tensors" and found.get("format") == "mxfp4-pack-quantized":
        method = "mxfp4"
    return Checkpoint({**found, "quant_method": method}, model_type, architecture)


def _modelopt_algo(config: Mapping[str, object]) -> str | None:
    """ModelOptQuantConfigBase._extract_modelopt_quant_algo."""
    if not str(config.get("quant_method", "")).lower().startswith("modelopt"):
        return None
    if "quantization" in config:
        inner = config["quantization"]
        return str(inner.get("quant_algo", "")).upper() if isinstance(inner, dict) else None
    return str(config.get("quant_algo", "")).upper()


def _gptq_desc_act_ok(config: Mapping[str, object]) -> bool:
    """utils/gptq_utils.normalize_and_validate_gptq_desc_act does not raise."""
    desc_act, group_size = config.get("desc_act", False), config.get("group_size")
    if desc_act and group_size != -1:
        return False
    dynamic = config.get("dynamic") or {}
    for pattern, rule in (dynamic.items() if isinstance(dynamic, dict) else ()):
        if str(pattern).startswith("-:") or not isinstance(rule, dict):
            continue
        if rule.get("desc_act", desc_act) and rule.get("group_size", group_size) != -1:
            return False
    return True


# An override rule: (checkpoint, the flag lower-cased or None, the device's capability or None) -> the
# method vLLM switches to, or None. One per quantization config class that overrides, in the order
# _verify_quantization asks them (its `overrides` list; names sharing a class are asked once).
Rule = Callable[[Checkpoint, "str | None", "tuple[int, int] | None"], "str | None"]


def _gptq(point: Checkpoint, user, cc):  # auto_gptq.py AutoGPTQConfig
    return "auto_gptq" if point.method == "gptq" and user in (None, "gptq", "gptq_marlin", "auto_gptq", "marlin") \
        else None


def _awq(point: Checkpoint, user, cc):  # auto_awq.py AutoAWQConfig (a CUDA device)
    return "auto_awq" if point.method == "awq" and user in (None, "awq", "awq_marlin", "auto_awq", "marlin") else None


def _inc(point: Checkpoint, user, cc):  # inc/inc.py INCConfig
    return "inc" if point.method == "auto-round" else None


def _moe_wna16(point: Checkpoint, user, cc):  # moe_wna16.py MoeWNA16Config.is_moe_wna16_compatible
    if user != "moe_wna16":
        return None
    bits = point.config.get("bits")
    gptq = point.method == "gptq" and _gptq_desc_act_ok(point.config) and bits in (4, 8)
    awq = point.method == "awq" and bits == 4 and cc is not None and cc >= AWQ_MIN_CC
    return "moe_wna16" if gptq or awq else None


def _modelopt(algo_matches: Callable[[str], bool], method: str) -> Rule:  # modelopt.py, one per config class
    def rule(point: Checkpoint, user, cc):
        algo = _modelopt_algo(point.config)
        return method if algo is not None and algo_matches(algo) else None
    return rule


def _gpt_oss_mxfp4(point: Checkpoint, user, cc):  # mxfp4.py GptOssMxfp4Config
    return "gpt_oss_mxfp4" if point.method in ("mxfp4", "gpt_oss_mxfp4") and point.model_type == "gpt_oss" else None


def _deepseek_v4_fp8(point: Checkpoint, user, cc):  # models/deepseek_v41/quant_config.py (CUDA's)
    if point.method not in ("fp8", "deepseek_v4_fp8"):
        return None
    return "deepseek_v4_fp8" if point.model_type in DEEPSEEK_V4_TYPES or user == "deepseek_v4_fp8" else None


def _humming(point: Checkpoint, user, cc):  # humming.py HummingConfig
    if user == "humming" and point.model_type == "gpt_oss" and point.method == "mxfp4":
        raise UsageError("humming is refused by vLLM for a gpt-oss mxfp4 checkpoint",
                         "remove it and use --moe-backend humming instead")
    return "humming" if user == "humming" else None


OVERRIDE_RULES: tuple[Rule, ...] = (
    _gptq, _awq, _inc, _moe_wna16,
    _modelopt(lambda algo: algo == "FP8", "modelopt"),
    _modelopt(lambda algo: "NVFP4" in algo or "FP4" in algo, "modelopt_fp4"),
    _modelopt(lambda algo: "MXFP8" in algo, "modelopt_mxfp8"),
    _modelopt(lambda algo: algo == "MIXED_PRECISION", "modelopt_mixed"),
    _gpt_oss_mxfp4, _deepseek_v4_fp8, _humming,
)


@dataclasses.dataclass(frozen=True)
class Choice:
    """The method vLLM runs (None: none) and what led to it, for messages."""
    method: str | None
    flag: str | None = None        # the --quantization value, lower-cased, as vLLM takes it
    written: str | None = None     # the checkpoint's own method (normalized), when quantized


def effective_method(flag: str | None, point: Checkpoint | None, cc: tuple[int, int] | None = None) -> Choice:
    """vLLM 0.33.0's _verify_quantization up to the known-method check: the method after the
    overrides; UsageError where the flag does not match the checkpoint."""
    user = flag.lower() if flag else None
    if point is None:
        return Choice(user, user)
    rules = (_humming, *OVERRIDE_RULES) if user == "humming" else OVERRIDE_RULES
    method = point.method
    for rule in rules:
        override = rule(point, user, cc)
        if override is not None:
            return Choice(override, user, point.method or None)
    method = method or None
    if user is not None and user != method:
        raise UsageError(f"{shown(user[:80])} does not match the checkpoint's quantization_config method ({method}) "
                         "and no quantization config of vLLM takes it over, so vLLM refuses it",
                         "remove it" + (f" (vLLM then runs the checkpoint's {method})" if method else
                                        " (the checkpoint's quantization_config names no method)"))
    return Choice(method, user, method)
