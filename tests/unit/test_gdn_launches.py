"""The gated delta net in the fit check's recorder (patches/fitcheck/families/gated_delta_net/launches.py): its shape read from
config.json as transformers writes it, per rank, and the per-kernel verdict over the measured launches
(tooling/probes/gdn/verdicts.py). What needs vLLM (the recording, the compiles) runs in the image only."""
from contract.model_config import ConfigProblem, parse_config
import json

import pytest
import transformers

from patches.fitcheck import lookup, fit_table as table
from patches.fitcheck.families import builtin_shapes, mixer_from_config, model_layers
from patches.fitcheck.families.gated_delta_net import BUILTIN_GDN, GdnShape, gdn_from_config, gdn_shape
from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS
from patches.fitcheck.proof import FitOptions, plan
from patches.fitcheck.family import UnprovenLayers
from tooling.probes.gdn.verdicts import kernel_verdicts


def saved(tmp_path, cls: str, **kwargs) -> dict:
    getattr(transformers, cls)(**kwargs).save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


@pytest.mark.parametrize("cls, interleaved", [("Qwen3NextConfig", True), ("Qwen3_5TextConfig", False),
                                              ("Qwen3_5MoeTextConfig", False), ("Qwen3_5Config", False),
                                              ("Qwen3_5MoeConfig", False)])
def test_each_class_saved_by_transformers_reads_back_as_its_linear_attention(tmp_path, cls, interleaved):
    config = saved(tmp_path, cls)
    text = getattr(transformers, cls)()
    text = getattr(text, "text_config", None) or text
    shape = gdn_from_config(parse_config(config, "config.json"), "m", "config.json")
    assert (shape.key_heads, shape.value_heads, shape.key_head_dim, shape.value_head_dim, shape.conv_width) == (
        text.linear_num_key_heads, text.linear_num_value_heads, text.linear_key_head_dim,
        text.linear_value_head_dim, text.linear_conv_kernel_dim)
    assert (shape.interleaved, shape.state_dtype) == (interleaved, "float16")


def test_fields_a_config_leaves_out_take_the_classes_defaults():
    shape = gdn_shape(parse_config({}, "config.json").text, "qwen3_5_moe_text", "m", "config.json")
    default = transformers.Qwen3_5MoeTextConfig()
    assert (shape.key_heads, shape.value_heads, shape.key_head_dim, shape.value_head_dim, shape.conv_width) == (
        default.linear_num_key_heads, default.linear_num_value_heads, default.linear_key_head_dim,
        default.linear_value_head_dim, default.linear_conv_kernel_dim)


@pytest.mark.parametrize("ranks, key_heads, value_heads", [(1, 16, 32), (2, 8, 16), (4, 4, 8), (16, 1, 2)])
def test_one_rank_holds_its_share_of_key_and_value_heads(ranks, key_heads, value_heads):
    shape = gdn_from_config(parse_config(BUILTIN_GDN["qwen3.5-35b-a3b"], "built-in"), "q", "built-in", tensor_parallel=ranks)
    assert (shape.key_heads, shape.value_heads, shape.tensor_parallel) == (key_heads, value_heads, ranks)
    assert shape.conv_dim == 2 * key_heads * 128 + value_heads * 128
    assert shape.gate_dim == value_heads * 128


def test_head_counts_vllm_refuses_are_config_errors_naming_the_field():
    with pytest.raises(ConfigProblem, match="'linear_num_key_heads'.*tensor parallel size 32"):
        gdn_from_config(parse_config(BUILTIN_GDN["qwen3-next-80b-a3b"], "c"), "q", "c", tensor_parallel=32)
    with pytest.raises(ConfigProblem, match="'linear_num_key_heads'.*tensor parallel size 3"):
        gdn_from_config(parse_config(BUILTIN_GDN["qwen3-next-80b-a3b"], "c"), "q", "c", tensor_parallel=3)
    with pytest.raises(ConfigProblem, match="not a multiple of 16 key heads"):
        gdn_shape(parse_config({"linear_num_value_heads": 24}, "c").text, "qwen3_next", "q", "c")
    with pytest.raises(ConfigProblem, match="'linear_key_head_dim' is the number 0"):
        gdn_shape(parse_config({"linear_key_head_dim": 0}, "c").text, "qwen3_next", "q", "c")


def test_the_recurrent_state_takes_mamba_ssm_dtype_only_for_qwen3_5():
    assert gdn_shape(parse_config({"mamba_ssm_dtype": "float32"}, "c").text, "qwen3_5_text", "q", "c").state_dtype == "float32"
    assert gdn_from_config(parse_config({"model_type": "qwen3_5", "text_config": {"mamba_ssm_dtype": "float32"}}, "c"),
                                        "q", "c").state_dtype == "float32"
    assert gdn_shape(parse_config({"mamba_ssm_dtype": "float32"}, "c").text, "qwen3_next", "q", "c").state_dtype == "float16"
    with pytest.raises(ConfigProblem, match='\'mamba_ssm_dtype\' is the string "int8"'):
        gdn_shape(parse_config({"mamba_ssm_dtype": "int8"}, "c").text, "qwen3_5_text", "q", "c")


