"""Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-4.7-Flash): read from config.json as one
latent-attention shape keyed by its latent rank and rope dim, proven on compute capability 8.x, refused
below 8.0 in one line saying what to do, and named as not recorded from 9.0 on."""
from contract.model_config import ConfigProblem, parse_config
import json

import pytest
import transformers

from contract import layout
from contract.verdict import Status
from entrypoint.checks.clamp import start_fit
from patches.fitcheck import lookup, fit_table as table
from patches.fitcheck.family import UnprovenLayers
from patches.fitcheck.families import builtin_shapes, mixer_from_config, model_layers, refused_on, unrecorded_on
from patches.fitcheck.families.kda import KdaShape
from patches.fitcheck.families.mla import BUILTIN_MLA, MLA_FIELDS, MlaShape
from tests.support.fit_tables import VERSIONS, mixer_table
# transformers' classes of the published MLA families -> the config fields the checkpoints set
CLASSES = {"DeepseekV2Config": {}, "DeepseekV3Config": {}, "Glm4MoeLiteConfig": {}}


@pytest.mark.parametrize("cls", CLASSES)
def test_each_mla_class_saved_by_transformers_reads_as_its_latent_attention_alone(tmp_path, cls):
    getattr(transformers, cls)().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    instance = getattr(transformers, cls)()
    (mla,) = model_layers(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(mla, MlaShape)
    assert (mla.heads, mla.kv_lora_rank, mla.rope_dim) == (
        instance.num_attention_heads, instance.kv_lora_rank, instance.qk_rope_head_dim)


def test_latent_attention_splits_its_heads_over_the_ranks_or_is_refused_naming_the_setting():
    glm = BUILTIN_MLA["glm-4.7-flash"]
    assert [mixer_from_config(parse_config(glm, "c"), "g", "c", tp).heads for tp in (1, 2, 4)] == [20, 10, 5]
    with pytest.raises(ConfigProblem, match="20 attention heads .* tensor parallel size 3.*TENSOR_PARALLEL_SIZE"):
        model_layers(parse_config(glm, "c"), "g", "c", tensor_parallel=3)


def test_sparse_attention_stays_unproven_and_kimi_linear_reads_as_latent_attention_beside_kda(tmp_path):
    sparse = dict(BUILTIN_MLA["deepseek-v3"], index_topk=2048)
    with pytest.raises(UnprovenLayers, match="sparse multi-head latent attention .*index_topk 2048"):
        model_layers(parse_config(sparse, "c"), "d", "c")
    transformers.KimiLinearConfig().save_pretrained(tmp_path)
    mla, kda = model_layers(parse_config(json.loads((tmp_path / "config.json").read_text()), "c"), "k", "c")
    assert isinstance(mla, MlaShape) and isinstance(kda, KdaShape)
    mixed = dict(BUILTIN_MLA["deepseek-v2-lite"], layer_types=["linear_attention", "full_attention"])
    with pytest.raises(UnprovenLayers, match="'linear_attention' \\(1 of 2\\)"):
        model_layers(parse_config(mixed, "c"), "d", "c")


def test_vllm_refuses_latent_attention_below_8_0_and_the_matrix_proves_it_from_8_0():
    (mla,) = model_layers(parse_config(BUILTIN_MLA["deepseek-v2-lite"], "c"), "d", "c")
    refusal = refused_on([mla], 75)
    assert "needs compute capability 8.0" in refusal.reason and "FlashAttention" in refusal.reason
    assert "8.0 or newer" in refusal.fix
    assert refused_on([mla], 80) is None and refused_on([mla], 86) is None
    assert unrecorded_on([mla], 86) is None and "FlashMLA" in unrecorded_on([mla], 90)
    built = {(s.model, s.heads) for s in builtin_shapes() if isinstance(s, MlaShape)}
    assert {("deepseek-v2-lite", 16), ("glm-4.7-flash-tp4", 5), ("deepseek-v3-tp4", 32)} <= built


GLM = BUILTIN_MLA["glm-4.7-flash"]


def test_a_latent_attention_verdict_answers_every_rank_and_model_of_its_rank_and_rope_dim(tmp_path):
    config = GLM
    document = mixer_table(tmp_path, config, 63488, cc=86, limit=101376)
    (verdict,) = document["mixer_verdicts"]
    assert {k: verdict[k] for k in MLA_FIELDS} == {"mixer": "mla", "kv_lora_rank": 512, "rope_dim": 64}
    for name in BUILTIN_MLA:
        for tp in (1, 2, 4):
            found = lookup.decide(document, model_layers(parse_config(BUILTIN_MLA[name], "c"), name, "c", tp), 86, 101376,
                                  VERSIONS)
            assert (found.hit, found.all_fit, found.max_shared) == (True, True, 63488)
    other = model_layers(parse_config(dict(config, kv_lora_rank=256), "c"), "g", "c")
    found = lookup.decide(document, other, 86, 101376, VERSIONS)
    assert not found.hit and "multi-head latent attention: kv_lora_rank 256, rope dim 64" in found.miss


def test_the_preflight_fails_latent_attention_on_turing_in_one_line_before_any_compile(tmp_path, monkeypatch):
    config = GLM
    mixer_table(tmp_path, config, 63488, cc=86, limit=101376)  # a table with MLA's verdict: not what decides
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(tmp_path / "fit-table.json"))
    folder = tmp_path / "glm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    result = start_fit(str(folder / "config.json"), parse_config(config), (7, 5), 65536)()
    assert result.status is Status.FAIL
    assert "multi-head latent attention (kv_lora_rank 512) needs compute capability 8.0" in result.message
    assert "8.0 or newer" in result.fix and "\n" not in result.message + result.fix


