"""Encoder layers and tensor-parallel ranks in the fit check: the built-in matrix holds the layer shapes of
embedding models, BERT-family encoders and multimodal towers (context_attention_fwd) and one rank's shapes
at tensor parallel 1, 2 and 4; configs made by transformers' own classes map onto those verdicts, and the
preflight looks up the shapes of the configured TENSOR_PARALLEL_SIZE."""
import json

import pytest
import transformers

from entrypoint.checks.clamp import fit_command, start_fit
from contract.verdict import Status
from patches.fitcheck import FitOptions, UsageError, lookup, plan, fit_table as table
from contract.model_config import ConfigProblem, parse_config
from patches.fitcheck.attention import ENCODER, LayerShape, MM_ENCODER, rank_heads
from patches.fitcheck.family import TENSOR_PARALLEL_SIZES, UnprovenLayers
from patches.fitcheck.families import attention_layers, builtin_shapes
from patches.fitcheck.families.encoders import ENCODER_SHAPES, tower_shapes
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS
from tests.support import family_configs

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}


def verdict_key(shape) -> tuple:
    return tuple(table.shape_fields(shape).values())


MATRIX_KEYS = {verdict_key(s) for s in builtin_shapes("all")}


@pytest.mark.parametrize("name", sorted(family_configs.ENCODER_MODELS))
def test_embedding_and_bert_family_configs_are_encoder_layers_the_matrix_proves(name):
    read = attention_layers(parse_config(family_configs.config_dict(name), "config.json"), name, "config.json")
    assert all(s.attention == ENCODER for s in read)
    covering = {s.layer: verdict_key(s) for s in ENCODER_SHAPES}
    assert {verdict_key(s) for s in read} == {covering[layer] for layer in family_configs.ENCODER_MODELS[name][3]}


def test_the_matrix_holds_the_multimodal_towers_heads():
    towers = {s.head_size for s in ENCODER_SHAPES if s.attention == MM_ENCODER}
    assert {64, 72, 128} <= towers  # Gemma 4's vision towers (64, 72) and audio tower (128)


@pytest.mark.parametrize("heads, kv_heads, ranks, expected", [
    (8, 1, 2, (4, 1)), (8, 1, 4, (2, 1)),  # Gemma 4 E2B: one KV head, replicated on every rank
    (8, 2, 4, (2, 1)), (16, 8, 4, (4, 2)), (32, 16, 2, (16, 8)), (8, 4, 4, (2, 1)),  # 36802: Gemma-3-4B at TP 4
])
def test_one_rank_holds_its_share_of_query_heads_and_at_least_one_kv_head(heads, kv_heads, ranks, expected):
    assert rank_heads(heads, kv_heads, ranks) == expected


@pytest.mark.parametrize("heads, kv_heads, ranks, field", [(3, 1, 2, "3 attention heads"), (12, 6, 4, "6 KV heads")])
def test_a_split_vllm_refuses_is_a_config_error_naming_the_size(heads, kv_heads, ranks, field):
    with pytest.raises(ConfigProblem, match=f"{field} do not split over tensor parallel size {ranks}"):
        rank_heads(heads, kv_heads, ranks, "config.json")


def test_the_e2b_global_layers_ratio_falls_with_the_ranks():
    ratios = {tp: {s.layer: s.queries_per_kv for s in attention_layers(
        parse_config(BUILTIN_CONFIGS["gemma4-e2b"], "built-in"), "e2b", "built-in", tp)} for tp in TENSOR_PARALLEL_SIZES}
    assert ratios == {1: {"sliding": 8, "global": 8}, 2: {"sliding": 4, "global": 4}, 4: {"sliding": 2, "global": 2}}


def test_the_12b_pages_follow_the_ranks_kv_heads():
    # 40 sliding layers of 8 KV heads x 256 and 8 global of 1 x 512: the page of the global layers is
    # 4x the sliding one's at TP 1 (block 64), 2x at TP 2 (block 32: 4 x 256 against 1 x 512), 1x at TP 4.
    blocks = {tp: next(s.block_size for s in attention_layers(
        parse_config(BUILTIN_CONFIGS["gemma4-12b"], "built-in"), "12b", "built-in", tp) if s.layer == "global") for tp in (1, 2, 4)}
    assert blocks == {1: 64, 2: 32, 4: 16}