def test_other_models_have_no_gated_delta_net_and_other_linear_attention_is_unproven():
    assert gdn_from_config(parse_config(BUILTIN_HYBRIDS["nemotron-h-8b"], "c"), "n", "c") is None
    assert gdn_from_config(parse_config({"model_type": "llama", "num_attention_heads": 32}, "c"), "l", "c") is None
    with pytest.raises(UnprovenLayers, match="MiniMax's lightning attention"):
        gdn_shape(parse_config({}, "c").text, "minimax_m1", "k", "c")


def row(kernel, shared, config=None, family="qwen3.5 tp1", kind="prefill", device="sm75", limit=65536):
    return {"device": device, "limit": limit, "family": family, "kind": kind, "kernel": kernel, "config": config,
            "shared": shared}


def test_a_kernel_fits_when_every_shape_and_phase_launching_it_fits():
    rows = [row("chunk_fwd_kernel_o", 98304, 0), row("chunk_fwd_kernel_o", 24576, 1),
            row("chunk_fwd_kernel_o", 98304, 0, family="qwen3.5 tp4"),
            row("chunk_fwd_kernel_o", 32768, 1, family="qwen3.5 tp4"),
            row("_causal_conv1d_update_kernel", 2048, kind="decode"),
            row("_causal_conv1d_update_kernel", 70000, kind="spec-decode"),
            row("layer_norm_fwd_kernel", 32, kind="norm-eager"), row("layer_norm_fwd_kernel", None, kind="norm-eager"),
            row("_causal_conv1d_update_kernel", 2048, kind="decode", device="sm86", limit=101376),
            row("_causal_conv1d_update_kernel", 70000, kind="spec-decode", device="sm86", limit=101376)]
    by_kernel = {(v["device"], v["kernel"]): v for v in kernel_verdicts(rows)}
    chunk_o = by_kernel[("sm75", "chunk_fwd_kernel_o")]
    assert (chunk_o["fits"], chunk_o["shapes"], chunk_o["configs"], chunk_o["need"], chunk_o["smallest"],
            chunk_o["largest"]) == (True, 2, 2, 32768, 24576, 98304)
    conv = by_kernel[("sm75", "_causal_conv1d_update_kernel")]
    assert (conv["fits"], conv["phases"], conv["need"]) == (False, ["decode", "spec-decode"], 70000)
    assert by_kernel[("sm86", "_causal_conv1d_update_kernel")]["fits"] is True
    norm = by_kernel[("sm75", "layer_norm_fwd_kernel")]  # a plain launch that did not compile is no fit
    assert (norm["fits"], norm["need"]) == (False, None)
    assert len(by_kernel) == 4


VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}


def gdn_table(tmp_path, config, fits=True, shared=41220):
    """A fit table holding the verdicts of `config`'s attention layers and gated delta net on sm_75."""
    *attention, gdn = model_layers(parse_config(config, "c"), "q", "c")
    rows = [{"model": "q", "layer": s.layer, "shared": 32768, "fits": True} for s in attention]
    gdn_rows = [{"model": "q", "layer": gdn.layer, "shared": shared, "fits": fits}]
    document = table.merge(None, [], VERSIONS, table.shape_verdicts(rows, attention, 75, 65536),
                           table.shape_verdicts(gdn_rows, [gdn], 75, 65536))
    path = tmp_path / "fit-table.json"
    table.write_table(path, document)
    return table.read_table(path)


def test_a_gated_delta_net_hybrid_with_its_verdicts_in_the_table_is_a_hit(tmp_path):
    config = BUILTIN_GDN["qwen3.5-27b"]
    document = gdn_table(tmp_path, config)
    found = lookup.decide(document, model_layers(parse_config(config, "c"), "q", "c"), 75, 65536, VERSIONS)
    assert (found.hit, found.all_fit, found.max_shared) == (True, True, 41220)
    failing = lookup.decide(gdn_table(tmp_path, config, fits=False, shared=70000),
                            model_layers(parse_config(config, "c"), "q", "c"), 75, 65536, VERSIONS)
    assert failing.hit and not failing.all_fit and failing.worst["mixer"] == "gated_delta_net"


def test_head_counts_share_a_verdict_and_what_sizes_the_kernels_does_not(tmp_path):
    config = BUILTIN_GDN["qwen3.5-27b"]
    document = gdn_table(tmp_path, config)
    # tensor parallel 2 halves the heads per rank: the same verdict answers
    ranked = lookup.decide(document, model_layers(parse_config(config, "c"), "q", "c", 2),
                           75, 65536, VERSIONS)
    assert ranked.hit and ranked.all_fit
    for changed, named in ((dict(linear_key_head_dim=64), "key/value head dims 64/128"),
                           (dict(linear_conv_kernel_dim=2), "conv 2"),
                           (dict(mamba_ssm_dtype="bfloat16"), "bfloat16 state"),
                           (dict(model_type="qwen3_next"), "float16 state")):
        other = dict(config, **changed)
        found = lookup.decide(document, model_layers(parse_config(other, "c"), "q", "c"), 75, 65536, VERSIONS)
        assert not found.hit and f"q/linear_attention (gated delta net: " in found.miss and named in found.miss, changed