def test_the_fit_check_leaves_latent_attention_out_of_turings_matrix_and_refuses_such_a_config(tmp_path):
    from patches.fitcheck.proof import FitOptions, plan

    assert not any(isinstance(s, MlaShape) for s in plan(FitOptions(device="sm75")).shapes)
    assert any(isinstance(s, MlaShape) for s in plan(FitOptions(device="sm86")).shapes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BUILTIN_MLA["deepseek-v2-lite"]))
    with pytest.raises(ConfigProblem, match="needs compute capability 8.0.*: serve it on a GPU"):
        plan(FitOptions(device="sm75", model_config=str(path)))
    (mla,) = plan(FitOptions(device="sm86", model_config=str(path), tensor_parallel=2)).shapes
    assert mla.heads == 8


def test_kimi_linear_is_refused_on_turing_for_its_latent_attention_and_judged_on_ampere(tmp_path, monkeypatch):
    monkeypatch.setattr(lookup, "installed_versions", lambda: VERSIONS)
    transformers.KimiLinearConfig().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    document = tmp_path / "no-table.json"
    turing = lookup.lookup(document, parse_config(config, str(tmp_path / "config.json")), 75, 65536, str(tmp_path / "config.json"))
    assert turing.refused and "multi-head latent attention (kv_lora_rank 512) needs compute capability 8.0" in turing.miss
    ampere = lookup.lookup(document, parse_config(config, str(tmp_path / "config.json")), 86, 101376, str(tmp_path / "config.json"))
    assert not ampere.unproven and not ampere.refused and not ampere.hit and "no fit table" in ampere.miss
    rows = [{"model": "k", "layer": shape.layer, "shared": 63488, "fits": True}
            for shape in model_layers(parse_config(config, "c"), "k", "c")]
    written = tmp_path / "fit-table.json"
    table.write_table(written, table.merge(None, [], VERSIONS, [], table.shape_verdicts(
        rows, model_layers(parse_config(config, "c"), "k", "c"), 86, 101376)))
    found = lookup.lookup(written, parse_config(config, str(tmp_path / "config.json")), 86, 101376, str(tmp_path / "config.json"))
    assert (found.hit, found.all_fit, found.unproven) == (True, True, False)


# transformers' classes of the sparse-attention families vLLM 0.33.0 serves (an `index_topk` indexer)
SPARSE_CLASSES = ("DeepseekV32Config", "GlmMoeDsaConfig", "HYV4Config", "DeepseekV4Config")


@pytest.mark.parametrize("cls", SPARSE_CLASSES)
def test_sparse_attention_is_refused_below_9_0_and_unproven_from_9_0(tmp_path, cls):
    getattr(transformers, cls)().save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    for cc, limit in ((75, 65536), (86, 101376)):
        found = lookup.lookup(tmp_path / "no-table.json", parse_config(config, str(path)), cc, limit, str(path))
        assert found.refused and "sparse attention (index_topk" in found.miss, (cc, found)
        assert "needs compute capability 9.0" in found.miss and "9.0 or newer" in found.refused
    newer = lookup.lookup(tmp_path / "no-table.json", parse_config(config, str(path)), 90, 232448, str(path))
    assert newer.unproven and not newer.refused


def test_the_preflight_and_the_fit_check_refuse_sparse_attention_on_ampere_in_one_line(tmp_path, monkeypatch):
    from patches.fitcheck.proof import FitOptions, plan

    config = dict(BUILTIN_MLA["deepseek-v3"], index_topk=2048)
    mixer_table(tmp_path, BUILTIN_MLA["deepseek-v3"], 63488, cc=86, limit=101376)  # V3's verdict: not V3.2's
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(tmp_path / "fit-table.json"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = start_fit(str(path), parse_config(config), (8, 6), 101376)()
    assert result.status is Status.FAIL and "\n" not in result.message + result.fix
    assert str(path) in result.message and "index_topk 2048" in result.message and "9.0 or newer" in result.fix
    with pytest.raises(ConfigProblem, match="index_topk 2048.*needs compute capability 9.0.*: serve it on a GPU"):
        plan(FitOptions(device="sm86", model_config=str(path)))
    path.write_text(json.dumps(BUILTIN_MLA["deepseek-v3"]))  # the same model without its indexer runs
    (mla,) = plan(FitOptions(device="sm86", model_config=str(path))).shapes
    assert isinstance(mla, MlaShape)