@pytest.mark.parametrize("ranks", TENSOR_PARALLEL_SIZES)
@pytest.mark.parametrize("name", sorted(BUILTIN_CONFIGS) + sorted(family_configs.MODELS))
def test_every_rank_shape_of_the_gemma4_classes_and_families_is_in_the_matrix(name, ranks):
    config = BUILTIN_CONFIGS.get(name) or family_configs.config_dict(name)
    try:
        read = attention_layers(parse_config(config, "config.json"), name, "config.json", ranks)
    except ConfigProblem as error:
        assert "do not split" in str(error), error  # vLLM refuses that split: nothing to prove
        return
    missing = {verdict_key(s) for s in read} - MATRIX_KEYS
    assert not missing, f"{name} at tensor parallel {ranks}: no matrix shape for {missing}"


def matrix_table(tmp_path, keep=lambda shape: True):
    """A fit table with verdicts for the built-in matrix's shapes that `keep` selects (all fit)."""
    matrix = [s for s in builtin_shapes("all") if isinstance(s, LayerShape) and keep(s)]
    rows = [{"model": s.model, "layer": s.layer, "shared": 65536, "fits": True} for s in matrix]
    path = tmp_path / "fit-table.json"
    table.write_table(path, table.merge(None, [], VERSIONS, table.shape_verdicts(rows, matrix, 75, 65536)))
    return path


@pytest.fixture
def versions(monkeypatch):
    monkeypatch.setattr(lookup, "installed_versions", lambda: VERSIONS)


@pytest.mark.parametrize("name", sorted(family_configs.ENCODER_MODELS))
def test_preflight_answers_fits_for_embeddinggemma_and_bert_from_the_table(tmp_path, monkeypatch, versions, name):
    path = family_configs.save_model_dir(name, tmp_path / name)
    monkeypatch.setenv("TURING_CLAMP_FIT_TABLE", str(matrix_table(tmp_path)))
    result = start_fit(str(path), parse_config(json.loads(path.read_text())), (7, 5), 65536)()
    assert result.status is Status.PASS, result.message
    assert "from the fit table's verdicts" in result.message


def test_preflight_looks_up_the_shapes_of_the_configured_tensor_parallel_size(tmp_path, versions):
    config = BUILTIN_CONFIGS["gemma4-e2b"]
    whole = matrix_table(tmp_path)
    assert lookup.lookup(whole, parse_config(config, "e2b/config.json"), 75, 65536, "e2b/config.json", 4).hit
    only_tp1 = matrix_table(tmp_path, keep=lambda s: s.tensor_parallel == 1 and s.model.startswith("gemma4-e2b"))
    assert lookup.lookup(only_tp1, parse_config(config, "e2b/config.json"), 75, 65536, "e2b/config.json", 1).hit
    missed = lookup.lookup(only_tp1, parse_config(config, "e2b/config.json"), 75, 65536, "e2b/config.json", 4)
    assert not missed.hit and "per rank at tensor parallel 4" in missed.miss
    assert "2/1 heads" in missed.miss


def test_the_full_check_gets_the_tensor_parallel_size():
    assert fit_command("/m/config.json", (7, 5), 65536, None, tensor_parallel=4)[-2:] == ["--tensor-parallel-size", "4"]
    assert "--tensor-parallel-size" not in fit_command("/m/config.json", (7, 5), 65536, None)


def test_tensor_parallel_goes_with_a_model_config(tmp_path):
    with pytest.raises(UsageError, match="--tensor-parallel-size goes with --model-config"):
        plan(FitOptions(tensor_parallel=2))
    with pytest.raises(UsageError, match="positive integer"):
        plan(FitOptions(tensor_parallel=0))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BUILTIN_CONFIGS["gemma4-e2b"]))
    fit = plan(FitOptions(model_config=str(path), tensor_parallel=2))
    assert {s.tensor_parallel for s in fit.shapes} == {2}


