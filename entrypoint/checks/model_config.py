"""A model's config.json as typed values: the one place that says which fields the checks read and
what type each must have, so the model, drafter, parsers, audio, quantization, fit and parallel
checks can trust them. A field present with the wrong type is refused naming the field; a field
absent (or null, which transformers reads as "derive it") is left to the model's class defaults.

`max_len_problem` is vLLM 0.33.0's `_get_and_verify_max_len` (vllm/config/model.py) over the same
values, so MAX_MODEL_LEN above the model's limit is refused before the load, as vLLM refuses it after."""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from ..files import json_kind

BIG = 2**40  # no head count, width or layer count comes near this; 10**30 is a typo or an attack
# attention and size fields the fit, parallel and memory reasoning read: positive integers
INT_FIELDS = ("num_attention_heads", "num_key_value_heads", "hidden_size", "num_hidden_layers", "vocab_size")
# integers where 0 means "derive it" or "none" in real configs (glm5_next head_dim, qwen2_moe sliding_window)
COUNT_FIELDS = ("head_dim", "global_head_dim", "num_global_key_value_heads", "sliding_window",
                "sliding_window_pattern", "num_kv_shared_layers")
# vLLM's derive_max_model_len_and_key keys, in its order (transformers_utils/model_arch_config_convertor.py)
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
OBJECT_FIELDS = ("text_config", "quantization_config", "vision_config", "audio_config", "audio_encoder_config",
                 "audio_tower_config", "rope_scaling", "rope_parameters")
# rope types whose max_position_embeddings is already scaled (vLLM does not apply `factor` again)
PRESCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
DEFAULT_MAX_LEN = 2048  # what vLLM assumes when the config names no limit and MAX_MODEL_LEN is unset