def test_gated_delta_net_and_mamba_verdicts_are_kept_apart_in_one_table(tmp_path):
    gdn = gdn_from_config(parse_config(BUILTIN_GDN["qwen3.5-27b"], "c"), "q", "c")
    mamba = mixer_from_config(parse_config(BUILTIN_HYBRIDS["granite-4.0-h-tiny"], "c"), "g", "c")
    rows = [{"model": "q", "layer": gdn.layer, "shared": 100, "fits": True},
            {"model": "g", "layer": mamba.layer, "shared": 200, "fits": True}]
    merged = table.merge(None, [], VERSIONS, [], table.shape_verdicts(rows, [gdn, mamba], 75, 65536))
    assert sorted(v["mixer"] for v in merged["mixer_verdicts"]) == ["gated_delta_net", "mamba2"]
    again = table.merge(merged, [], VERSIONS, [], table.shape_verdicts(rows[:1], [gdn], 75, 65536))
    assert len(again["mixer_verdicts"]) == 2


@pytest.mark.parametrize("mixer", ["lightning_attention", None, ["gated_delta_net"], {"a": 1}])
def test_a_mixer_verdict_of_a_kind_not_known_here_is_left_out_never_a_crash(tmp_path, mixer):
    config = BUILTIN_GDN["qwen3.5-27b"]
    document = gdn_table(tmp_path, config)
    document["mixer_verdicts"].append({"cc": 75, "limit": 65536, "dtype": "float16", "mixer": mixer})
    document["mixer_verdicts"].append("not a verdict")
    found = lookup.decide(document, model_layers(parse_config(config, "c"), "q", "c"), 75, 65536, VERSIONS)
    assert found.hit and found.all_fit
    document["mixer_verdicts"].pop()
    assert len(table.merge(document, [], VERSIONS)["mixer_verdicts"]) == 1


def test_on_sm90_and_newer_the_gated_delta_net_is_not_proven_at_lookup_and_in_the_full_check(tmp_path):
    config = BUILTIN_GDN["qwen3-next-80b-a3b"]
    found = lookup.decide(gdn_table(tmp_path, config), model_layers(parse_config(config, "c"), "q", "c"), 90, 232448, VERSIONS)
    assert not found.hit and found.unproven and "FlashInfer" in found.miss
    path = tmp_path / "qwen3-next" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    with pytest.raises(UnprovenLayers, match="compute capability 9.0 .*FlashInfer"):
        plan(FitOptions(device="sm90", model_config=str(path)))
    assert any(isinstance(s, GdnShape) for s in plan(FitOptions(model_config=str(path))).shapes)


def test_the_built_in_matrix_holds_each_gated_delta_net_at_tensor_parallel_1_2_and_4():
    built = [s for s in builtin_shapes() if isinstance(s, GdnShape)]
    assert {(s.model.split("-tp")[0], s.tensor_parallel) for s in built} == {
        (name, ranks) for name in BUILTIN_GDN for ranks in (1, 2, 4)}
    assert not any(isinstance(s, GdnShape) for s in builtin_shapes("attention"))


def test_autotune_configurations_are_compiled_smallest_tiles_first_fla_names_included():
    from patches.fitcheck.op_recording import tile_volume
    from patches.fitcheck.recorder import Launch

    def launch(stages, **tiles):
        return Launch(None, "k", None, (1,), dict(tiles, USE_G=True, H=32), {"num_stages": stages})
    fla = [launch(2, BT=64, BK=64, BV=64), launch(3, BT=64, BK=32, BV=32), launch(4, BT=64, BK=32, BV=64)]
    assert [tile_volume(l) for l in fla] == [64 * 64 * 64 * 2, 64 * 32 * 32 * 3, 64 * 32 * 64 * 4]
    assert sorted(fla, key=tile_volume) == [fla[1], fla[0], fla[2]]
    assert tile_volume(launch(1, BLOCK_SIZE_M=16, BLOCK_SIZE_N=32)) == 512


@pytest.mark.parametrize("field, value", [("linear_num_key_heads", "16"), ("linear_num_value_heads", -32),
                                          ("linear_key_head_dim", 2**60 + 0.5), ("linear_conv_kernel_dim", True),
                                          ("mamba_ssm_dtype", {"nested": ["x"] * 10**4}), ("mamba_ssm_dtype", "int8\n"),
                                          ("linear_value_head_dim", [128] * 10**5)])
def test_a_bad_gated_delta_net_field_is_one_short_line_naming_it(field, value):
    config = dict(BUILTIN_GDN["qwen3.5-27b"], **{field: value})
    with pytest.raises(ConfigProblem) as raised:
        model_layers(parse_config(config, "q/config.json"), "q", "q/config.json")
    message = str(raised.value)
    assert not isinstance(raised.value, UnprovenLayers) and f"'{field}'" in message
    assert "\n" not in message and len(message) < 300, message