def tower_preflight(tmp_path, monkeypatch, config: dict, backend: str | None, table_path):
    """The preflight's fit result on a T4 for `config` with `--mm-encoder-attn-backend backend` (if any)."""
    from entrypoint.argv import Extras
    from entrypoint.checks.model import Resolved
    from contract.model_config import parse_config
    from entrypoint.device import Device
    from entrypoint.preflight import fit_check

    monkeypatch.setenv("TURING_CLAMP_FIT_TABLE", str(table_path))
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    words = {"mm_encoder_attn_backend": backend} if backend else {}
    return fit_check(Resolved(str(folder), None, None, config, parse_config(config)), extras=Extras(words))(
        Device("StandIn Tesla T4", (7, 5), 65536, 1)).start()()


def test_towers_under_triton_attn_are_looked_up_by_their_head_size_and_an_unknown_one_is_not_proven(
        tmp_path, monkeypatch, versions):
    from tests.support import gemma4_configs

    e2b = json.loads((gemma4_configs.published_model_dir("gemma4-e2b", tmp_path / "pub") / "config.json").read_text())
    assert [(s.layer, s.head_size) for s in tower_shapes(parse_config(e2b, "c"), "e2b", "c")] == [("vision-tower", 64),
                                                                                     ("audio-tower", 128)]
    whole = matrix_table(tmp_path)
    for backend in (None, "TRITON_ATTN", "triton_attn"):
        assert tower_preflight(tmp_path, monkeypatch, e2b, backend, whole).status is Status.PASS, backend
    # the table without the head-128 tower: the audio tower is what the TRITON_ATTN run lacks
    no_audio = matrix_table(tmp_path, keep=lambda s: s.layer != "mm-encoder-head128")
    assert tower_preflight(tmp_path, monkeypatch, e2b, None, no_audio).status is Status.PASS
    result = tower_preflight(tmp_path, monkeypatch, e2b, "TRITON_ATTN", no_audio)
    assert result.status is Status.WARN and "audio-tower" in result.message and "head 128" in result.message
    assert "--mm-encoder-attn-backend TRITON_ATTN" in result.message and "\n" not in result.message + result.fix
    # a tower of a head size the build does not prove (Qwen2-VL's 80 taken to 96) is named
    wide = dict(e2b, vision_config=dict(e2b["vision_config"], head_dim=96))
    result = tower_preflight(tmp_path, monkeypatch, wide, "TRITON_ATTN", whole)
    assert result.status is Status.WARN and "vision-tower" in result.message and "head 96" in result.message


def test_a_tower_whose_head_size_cannot_be_read_is_named_with_the_fields_it_lacks():
    with pytest.raises(UnprovenLayers, match="'vision_config': no head size to read .*embed_dim / hidden_size"):
        tower_shapes(parse_config({"vision_config": {"num_heads": 16}}, "c"), "m", "c")
    qwen2_vl = {"vision_config": {"embed_dim": 1280, "hidden_size": 3584, "num_heads": 16}}
    assert [s.head_size for s in tower_shapes(parse_config(qwen2_vl, "c"), "m", "c")] == [80]  # its own width, not the LM's


def test_a_table_of_another_vllm_is_a_miss_for_the_full_check_not_a_towers_unproven(tmp_path, monkeypatch):
    from tests.support import gemma4_configs

    e2b = json.loads((gemma4_configs.published_model_dir("gemma4-e2b", tmp_path / "pub") / "config.json").read_text())
    monkeypatch.setattr(lookup, "installed_versions", lambda: dict(VERSIONS, vllm="0.34.0"))
    found = lookup.lookup(matrix_table(tmp_path), parse_config(e2b, "e2b/config.json"), 75, 65536, "e2b/config.json", towers=True)
    assert not found.hit and not found.unproven and "tower" not in found.miss, found