class ConfigProblem(ValueError):
    """A field of config.json the checks cannot use; the message names the field."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    raw: dict                       # the whole object, for the checks that pass it on (fit, parallel)
    text: dict                      # text_config when there is one, else the top level (vLLM's hf_text_config)
    model_type: str                 # "" when absent
    text_model_type: str
    architectures: tuple[str, ...]
    quant_method: str | None        # quantization_config.quant_method
    rope: tuple[dict, ...]          # the text config's rope parameters, one per layer type when nested
    # (key, value) of the smallest max-length field of the text config; None when it names none
    max_len: tuple[str, float] | None
    model_max_length: float | None

    @property
    def kind(self) -> str:
        """What the model is, for messages: its model_type, else its first architecture."""
        return self.model_type or (self.architectures[0] if self.architectures else "an unknown model")


def _wrong(where: str, value: object, expected: str) -> ConfigProblem:
    return ConfigProblem(f"'{where}' is {json_kind(value)}, expected {expected}")


def _int_field(section: Mapping, key: str, prefix: str, least: int = 1) -> None:
    value = section.get(key)
    if value is None:
        return
    expected = "a positive integer" if least else "an integer >= 0"
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(prefix + key, value, expected)
    if not least <= value < BIG:
        raise _wrong(prefix + key, value, expected + " below 2^40")


def _number(value: object, where: str, minimum_exclusive: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and math.isnan(value):
        raise _wrong(where, value, "a positive number")
    if not value > minimum_exclusive:
        raise _wrong(where, value, "a positive number")
    return value


def _string(section: Mapping, key: str, prefix: str) -> str:
    value = section.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _wrong(prefix + key, value, "a string")
    return value


def _objects(section: Mapping, prefix: str) -> None:
    for key in OBJECT_FIELDS:
        value = section.get(key)
        if value is not None and not isinstance(value, dict):
            raise _wrong(prefix + key, value, "a JSON object")


def _rope(text: Mapping, prefix: str) -> tuple[dict, ...]:
    """transformers' order: rope_scaling (legacy) when set, else rope_parameters; nested by layer
    type when every value is an object (vllm.transformers_utils.config.iter_rope_parameters)."""
    key = "rope_scaling" if text.get("rope_scaling") else "rope_parameters"
    rope = text.get(key) or {}
    nested = bool(rope) and all(isinstance(value, dict) or value is None for value in rope.values())
    entries = [(f"{prefix}{key}.{name}.", value) for name, value in rope.items() if value] if nested \
        else ([(f"{prefix}{key}.", rope)] if rope else [])
    for where, entry in entries:
        for field in ("rope_type", "type"):
            if entry.get(field) is not None and not isinstance(entry[field], str):
                raise _wrong(where + field, entry[field], "a string")
        if entry.get("factor") is not None:
            _number(entry["factor"], where + "factor")
        if entry.get("original_max_position_embeddings") is not None:
            _int_field(entry, "original_max_position_embeddings", where)
    return tuple(entry for _, entry in entries)


def parse_config(config: object) -> ModelConfig:
    """The typed view of a parsed config.json; ConfigProblem names the first unusable field."""
    if not isinstance(config, dict):
        raise ConfigProblem(f"the top level is {json_kind(config)}, expected a JSON object")
    _objects(config, "")
    text = config.get("text_config") or config
    prefix = "text_config." if text is not config else ""
    if text is not config:
        _objects(text, prefix)
    for key in INT_FIELDS:
        _int_field(text, key, prefix)
    for key in COUNT_FIELDS:
        _int_field(text, key, prefix, least=0)
    architectures = config.get("architectures")
    if architectures is None:
        architectures = []
    if not isinstance(architectures, list) or not all(isinstance(name, str) for name in architectures):
        raise _wrong("architectures", architectures, "a list of class names")
    layer_types = text.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list)
                                    or not all(isinstance(kind, str) for kind in layer_types)):
        raise _wrong(prefix + "layer_types", layer_types, "a list of layer type names")
    quantization = config.get("quantization_config") or {}
    quant_method = _string(quantization, "quant_method", "quantization_config.") or None
    limits = []
    for key in MAX_LEN_KEYS:
        if text.get(key) is not None:
            limits.append((key, _number(text[key], prefix + key)))
    model_max_length = text.get("model_max_length")
    return ModelConfig(
        raw=config, text=text, model_type=_string(config, "model_type", ""),
        text_model_type=_string(text, "model_type", prefix),
        architectures=tuple(architectures), quant_method=quant_method, rope=_rope(text, prefix),
        max_len=min(limits, key=lambda item: item[1]) if limits else None,
        model_max_length=float(model_max_length) if model_max_length else None)


def derived_max_len(config: ModelConfig) -> tuple[str, float] | None:
    """(what sets it, the limit) as vLLM derives it: the smallest max-length key (model_max_length
    wins when set), times the rope `factor` unless the rope type is pre-scaled or the model is
    Gemma 3; None when the config names no limit (vLLM then takes MAX_MODEL_LEN as given)."""
    if config.max_len is None:
        return None
    key, limit = config.max_len
    if config.model_max_length:
        key, limit = "model_max_length", config.model_max_length
    model_type = config.text_model_type or config.model_type
    if config.rope and "gemma3" not in model_type:
        factor = 1.0
        for entry in config.rope:
            rope_type = entry.get("rope_type") or entry.get("type") or "default"
            if rope_type not in PRESCALED_ROPE:
                factor = entry.get("factor", factor)
        factor = 1.0 if factor is None else factor
        if factor != 1.0:
            return f"{key} {number(limit)} x rope factor {number(factor)}", limit * factor
    return key, limit


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e18 else f"{value:g}"


def max_len_problem(config: ModelConfig | None, max_model_len: int | None) -> tuple[str, str] | None:
    """(message, fix) when MAX_MODEL_LEN is above what vLLM derives from the model's config.json
    (vLLM refuses it after the load unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set); None when it fits,
    is unset, or cannot be judged (the config names no limit: vLLM then takes MAX_MODEL_LEN)."""
    if config is None or max_model_len is None or max_model_len == -1:
        return None
    derived = derived_max_len(config)
    if derived is None:
        return None
    source, limit = derived
    if max_model_len <= limit:
        return None
    if config.model_max_length is not None and max_model_len <= config.model_max_length:
        return None  # vLLM lets model_max_length allow it
    most = int(limit) if limit < BIG else limit
    return (f"MAX_MODEL_LEN={max_model_len} is above the model's limit of {number(most)} tokens "
            f"(config.json {source})",
            f"set MAX_MODEL_LEN to {number(most)} or less (or leave it unset for the model's own limit)")
