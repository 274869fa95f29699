"""The fit check's family matrix: the build's fit table answers for Llama, Qwen, Mistral and
Nemotron configs (transformers' classes, published numbers) from verdicts keyed by head size,
query-per-KV ratio and window, whatever their head counts."""
from contract.model_config import ConfigProblem, parse_config
import pytest

from patches.fitcheck import lookup, fit_table as table
from patches.fitcheck.attention import BASE_BLOCK_SIZE, CLASS_DEFAULTS, ENCODER, HYBRID_BLOCK_SIZE, LayerShape, UNREAD_ENCODER_TYPES, build_matrix
from patches.fitcheck.family import UnprovenLayers
from patches.fitcheck.families import attention_layers, builtin_shapes, model_layers
from patches.fitcheck.families.dense import FAMILY_SHAPES
from patches.fitcheck.families.gated_delta_net import GdnShape
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS, BUILTIN_MODELS
from patches.fitcheck.families.kda import KdaShape
from patches.fitcheck.families.mla import MlaShape
from patches.fitcheck.proof import FitOptions, UsageError, plan
from tests.support import family_configs

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}


def family_table(shared_by_layer: dict | None = None) -> tuple[dict, dict]:
    """A fit table whose verdicts come from report rows of the family matrix (3 launches per layer,
    each layer's need distinct so a test can tell which verdict answered)."""
    shared_by_layer = shared_by_layer or {}
    needs = {shape.layer: shared_by_layer.get(shape.layer, 1000 + index)
             for index, shape in enumerate(FAMILY_SHAPES)}
    rows = [{"model": s.model, "layer": s.layer, "shared": needs[s.layer], "fits": needs[s.layer] <= 65536}
            for s in FAMILY_SHAPES for _ in range(3)]
    return table.merge(None, [], VERSIONS, table.shape_verdicts(rows, FAMILY_SHAPES, 75, 65536)), needs


@pytest.mark.parametrize("name", sorted(family_configs.MODELS))
def test_each_family_config_is_answered_by_its_family_layers_verdict(name):
    document, needs = family_table()
    read = attention_layers(parse_config(family_configs.config_dict(name), "config.json"), name, "config.json")
    found = lookup.decide(document, read, 75, 65536, VERSIONS)
    assert found.hit, found.miss
    assert found.all_fit and found.max_shared == needs[family_configs.MODELS[name][3]]


def test_a_family_layer_that_does_not_fit_fails_the_model_that_has_it():
    document, _ = family_table({"head128-r7": 70000})
    read = attention_layers(parse_config(family_configs.config_dict("qwen2.5-7b"), "config.json"), "qwen2.5-7b", "config.json")
    found = lookup.decide(document, read, 75, 65536, VERSIONS)
    assert found.hit and not found.all_fit and found.worst["max_shared"] == 70000


def test_a_window_the_config_turns_off_is_not_read_as_sliding():
    # Qwen2.5's config.json: sliding_window 131072 with use_sliding_window false; vLLM serves full
    # attention, so the fit check must check (and look up) full attention.
    config = family_configs.config_dict("qwen2.5-7b")
    assert config["sliding_window"] == 131072 and config["use_sliding_window"] is False
    [layer] = attention_layers(parse_config(config, "config.json"), "qwen", "config.json")
    assert layer.sliding_window is None and layer.queries_per_kv == 7


def test_the_matrix_covers_the_families_head_sizes_and_ratios():
    heads = {shape.head_size for shape in builtin_shapes("all")}
    assert {64, 80, 96, 128, 256, 512} <= heads
    assert {s.queries_per_kv for s in FAMILY_SHAPES if s.head_size == 128} == set(range(1, 9))
    assert all(s.model == "family" for s in FAMILY_SHAPES)
    assert not any(s.model == "family" for s in builtin_shapes("gemma4"))
    cases = build_matrix(FAMILY_SHAPES, mm_prefix=False)
    for shape in FAMILY_SHAPES:  # both paths: 2D prefill and 3D decode, per family layer
        kinds = {c.kind for c in cases if c.shape == shape}
        assert {"prefill", "decode", "decode-batch", "spec"} <= kinds


def test_layers_with_equal_fields_share_one_verdict_that_holds_for_both():
    small = LayerShape("a", "x", 8, 2, 128, None)
    large = LayerShape("b", "y", 32, 8, 128, None)  # other head counts, same ratio
    rows = [{"model": "a", "layer": "x", "shared": 40000, "fits": True},
            {"model": "b", "layer": "y", "shared": 70000, "fits": False},
            {"model": "b", "layer": "y", "shared": 30000, "fits": True}]
    [verdict] = table.shape_verdicts(rows, [small, large], 75, 65536)
    assert (verdict["queries_per_kv"], verdict["max_shared"], verdict["all_fit"], verdict["launches"]) == \
        (4, 70000, False, 2)


