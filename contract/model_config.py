"""A model's config.json as typed values, read once: the one place that says which fields the preflight's
checks and the fit check (patches/fitcheck) read and what type each must have. Standard library only:
this module is copied into the image and imported on both sides of it. One error type, ConfigProblem,
names the field (and, where given, the file) and what it expected.

Rules, the same for every reader: a field absent or null is "derive it" (transformers fills it from the
model class's defaults); a positive integer is an int (not a bool) in [1, 2^40); a count one in [0, 2^40)
(0 is "derive it" or "none" in real configs: glm5_next head_dim, qwen2_moe sliding_window); a number is an
int or a finite float; a string, a JSON object and a list of strings are those JSON types.

The text section is transformers' `get_text_config()` (what vLLM's `hf_text_config` returns): the
`text_config` object when the key holds one, even an empty one (its fields then come from the class's
defaults), and the top level when it is absent or null. An empty `text_config` is not the top level.

`max_len_problem` is vLLM 0.33.0's `_get_and_verify_max_len` (vllm/config/model.py) over the same
values, so MAX_MODEL_LEN above the model's limit is refused before the load, as vLLM refuses it after."""
from __future__ import annotations

from door.problem import UsageError
import dataclasses
import math
from typing import Mapping

from door.files import json_kind

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



class ConfigProblem(UsageError):
    """A field of config.json that cannot be used (exit 2); the message names the field. Caught apart by
    the model check, the preflight's fit lookup (a config it cannot judge) and the parallel check."""


def _problem(where: str, field: str, value: object, expected: str, absent: bool = False) -> ConfigProblem:
    found = "not set" if absent else json_kind(value)
    return ConfigProblem(f"{where + ': ' if where else ''}'{field}' is {found}, expected {expected}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Section:
    """One JSON object of config.json (the top level, the text section, a tower's, a sub-object) with
    typed accessors. `prefix` is its path in messages ("text_config."), `where` the file or model the
    messages name ("" for none: the caller names it)."""

    values: Mapping
    prefix: str = ""
    where: str = ""

    def at(self, where: str) -> Section:
        """This section, its messages naming `where`."""
        return dataclasses.replace(self, where=where)

    def with_values(self, **fields: object) -> Section:
        """This section with `fields` set (a field set to None is removed): a model class's defaults or a
        reader's derived values over what the file holds."""
        values = {**self.values, **fields}
        return dataclasses.replace(self, values={key: value for key, value in values.items() if value is not None})

    def under(self, defaults: Mapping) -> Section:
        """This section over `defaults` (a model class's): the file's values win."""
        return dataclasses.replace(self, values={**defaults, **self.values})

    def problem(self, key: str, expected: str) -> ConfigProblem:
        """The refusal of this section's `key` for a reader's own reason (`expected`)."""
        return _problem(self.where, self.prefix + key, self.values.get(key), expected, self.values.get(key) is None)

    def has(self, key: str) -> bool:
        """Whether the field is set (present and not null)."""
        return self.values.get(key) is not None

    def value(self, key: str, default: object = None) -> object:
        """The field as the file holds it (any JSON type), `default` when absent or null: for the fields a
        reader tests for one value only (`is_causal is False`) or shows as they are."""
        value = self.values.get(key)
        return default if value is None else value

    def keys(self) -> tuple[str, ...]:
        return tuple(self.values)

    def positive_int(self, key: str, default: int | None = None) -> int:
        """An int in [1, 2^40); `default` when absent or null (ConfigProblem when there is none)."""
        return self._int(key, default, 1)

    def count(self, key: str, default: int | None = None) -> int:
        """An int in [0, 2^40); `default` when absent or null (ConfigProblem when there is none)."""
        return self._int(key, default, 0)

    def _int(self, key: str, default: int | None, least: int) -> int:
        value = self.values.get(key)
        expected = "a positive integer" if least else "an integer >= 0"
        if value is None and default is None:
            raise self.problem(key, expected)
        value = default if value is None else value
        if not _is_int(value) or not least <= value:
            raise _problem(self.where, self.prefix + key, value, expected)
        if value >= BIG:
            raise _problem(self.where, self.prefix + key, value, expected + " below 2^40")
        return value

    def optional_int(self, key: str, least: int = 1) -> int | None:
        """positive_int (count with least=0), None when absent or null."""
        return None if self.values.get(key) is None else self._int(key, None, least)

    def number(self, key: str, default: float | None = None, minimum: float = 0.0, inclusive: bool = False) -> float:
        """An int or float (not NaN; infinity is "no limit") above `minimum` (at least it with `inclusive`); `default` when absent or null."""
        value = self.values.get(key)
        expected = f"a number >= {minimum:g}" if inclusive else ("a positive number" if minimum == 0 else
                                                                 f"a number above {minimum:g}")
        if value is None and default is None:
            raise self.problem(key, expected)
        value = default if value is None else value
        if (not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value)
                or not (value >= minimum if inclusive else value > minimum)):
            raise _problem(self.where, self.prefix + key, value, expected)
        return value

    def string(self, key: str) -> str:
        """A string; "" when absent or null."""
        value = self.values.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise _problem(self.where, self.prefix + key, value, "a string")
        return value

    def strings(self, key: str, expected: str = "a list of strings") -> tuple[str, ...] | None:
        """A list of strings; None when absent or null."""
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise _problem(self.where, self.prefix + key, value, expected)
        return tuple(value)

    def object(self, key: str) -> Section | None:
        """A JSON object as a section of its own; None when absent or null."""
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _problem(self.where, self.prefix + key, value, "a JSON object")
        return Section(value, f"{self.prefix}{key}.", self.where)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    top: Section                    # the whole object
    text: Section                   # the text section (see the module's docstring)
    model_type: str                 # "" when absent
    text_model_type: str
    architectures: tuple[str, ...]
    quant_method: str | None        # quantization_config.quant_method
    rope: tuple[dict, ...]          # the text config's rope parameters, one per layer type when nested
    # (key, value) of the smallest max-length field of the text config; None when it names none
    max_len: tuple[str, float] | None
    model_max_length: float | None

    @property
    def names_a_model(self) -> bool:
        """architectures or model_type: what vLLM and transformers choose the model's code by (a JSON
        object with neither, an npm record say, is no Hugging Face model's config)."""
        return bool(self.architectures or self.model_type)

    @property
    def kind(self) -> str:
        """What the model is, for messages: its model_type, else its first architecture."""
        return self.model_type or (self.architectures[0] if self.architectures else "an unknown model")

    @property
    def type_of_text(self) -> str:
        """The text model's type: the text section's model_type, else the top level's ("" for neither)."""
        return self.text_model_type or self.model_type

    def at(self, where: str) -> ModelConfig:
        """This config, its sections' messages naming `where` (the file or model)."""
        return dataclasses.replace(self, top=self.top.at(where), text=self.text.at(where))


