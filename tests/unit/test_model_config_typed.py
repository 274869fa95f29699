"""contract/model_config.py, the one typed reader of config.json: any JSON value ends in a ModelConfig or a
ConfigProblem naming the field, never another exception; and the fit check reads what it typed with the
same rules."""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contract.model_config import (COUNT_FIELDS, INT_FIELDS, MAX_LEN_KEYS, OBJECT_FIELDS, ConfigProblem, ModelConfig,
                                   derived_max_len, max_len_problem, parse_config)
from patches.fitcheck import families

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**64, max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
KNOWN = (*INT_FIELDS, *COUNT_FIELDS, *MAX_LEN_KEYS, *OBJECT_FIELDS, "model_type", "architectures", "layer_types",
         "sliding_window_pattern", "attn_logit_softcapping", "per_layer_config", "kv_lora_rank", "index_topk",
         "mamba_d_state", "linear_attn_config", "conv_L_cache")
WRONG = st.sampled_from([None, True, 0, -1, 2**40, 1.5, float("nan"), float("inf"), "8", [], [1], {}, {"a": 1}])
GEMMA4 = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
          "text_config": {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 1,
                          "head_dim": 256, "global_head_dim": 512, "sliding_window": 512,
                          "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 131072}}
LLAMA = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
         "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}


def planted(base: dict, field: str, value: object, in_text: bool) -> dict:
    config = json.loads(json.dumps(base))
    (config["text_config"] if in_text and isinstance(config.get("text_config"), dict) else config)[field] = value
    return config


def read(config: object) -> ModelConfig | ConfigProblem:
    try:
        return parse_config(config, "config.json")
    except ConfigProblem as problem:
        return problem


def assert_one_line_naming(problem: ConfigProblem, field: str | None = None) -> None:
    message = str(problem)
    assert "\n" not in message and message.startswith("config.json: ") and "expected" in message
    if field is not None:
        assert f"{field}'" in message or "top level" in message


@given(json_values)
@example(float("nan"))
@example({"text_config": {}})
def test_any_json_value_is_a_typed_config_or_a_problem_naming_the_field(value):
    found = read(value)
    if isinstance(found, ConfigProblem):
        assert_one_line_naming(found)
        return
    derived_max_len(found)
    max_len_problem(found, 4096)
    assert found.text is found.top or isinstance(value.get("text_config"), dict)


@given(st.sampled_from([GEMMA4, LLAMA]), st.sampled_from(KNOWN), WRONG, st.booleans())
@example(LLAMA, "max_position_embeddings", float("nan"), False)
@example(GEMMA4, "model_type", None, True)  # found: the fit check read a null text model_type with .startswith
def test_a_wrong_type_in_a_known_field_is_refused_naming_it_or_read_by_the_fit_check(base, field, value, in_text):
    config = planted(base, field, value, in_text)
    found = read(config)
    if isinstance(found, ConfigProblem):
        assert_one_line_naming(found, field)
        return
    try:  # what the typed reader let through, the fit check reads with the same rules: shapes or a refusal
        families.model_layers(found, "m", "config.json")
        families.config_refused_on(found, "m", "config.json", 1, 75)
    except ConfigProblem as problem:
        assert "\n" not in str(problem) and str(problem).startswith("config.json: ")


@pytest.mark.parametrize("text_config, reads", [({}, "text_config"), (None, "top"), ({"num_attention_heads": 4},
                                                                                      "text_config")])
def test_an_empty_text_config_is_the_text_section_and_null_is_the_top_level(text_config, reads):
    config = parse_config({**LLAMA, "text_config": text_config})
    assert (config.text is config.top) == (reads == "top")
    assert config.text.prefix == ("" if reads == "top" else "text_config.")


def test_the_fit_check_takes_the_one_error_type():
    with pytest.raises(ConfigProblem, match="config.json: 'text_config.num_attention_heads' is not set"):
        families.model_layers(parse_config({"model_type": "gemma4", "text_config": {}}, "config.json"), "m", "config.json")


FIT_FIELDS = (*KNOWN, "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "use_sliding_window",
              "use_bidirectional_attention", "is_causal", "hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim",
              "ssm_state_size", "n_groups", "linear_num_key_heads", "linear_num_value_heads", "mamba_ssm_dtype",
              "qk_rope_head_dim", "local_attention", "n_head", "n_embd", "attention_head_dim", "dtype", "torch_dtype")
MODEL_TYPES = st.sampled_from(["gemma4_text", "llama", "nemotron_h", "jamba", "mamba", "lfm2", "qwen3_next", "qwen3_5",
                               "kimi_linear", "deepseek_v3", "modernbert", "nomic_bert", "distilbert", "plamo2", "zamba2"])


@given(st.sampled_from([GEMMA4, LLAMA]), MODEL_TYPES, st.dictionaries(st.sampled_from(FIT_FIELDS), json_values, max_size=4),
       st.sampled_from([1, 2, 4]), st.sampled_from([75, 86, 90]))
def test_whatever_the_fields_hold_the_fit_check_ends_in_shapes_or_a_config_problem(base, model_type, fields, tp, cc):
    config = planted(base, "model_type", model_type, True)
    for field, value in fields.items():
        config = planted(config, field, value, True)
    found = read(config)
    if isinstance(found, ConfigProblem):
        return
    try:
        shapes = families.model_layers(found, "m", "config.json", tp)
        families.refused_on(shapes, cc)
        families.unrecorded_on(shapes, cc)
        families.config_refused_on(found, "m", "config.json", tp, cc)
    except ConfigProblem as problem:
        assert "\n" not in str(problem) and str(problem).startswith("config.json: ")
