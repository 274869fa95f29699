"""Kimi Linear's KDA layers in the fit check (patches/fitcheck/families/kda/launches.py): the shape read from
config.json as transformers writes it, per rank, bad fields named, the verdict's key, and the preflight's
lookup on sm_86 from a table. What needs vLLM (the recording, the compiles) runs in the image only
(tests/image/test_fitcheck_kda.py)."""
from contract.model_config import ConfigProblem, parse_config
import json

import pytest
import transformers

from patches.fitcheck import lookup, fit_table as table
from patches.fitcheck.families.kda import launches as kda_launches
from patches.fitcheck.families import mixer_from_config, model_layers, unrecorded_on
from patches.fitcheck.families.kda import BUILTIN_KDA, KdaShape, kda_shape
from patches.fitcheck.families.mla import MlaShape
from patches.fitcheck.fit_table import mixer_fields
from patches.fitcheck.proof import FitOptions, plan
from tests.support.fit_tables import VERSIONS

KIMI = BUILTIN_KDA["kimi-linear-48b-a3b"]


def saved(tmp_path, **kwargs) -> dict:
    transformers.KimiLinearConfig(**kwargs).save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


def test_a_config_saved_by_transformers_reads_as_latent_attention_and_kda(tmp_path):
    config = saved(tmp_path)
    default = transformers.KimiLinearConfig()
    mla, kda = model_layers(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(mla, MlaShape) and isinstance(kda, KdaShape)
    assert (mla.heads, mla.kv_lora_rank, mla.rope_dim) == (default.num_attention_heads, 512, 64)
    assert (kda.heads, kda.head_dim, kda.conv_width, kda.safe_gate) == (
        default.linear_num_heads, default.linear_head_dim, default.linear_conv_kernel_dim, False)
    assert kda.conv_dim == 3 * 32 * 128


def test_the_checkpoints_linear_attn_config_wins_over_the_top_level_fields_as_in_transformers(tmp_path):
    linear = {"head_dim": 64, "num_heads": 16, "short_conv_kernel_size": 3, "kda_layers": [1], "full_attn_layers": [2]}
    config = saved(tmp_path, num_hidden_layers=2, linear_attn_config=linear)
    read = transformers.KimiLinearConfig(num_hidden_layers=2, linear_attn_config=linear)
    kda = mixer_from_config(parse_config(config, "config.json"), "m", "config.json")
    assert (kda.heads, kda.head_dim, kda.conv_width) == (read.linear_num_heads, read.linear_head_dim,
                                                          read.linear_conv_kernel_dim) == (16, 64, 3)
    checkpoint = dict(linear, head_dim=128, num_heads=32, short_conv_kernel_size=4)
    assert kda_shape(parse_config({"linear_attn_config": checkpoint, "linear_head_dim": 64}, "c").text, "m", "c").head_dim == 128


def test_fields_a_config_leaves_out_take_the_class_defaults():
    default = transformers.KimiLinearConfig()
    kda = kda_shape(parse_config({}, "c").text, "m", "c")
    assert (kda.heads, kda.head_dim, kda.conv_width) == (default.linear_num_heads, default.linear_head_dim,
                                                         default.linear_conv_kernel_dim)
    assert kda_shape(parse_config({"linear_attn_config": {"gate_lower_bound": -5.0}}, "c").text, "m", "c").safe_gate


def test_each_rank_holds_its_share_of_the_heads_or_the_split_is_refused_naming_the_field(tmp_path):
    config = saved(tmp_path)
    assert [mixer_from_config(parse_config(config, "c"), "m", "c", tp).heads for tp in (1, 2, 4)] == [32, 16, 8]
    assert [model_layers(parse_config(KIMI, "c"), "k", "c", tp)[0].heads for tp in (1, 2, 4)] == [32, 16, 8]
    with pytest.raises(ConfigProblem, match="32 KDA heads \\('linear_attn_config.num_heads'\\) do not split over "
                                          "tensor parallel size 3.*TENSOR_PARALLEL_SIZE"):
        mixer_from_config(parse_config(KIMI, "c"), "k", "c", tensor_parallel=3)
    with pytest.raises(ConfigProblem, match="\\('linear_num_heads'\\) do not split over tensor parallel size 8"):
        mixer_from_config(parse_config(dict(config, linear_num_heads=4), "c"), "k", "c", tensor_parallel=8)


@pytest.mark.parametrize("fields, named", [
    ({"linear_head_dim": 0}, "'linear_head_dim' is the number 0"),
    ({"linear_conv_kernel_dim": "4"}, '\'linear_conv_kernel_dim\' is the string "4"'),
    ({"linear_num_heads": True}, "'linear_num_heads' is true"),
    ({"linear_attn_config": {"head_dim": -1}}, "'linear_attn_config.head_dim' is the number -1"),
    ({"linear_attn_config": {"short_conv_kernel_size": 2.5}}, "'linear_attn_config.short_conv_kernel_size' is the number 2.5"),
    ({"linear_attn_config": {"gate_lower_bound": 0.5}}, "'linear_attn_config.gate_lower_bound' is the number 0.5"),
    ({"linear_attn_config": [128]}, "'linear_attn_config' is a list")])
def test_a_bad_kda_field_is_one_line_naming_it(tmp_path, fields, named):
    config = dict(saved(tmp_path), **fields)
    with pytest.raises(ConfigProblem, match=named) as raised:
        model_layers(parse_config(config, "config.json"), "m", "config.json")
    assert "\n" not in str(raised.value)


def test_the_verdict_key_is_the_head_dim_conv_width_and_gate_not_the_heads():
    ranks = [mixer_from_config(parse_config(KIMI, "c"), "k", "c", tp) for tp in (1, 2, 4)]
    keys = {table.verdict_fields(shape, 86, 101376, "bfloat16")[1] for shape in ranks}
    assert keys == {(86, 101376, "bfloat16", "kda", 128, 4, False)}
    assert mixer_fields(ranks[0]) == {"mixer": "kda", "head_dim": 128, "conv_width": 4, "safe_gate": False}


def test_the_spec_decode_batches_reach_each_of_the_recurrent_kernels_four_choices_at_the_matrix_ranks():
    # fused_recurrent_kda_fwd: BV / stages by heads x sequences <= 48, <= 96, <= 192, above
    for heads in (32, 16, 8):
        reached = {min(i for i, bound in enumerate((48, 96, 192, float("inf"))) if heads * seqs <= bound)
                   for seqs in kda_launches.spec_batches(heads)}
        assert reached == {0, 1, 2, 3}, heads


def kimi_table(tmp_path, kda_shared: int, mla_shared: int = 63488, cc: int = 86, limit: int = 101376,
               dtype: str = "bfloat16") -> dict:
    """A fit table with the matrix's Kimi Linear verdicts (its latent attention and its KDA), as the build
    writes them."""
    layers = model_layers(parse_config(KIMI, "built-in"), "kimi", "built-in")
    rows = [{"model": "kimi", "layer": shape.layer, "shared": shared, "fits": shared <= limit}
            for shape, shared in zip(layers, (mla_shared, kda_shared))]
    path = tmp_path / "fit-table.json"
    table.write_table(path, table.merge(None, [], VERSIONS, [], table.shape_verdicts(rows, layers, cc, limit, dtype)))
    return table.read_table(path)


def test_a_kimi_linear_config_on_sm86_is_a_table_hit_that_fits_at_every_rank(tmp_path):
    config = saved(tmp_path)
    document = kimi_table(tmp_path, 90_000)
    for tp in (1, 2, 4):
        found = lookup.decide(document, model_layers(parse_config(config, "c"), "m", "c", tp, "bfloat16"), 86, 101376, VERSIONS,
                              "bfloat16")
        assert (found.hit, found.all_fit, found.max_shared, found.unproven) == (True, True, 90_000, False), tp
    other = model_layers(parse_config(dict(config, linear_head_dim=64), "c"), "m", "c", 1, "bfloat16")
    missed = lookup.decide(document, other, 86, 101376, VERSIONS, "bfloat16")
    assert not missed.hit and "KDA: head dim 64, conv 4" in missed.miss
    fp16 = lookup.decide(document, model_layers(parse_config(config, "c"), "m", "c"), 86, 101376, VERSIONS, "float16")
    assert not fp16.hit and "in float16" in fp16.miss


def test_the_preflight_answers_kimi_linear_from_the_table_on_sm86_and_refuses_it_on_turing(tmp_path, monkeypatch):
    monkeypatch.setattr(lookup, "installed_versions", lambda: VERSIONS)
    config = saved(tmp_path)
    kimi_table(tmp_path, 90_000, dtype="float16")
    path = str(tmp_path / "config.json")
    ampere = lookup.lookup(tmp_path / "fit-table.json", parse_config(config, path), 86, 101376, path)
    assert (ampere.hit, ampere.all_fit, ampere.unproven) == (True, True, False), ampere.miss
    turing = lookup.lookup(tmp_path / "fit-table.json", parse_config(config, path), 75, 65536, path)
    assert turing.refused and "multi-head latent attention (kv_lora_rank 512) needs compute capability 8.0" in turing.miss
    kda = mixer_from_config(parse_config(config, "c"), "m", "c")
    assert unrecorded_on([kda], 86) is None and "KDA kernels" in unrecorded_on([kda], 90)


def test_the_built_in_matrix_proves_kimi_linear_on_sm86_at_every_rank_and_leaves_it_out_on_turing():
    ampere = [s for s in plan(FitOptions(device="sm86")).shapes if s.model.startswith("kimi-linear")]
    assert {(type(s).__name__, s.heads) for s in ampere} == {
        ("MlaShape", 32), ("MlaShape", 16), ("MlaShape", 8), ("KdaShape", 32), ("KdaShape", 16), ("KdaShape", 8)}
    assert not [s for s in plan(FitOptions(device="sm75")).shapes if s.model.startswith("kimi-linear")]
