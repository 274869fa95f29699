"""The gated delta net in the fit check's recorder (patches/fitcheck/gdn_launches.py): its shape read from
config.json as transformers writes it, per rank, and the per-kernel verdict over the measured launches
(bench/gdn_verdicts.py). What needs vLLM (the recording, the compiles) runs in the image only."""
import json

import pytest
import transformers

from bench.gdn_verdicts import kernel_verdicts
from patches.fitcheck import gdn_launches, mixers
from patches.fitcheck.shapes import ConfigError, UnprovenLayers


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
    shape = gdn_launches.gdn_from_config(config, "m", "config.json")
    assert (shape.key_heads, shape.value_heads, shape.key_head_dim, shape.value_head_dim, shape.conv_width) == (
        text.linear_num_key_heads, text.linear_num_value_heads, text.linear_key_head_dim,
        text.linear_value_head_dim, text.linear_conv_kernel_dim)
    assert (shape.interleaved, shape.state_dtype) == (interleaved, "float16")


def test_fields_a_config_leaves_out_take_the_classes_defaults():
    shape = gdn_launches.gdn_shape({}, "qwen3_5_moe_text", "m", "config.json")
    default = transformers.Qwen3_5MoeTextConfig()
    assert (shape.key_heads, shape.value_heads, shape.key_head_dim, shape.value_head_dim, shape.conv_width) == (
        default.linear_num_key_heads, default.linear_num_value_heads, default.linear_key_head_dim,
        default.linear_value_head_dim, default.linear_conv_kernel_dim)


@pytest.mark.parametrize("ranks, key_heads, value_heads", [(1, 16, 32), (2, 8, 16), (4, 4, 8), (16, 1, 2)])
def test_one_rank_holds_its_share_of_key_and_value_heads(ranks, key_heads, value_heads):
    shape = gdn_launches.gdn_from_config(gdn_launches.BUILTIN_GDN["qwen3.5"], "q", "built-in", tensor_parallel=ranks)
    assert (shape.key_heads, shape.value_heads, shape.tensor_parallel) == (key_heads, value_heads, ranks)
    assert shape.conv_dim == 2 * key_heads * 128 + value_heads * 128
    assert shape.gate_dim == value_heads * 128


def test_head_counts_vllm_refuses_are_config_errors_naming_the_field():
    with pytest.raises(ConfigError, match="'linear_num_key_heads'.*tensor parallel size 32"):
        gdn_launches.gdn_from_config(gdn_launches.BUILTIN_GDN["qwen3-next"], "q", "c", tensor_parallel=32)
    with pytest.raises(ConfigError, match="'linear_num_key_heads'.*tensor parallel size 3"):
        gdn_launches.gdn_from_config(gdn_launches.BUILTIN_GDN["qwen3-next"], "q", "c", tensor_parallel=3)
    with pytest.raises(ConfigError, match="not a multiple of 16 key heads"):
        gdn_launches.gdn_shape({"linear_num_value_heads": 24}, "qwen3_next", "q", "c")
    with pytest.raises(ConfigError, match="'linear_key_head_dim' is 0"):
        gdn_launches.gdn_shape({"linear_key_head_dim": 0}, "qwen3_next", "q", "c")


def test_the_recurrent_state_takes_mamba_ssm_dtype_only_for_qwen3_5():
    assert gdn_launches.gdn_shape({"mamba_ssm_dtype": "float32"}, "qwen3_5_text", "q", "c").state_dtype == "float32"
    assert gdn_launches.gdn_from_config({"model_type": "qwen3_5", "text_config": {"mamba_ssm_dtype": "float32"}},
                                        "q", "c").state_dtype == "float32"
    assert gdn_launches.gdn_shape({"mamba_ssm_dtype": "float32"}, "qwen3_next", "q", "c").state_dtype == "float16"
    with pytest.raises(ConfigError, match="'mamba_ssm_dtype' is 'int8'"):
        gdn_launches.gdn_shape({"mamba_ssm_dtype": "int8"}, "qwen3_5_text", "q", "c")


def test_other_models_have_no_gated_delta_net_and_other_linear_attention_is_unproven():
    assert gdn_launches.gdn_from_config(mixers.BUILTIN_HYBRIDS["nemotron-h-8b"], "n", "c") is None
    assert gdn_launches.gdn_from_config({"model_type": "llama", "num_attention_heads": 32}, "l", "c") is None
    with pytest.raises(UnprovenLayers, match="'kimi_linear'"):
        gdn_launches.gdn_shape({}, "kimi_linear", "k", "c")


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