def test_an_unknown_matrix_is_refused_before_vllm_is_imported():
    with pytest.raises(UsageError, match="--matrix 'llama' is unknown"):
        plan(FitOptions(matrix="llama"))


def test_a_gemma3_config_with_a_window_pattern_and_no_layer_types_has_its_full_layers():
    # Gemma 3 checkpoints saved before layer_types existed: sliding_window_pattern 6 = five sliding
    # layers, then one full-attention layer. Both kinds are checked, not the sliding one alone.
    config = {"model_type": "gemma3_text", "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
              "sliding_window": 1024, "sliding_window_pattern": 6}
    read = attention_layers(parse_config(config, "config.json"), "gemma3", "config.json")
    assert [(s.layer, s.sliding_window) for s in read] == [("sliding", 1024), ("global", None)]
    document, needs = family_table()
    found = lookup.decide(document, [read[1]], 75, 65536, VERSIONS)
    assert found.hit and found.max_shared == needs["head256-r2"]


@pytest.mark.parametrize("model_type, cls", [("gemma3_text", "Gemma3TextConfig"), ("gemma2", "Gemma2Config")])
def test_class_defaults_are_transformers_own(model_type, cls):
    import transformers

    made = getattr(transformers, cls)().to_dict()
    defaults = CLASS_DEFAULTS[model_type]
    for field in ("num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window"):
        assert defaults[field] == made[field], field
    assert defaults.get("attn_logit_softcapping") == made.get("attn_logit_softcapping")
    pattern = defaults["sliding_window_pattern"]
    assert made["layer_types"][:pattern] == ["sliding_attention"] * (pattern - 1) + ["full_attention"]


def test_a_gemma3_config_that_leaves_the_heads_to_the_class_is_answered_from_the_table():
    # google/gemma-3-4b-it's config.json names neither heads nor head size in text_config (and issue
    # 36802's Nemotron-Content-Safety-Reasoning-4B is built on it): before, exit 2 ("is None").
    short_form = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                                                          "num_hidden_layers": 34, "sliding_window": 1024}}
    read = attention_layers(parse_config(short_form, "config.json"), "gemma-3-4b-it", "config.json")
    assert [(s.layer, s.num_query_heads, s.num_kv_heads, s.head_size, s.sliding_window) for s in read] == \
        [("sliding", 8, 4, 256, 1024), ("global", 8, 4, 256, None)]
    gemma4_12b_sliding = [s for s in BUILTIN_MODELS["gemma4-12b"] if s.layer == "sliding"]
    verdict_shapes = gemma4_12b_sliding + list(FAMILY_SHAPES)
    rows = [{"model": s.model, "layer": s.layer, "shared": 49152, "fits": True} for s in verdict_shapes]
    document = table.merge(None, [], VERSIONS, table.shape_verdicts(rows, verdict_shapes, 75, 65536))
    assert lookup.decide(document, read, 75, 65536, VERSIONS).hit


@pytest.mark.parametrize("config", [
    {"model_type": "gemma3_text", "use_bidirectional_attention": True, "sliding_window": 512},
    {"model_type": "qwen3", "is_causal": False, "num_attention_heads": 16, "head_dim": 128},
    {"model_type": "bert", "num_attention_heads": 12, "hidden_size": 768},
])
def test_bidirectional_attention_is_read_as_encoder_layers(config):
    # vLLM runs encoder attention through context_attention_fwd (the clamp's encoder site), so its layers
    # are judged by that kernel's verdicts, never by the decoder launcher's.
    read = attention_layers(parse_config(config, "config.json"), "m", "config.json")
    assert read and all(s.attention == ENCODER for s in read)
    assert all(s.block_size == BASE_BLOCK_SIZE and s.softcap == 0.0 for s in read), "no pages, no softcap"


@pytest.mark.parametrize("model_type", sorted(UNREAD_ENCODER_TYPES))
def test_encoders_whose_attention_fields_are_not_read_stay_not_proven_naming_why(model_type):
    with pytest.raises(UnprovenLayers, match="context_attention_fwd") as raised:
        attention_layers(parse_config({"model_type": model_type, "num_attention_heads": 12, "hidden_size": 768}, "config.json"),
                                  "m", "config.json")
    assert UNREAD_ENCODER_TYPES[model_type] in str(raised.value)