def _rope(text: Section) -> tuple[dict, ...]:
    """transformers' order: rope_scaling (legacy) when set, else rope_parameters; nested by layer
    type when every value is an object (vllm.transformers_utils.config.iter_rope_parameters)."""
    key = "rope_scaling" if text.value("rope_scaling") else "rope_parameters"
    rope = text.object(key) or Section({}, text.prefix + key + ".")
    nested = bool(rope.values) and all(isinstance(value, dict) or value is None for value in rope.values.values())
    entries = [rope.object(name) for name in rope.keys() if rope.value(name)] if nested \
        else ([rope] if rope.values else [])
    for entry in entries:
        for field in ("rope_type", "type"):
            entry.string(field)
        if entry.has("factor"):
            entry.number("factor")
        entry.optional_int("original_max_position_embeddings")
    return tuple(dict(entry.values) for entry in entries)


def parse_config(config: object, where: str = "") -> ModelConfig:
    """The typed view of a parsed config.json; ConfigProblem names the first unusable field (and
    `where`, the file or model, when given)."""
    if not isinstance(config, dict):
        raise ConfigProblem(f"{where + ': ' if where else ''}the top level is {json_kind(config)}, "
                            "expected a JSON object")
    top = Section(config, "", where)
    for key in OBJECT_FIELDS:
        top.object(key)
    text = top.object("text_config") or top
    if text is not top:
        for key in OBJECT_FIELDS:
            text.object(key)
    for key in INT_FIELDS:
        text.optional_int(key)
    for key in COUNT_FIELDS:
        text.optional_int(key, least=0)
    architectures = top.strings("architectures", "a list of class names") or ()
    text.strings("layer_types", "a list of layer type names")
    quantization = top.object("quantization_config")
    quant_method = (quantization.string("quant_method") if quantization else "") or None
    limits = [(key, text.number(key)) for key in MAX_LEN_KEYS if text.has(key)]
    model_max_length = text.value("model_max_length")
    return ModelConfig(
        top=top, text=text, model_type=top.string("model_type"), text_model_type=text.string("model_type"),
        architectures=architectures, quant_method=quant_method, rope=_rope(text),
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