def test_gemma4_vision_bidirectional_attention_stays_in_the_checked_launcher():
    config = dict(BUILTIN_CONFIGS["gemma4-e2b"], use_bidirectional_attention="vision")
    assert attention_layers(parse_config(config, "config.json"), "e2b", "config.json") == \
        attention_layers(parse_config(BUILTIN_CONFIGS["gemma4-e2b"], "config.json"), "e2b", "config.json")


@pytest.mark.parametrize("config_class", ["DeepseekV2Config", "DeepseekV3Config", "KimiLinearConfig"])
def test_multi_head_latent_attention_is_never_judged_as_plain_heads(config_class):
    # vLLM runs MLA with its MLA kernels (TRITON_MLA on an RTX 3090), whose tiles follow kv_lora_rank,
    # not num_attention_heads x head_dim: reading those as decoder attention said "fits"
    import transformers


    config = getattr(transformers, config_class)().to_dict()
    assert attention_layers(parse_config(config, "config.json"), "m", "config.json") == []
    if config_class == "KimiLinearConfig":  # MLA beside KDA layers (KdaShape)
        latent, kda = model_layers(parse_config(config, "config.json"), "m", "config.json")
        assert isinstance(kda, KdaShape)
    else:
        (latent,) = model_layers(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(latent, MlaShape) and latent.kv_lora_rank == 512


def test_layer_kinds_other_than_attention_are_not_proven_and_named_in_one_short_line():
    config = {"model_type": "x", "num_attention_heads": 8, "head_dim": 64,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["conv"] * 2**17}
    with pytest.raises(UnprovenLayers) as raised:
        attention_layers(parse_config(config, "m/config.json"), "m", "m/config.json")
    message = str(raised.value)
    assert message.startswith("m/config.json: 'layer_types' names layers that are not attention: ")
    assert f"'conv' ({2**17} of {2**17 + 4}), 'linear_attention' (3 of {2**17 + 4})" in message
    assert len(message) < 300 and "\n" not in message


def test_a_malformed_layer_types_is_refused_in_a_line_of_bounded_length():
    config = {"model_type": "x", "num_attention_heads": 8, "head_dim": 64, "layer_types": [None] * 2**17}
    with pytest.raises(ConfigProblem) as raised:
        attention_layers(parse_config(config, "m/config.json"), "m", "m/config.json")
    assert not isinstance(raised.value, UnprovenLayers)
    assert "'layer_types' is a list, expected a list of layer type names" in str(raised.value) and len(str(raised.value)) < 300


@pytest.mark.parametrize("config_class", ["Qwen3NextConfig", "Qwen3_5Config", "Qwen3_5MoeConfig"])
def test_gated_delta_net_hybrids_read_as_their_full_attention_layers_and_one_gated_delta_net(config_class):
    import transformers


    default = getattr(transformers, config_class)()
    text = getattr(default, "text_config", None) or default
    layers = model_layers(parse_config(default.to_dict(), "config.json"), "m", "config.json")
    *attention, mixer = layers
    assert [(s.head_size, s.num_query_heads, s.num_kv_heads, s.block_size) for s in attention] == [
        (text.head_dim, text.num_attention_heads, text.num_key_value_heads, HYBRID_BLOCK_SIZE)]
    assert isinstance(mixer, GdnShape)
    assert (mixer.key_heads, mixer.value_heads, mixer.key_head_dim) == (
        text.linear_num_key_heads, text.linear_num_value_heads, text.linear_key_head_dim)


@pytest.mark.parametrize("field, value", [("head_dim", [256] * 10**5), ("num_attention_heads", "8" * 10**5),
                                          ("attn_logit_softcapping", {"x": [1.0] * 10**5}),
                                          ("num_key_value_heads", "2\nFIT: pass")])
def test_a_huge_or_multiline_attention_field_is_refused_in_one_short_line(field, value):
    config = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, field: value}
    with pytest.raises(ConfigProblem) as raised:
        attention_layers(parse_config(config, "m/config.json"), "m", "m/config.json")
    message = str(raised.value)
    assert f"'{field}'" in message and "\n" not in message and len(message) < 300, message[:300]


def test_a_huge_per_layer_config_entry_is_refused_in_one_short_line():
    config = {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
              "layer_types": ["full_attention"], "per_layer_config": {"9" * 10**4: ["x"] * 10**5}}
    with pytest.raises(ConfigProblem) as raised:
        attention_layers(parse_config(config, "m/config.json"), "m", "m/config.json")
    assert "'per_layer_config' entry" in str(raised.value) and len(str(raised.value)) < 300, str(raised.value)[:300]
