"""Hybrid models' Mamba-2 mixers in the fit check (patches/fitcheck/families/): read from config.json
as transformers writes it, keyed in the fit table, and answered by the lookup with the attention layers."""
import json

import pytest
import transformers

from patches.fitcheck import lookup, fit_report as report, fit_table as table
from contract.model_config import ConfigProblem, parse_config
from patches.fitcheck.attention import HYBRID_BLOCK_SIZE, HYBRID_LAUNCH_BLOCK_SIZES, LayerShape, build_matrix
from patches.fitcheck.family import UnprovenLayers
from patches.fitcheck.families import attention_layers, builtin_models, builtin_shapes, is_mixer, mixer_from_config, model_layers
from patches.fitcheck.families.mamba1 import BUILTIN_MAMBA1, MAMBA1_FIELDS, Mamba1Shape
from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS, BUILTIN_STATE_SPACE_MAMBA2, MixerShape
from patches.fitcheck.families.mla import BUILTIN_MLA
from patches.fitcheck.families.short_conv import BUILTIN_SHORT_CONV, SHORT_CONV_FIELDS, ShortConvShape
from patches.fitcheck.fit_table import mixer_fields
BUILTIN_STATE_SPACE = {**BUILTIN_MAMBA1, **BUILTIN_STATE_SPACE_MAMBA2}
from tests.support import family_configs
from tests.support.fit_tables import VERSIONS, mixer_table



def saved(tmp_path, cls: str, **kwargs) -> dict:
    getattr(transformers, cls)(**kwargs).save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


# transformers' class -> (the attribute names of heads, head dim, state, groups, chunk, conv width)
CLASSES = {
    "NemotronHConfig": ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "chunk_size", "conv_kernel"),
    "GraniteMoeHybridConfig": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size",
                               "mamba_d_conv"),
    "FalconH1Config": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size",
                       "mamba_d_conv"),
    "BambaConfig": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size",
                    "mamba_d_conv"),
    "Zamba2Config": ("n_mamba_heads", "mamba_headdim", "mamba_d_state", "mamba_ngroups", "chunk_size", "mamba_d_conv"),
}


@pytest.mark.parametrize("cls", CLASSES)
def test_each_hybrid_class_saved_by_transformers_reads_its_mixer_and_attention(tmp_path, cls):
    config = saved(tmp_path, cls)
    instance = getattr(transformers, cls)()
    mixer = mixer_from_config(parse_config(config, "config.json"), "m", "config.json")
    heads, head_dim, state, groups, chunk, conv = (getattr(instance, name) for name in CLASSES[cls])
    assert (mixer.heads, mixer.head_dim, mixer.state_size, mixer.groups, mixer.chunk_size, mixer.conv_width) == (
        heads, head_dim, state, groups, chunk, conv)
    attention = attention_layers(parse_config(config, "config.json"), "m", "config.json")
    assert attention and all(s.block_size == HYBRID_BLOCK_SIZE and s.sliding_window is None for s in attention)


def test_the_builtin_hybrids_read_back_as_their_numbers():
    nemotron = mixer_from_config(parse_config(BUILTIN_HYBRIDS["nemotron-h-8b"], "built-in"), "n", "built-in")
    assert mixer_fields(nemotron) == {"mixer": "mamba2", "head_dim": 64, "state_size": 128, "chunk_size": 128,
                                             "conv_width": 4, "norm_width": 0}  # 8 groups: the norm runs in PyTorch
    granite = mixer_from_config(parse_config(BUILTIN_HYBRIDS["granite-4.0-h-tiny"], "built-in"), "g", "built-in")
    assert (granite.norm_width, granite.conv_dim) == (48 * 64, 48 * 64 + 2 * 128)
    built = builtin_shapes()
    assert {s.model for s in built if isinstance(s, MixerShape) and s.tensor_parallel == 1} == (
        set(BUILTIN_HYBRIDS) | {"mamba-codestral-7b"})


def test_the_norm_is_a_triton_launch_only_for_one_group_on_one_rank_with_the_norm_on():
    granite = BUILTIN_HYBRIDS["granite-4.0-h-tiny"]
    assert mixer_from_config(parse_config(granite, "c"), "g", "c", tensor_parallel=2).norm_width == 0
    assert mixer_from_config(parse_config(dict(granite, model_type="falcon_h1", mamba_rms_norm=False), "c"), "f", "c").norm_width == 0
    rank = mixer_from_config(parse_config(BUILTIN_HYBRIDS["nemotron-h-8b"], "c"), "n", "c", tensor_parallel=4)
    assert (rank.heads, rank.groups) == (32, 2)
    replicated = mixer_from_config(parse_config(granite, "c"), "g", "c", tensor_parallel=4)
    assert (replicated.heads, replicated.groups) == (12, 1)  # one group, each rank holds it


@pytest.mark.parametrize("cls, named", [("MiniMaxConfig", "'linear_attention'")])
def test_hybrids_whose_mixers_are_not_recorded_stay_unproven_naming_them(tmp_path, cls, named):
    config = saved(tmp_path, cls)
    with pytest.raises(UnprovenLayers, match=named):
        attention_layers(parse_config(config, "config.json"), "m", "config.json")


@pytest.mark.parametrize("field, value", [("ssm_state_size", None), ("ssm_state_size", "128"), ("mamba_head_dim", 0),
                                          ("n_groups", True), ("chunk_size", -1)])
def test_a_bad_mixer_field_is_one_line_naming_it(field, value):
    config = dict(BUILTIN_HYBRIDS["nemotron-h-8b"], **{field: value})
    with pytest.raises(ConfigProblem) as raised:
        attention_layers(parse_config(config, "config.json"), "m", "config.json")
    assert f"'{field}'" in str(raised.value) and "\n" not in str(raised.value)


def test_mamba_heads_that_do_not_split_over_the_ranks_are_refused_naming_the_setting():
    config = dict(BUILTIN_HYBRIDS["nemotron-h-8b"], mamba_num_heads=96, n_groups=3)
    with pytest.raises(ConfigProblem, match="TENSOR_PARALLEL_SIZE that divides 96"):
        mixer_from_config(parse_config(config, "config.json"), "m", "config.json", tensor_parallel=64)
    with pytest.raises(ConfigProblem, match="not a multiple of 7 groups"):
        mixer_from_config(parse_config(dict(config, n_groups=7), "config.json"), "m", "config.json")


def test_a_hybrid_attention_layer_is_launched_at_the_smallest_and_a_large_block():
    attention = attention_layers(parse_config(BUILTIN_HYBRIDS["falcon-h1-1.5b"], "c"), "f", "c")
    cases = build_matrix(attention, mm_prefix=False)
    assert {case.shape.block_size for case in cases} == set(HYBRID_LAUNCH_BLOCK_SIZES)
    assert {case.shape.layer for case in cases} == {"global"}


def hybrid_table(tmp_path, mixer_fits=True):
    config = BUILTIN_HYBRIDS["granite-4.0-h-tiny"]
    attention = attention_layers(parse_config(config, "c"), "g", "c")
    mixer = mixer_from_config(parse_config(config, "c"), "g", "c")
    rows = [{"model": "g", "layer": s.layer, "shared": 24576, "fits": True} for s in attention]
    mixer_rows = [{"model": "g", "layer": "mamba", "shared": 16384 if mixer_fits else 70000, "fits": mixer_fits}]
    document = table.merge(None, [], VERSIONS, table.shape_verdicts(rows, attention, 75, 65536),
                           table.shape_verdicts(mixer_rows, [mixer], 75, 65536))
    path = tmp_path / "fit-table.json"
    table.write_table(path, document)
    return path, config


def test_a_hybrid_with_both_verdicts_in_the_table_is_a_hit(tmp_path):
    path, config = hybrid_table(tmp_path)
    found = lookup.decide(table.read_table(path), attention_layers(parse_config(config, "c"), "g", "c")
                          + [mixer_from_config(parse_config(config, "c"), "g", "c")], 75, 65536, VERSIONS)
    assert (found.hit, found.all_fit, found.launches, found.max_shared) == (True, True, 2, 24576)


def test_a_mixer_verdict_that_does_not_fit_fails_the_hybrid(tmp_path):
    path, config = hybrid_table(tmp_path, mixer_fits=False)
    found = lookup.decide(table.read_table(path), attention_layers(parse_config(config, "c"), "g", "c")
                          + [mixer_from_config(parse_config(config, "c"), "g", "c")], 75, 65536, VERSIONS)
    assert found.hit and not found.all_fit and found.worst["state_size"] == 128


def test_a_mixer_the_table_lacks_is_a_miss_naming_its_fields(tmp_path):
    path, config = hybrid_table(tmp_path)
    other = dict(config, mamba_d_state=64)
    found = lookup.decide(table.read_table(path), attention_layers(parse_config(other, "c"), "g", "c")
                          + [mixer_from_config(parse_config(other, "c"), "g", "c")], 75, 65536, VERSIONS)
    assert not found.hit and "g/mamba (Mamba-2 mixer: head dim 64, state 64, chunk 256" in found.miss


def test_merging_keeps_the_mixer_verdicts_of_the_same_versions(tmp_path):
    path, _ = hybrid_table(tmp_path)
    merged = table.merge(table.read_table(path), [], VERSIONS)
    assert len(merged["mixer_verdicts"]) == 1 and merged["mixer_verdicts"][0]["norm_width"] == 3072
    assert "mixer_verdicts" not in table.merge(table.read_table(path), [], dict(VERSIONS, triton="3.6.0"))


def test_an_autotuned_mixer_kernel_that_fits_in_no_configuration_is_named():
    row = {"model": "g", "layer": "mamba", "kind": "ssd-prefill", "head_size": 64, "kernel": "_chunk_scan_fwd_kernel",
           "path": "mamba", "shared": 70000, "limit": 65536, "fits": False, "autotune": {"configs": 23}}
    built = report.build_report(versions=VERSIONS, device={"name": "sm75", "cc": 75, "limit": 65536}, launches=[],
                                unpatched=None, elapsed_s=0.0, mixers=[row])
    assert built["all_fit"] is False
    assert report.failures(built) == ["g/mamba ssd-prefill (head dim 64, _chunk_scan_fwd_kernel, none of its 23 "
                                      "autotune configurations fits) needs 70000 bytes of shared memory, limit 65536"]


@pytest.mark.parametrize("name", sorted(family_configs.HYBRID_MODELS))
def test_hybrid_configs_made_by_transformers_map_onto_their_matrix_hybrids_verdicts(name):
    made = family_configs.config_dict(name)
    matrix = builtin_models()[family_configs.HYBRID_MODELS[name][3]]

    def keys(config):
        return [table.shape_fields(layer) for layer in model_layers(parse_config(config, "c"), name, "c")]
    assert keys(made) == keys(matrix)


MATRIX_KEYS = {tuple(table.shape_fields(s).values()) for s in builtin_shapes()}


@pytest.mark.parametrize("name", sorted(family_configs.HYBRID_MODELS))
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_every_rank_of_a_hybrid_config_has_its_verdict_keys_in_the_matrix(name, ranks):
    config = family_configs.config_dict(name)
    layers = model_layers(parse_config(config, "c"), name, "c", ranks)
    missing = {tuple(table.shape_fields(s).values()) for s in layers} - MATRIX_KEYS
    assert not missing, f"{name} at tensor parallel {ranks}: no matrix shape for {missing}"


def test_the_attention_matrix_is_all_without_the_mixers():
    every, attention = builtin_shapes("all"), builtin_shapes("attention")
    assert [s for s in every if not is_mixer(s)] == attention
    assert any(s.block_size == HYBRID_BLOCK_SIZE for s in attention)


# transformers' Mamba-1 classes -> (the channel count vLLM gives MambaMixer, state size, conv width)
MAMBA1_CLASSES = {
    "JambaConfig": lambda c: (c.mamba_expand * c.hidden_size, c.mamba_d_state, c.mamba_d_conv),
    "MambaConfig": lambda c: (c.intermediate_size, c.state_size, c.conv_kernel),
    "FalconMambaConfig": lambda c: (c.intermediate_size, c.state_size, c.conv_kernel),
}


@pytest.mark.parametrize("cls", MAMBA1_CLASSES)
def test_each_mamba1_class_saved_by_transformers_reads_its_mixer(tmp_path, cls):
    config = saved(tmp_path, cls)
    mixer = mixer_from_config(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(mixer, Mamba1Shape)
    assert (mixer.channels, mixer.state_size, mixer.conv_width) == MAMBA1_CLASSES[cls](getattr(transformers, cls)())
    attention = attention_layers(parse_config(config, "config.json"), "m", "config.json")
    # Jamba interleaves attention layers; Mamba and Falcon Mamba have none
    assert bool(attention) == (cls == "JambaConfig")
    assert model_layers(parse_config(config, "config.json"), "m", "config.json") == attention + [mixer]


def test_a_pure_mamba2_model_reads_as_its_mixer_alone(tmp_path):
    config = saved(tmp_path, "Mamba2Config")
    instance = transformers.Mamba2Config()
    (mixer,) = model_layers(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(mixer, MixerShape)
    assert (mixer.heads, mixer.head_dim, mixer.state_size, mixer.groups, mixer.chunk_size, mixer.conv_width) == (
        instance.num_heads, instance.head_dim, instance.state_size, instance.n_groups, instance.chunk_size,
        instance.conv_kernel)


def test_a_mamba1_mixer_splits_its_channels_over_the_ranks_or_is_refused_naming_the_setting():
    falcon = BUILTIN_STATE_SPACE["falcon-mamba-7b"]
    assert [mixer_from_config(parse_config(falcon, "c"), "f", "c", tp).channels for tp in (1, 2, 4)] == [8192, 4096, 2048]
    with pytest.raises(ConfigProblem, match="intermediate size 8192 does not split over tensor parallel size 3"):
        mixer_from_config(parse_config(falcon, "c"), "f", "c", tensor_parallel=3)


@pytest.mark.parametrize("config, field, value", [
    *[(BUILTIN_STATE_SPACE["mamba-2.8b"], field, value) for field, value in (
        ("state_size", "16"), ("conv_kernel", 0), ("intermediate_size", True), ("state_size", [16] * 100000))],
    *[(BUILTIN_SHORT_CONV["lfm2-1.2b"], field, value) for field, value in (
        ("conv_L_cache", 0), ("conv_L_cache", "3"), ("conv_dim", True), ("conv_dim", [1] * 100000))],
    *[(BUILTIN_MLA["deepseek-v2-lite"], field, value) for field, value in (
        ("kv_lora_rank", 0), ("kv_lora_rank", "512"), ("qk_rope_head_dim", -1), ("qk_rope_head_dim", True),
        ("num_attention_heads", [1] * 100000))]])
def test_a_bad_mamba1_short_conv_or_latent_attention_field_is_one_short_line_naming_it(config, field, value):
    with pytest.raises(ConfigProblem) as raised:
        model_layers(parse_config(dict(config, **{field: value}), "config.json"), "m", "config.json")
    message = str(raised.value)
    assert f"'{field}'" in message and "\n" not in message and len(message) < 300


def test_the_matrix_holds_the_mamba1_and_pure_mamba2_models_at_each_tensor_parallel_size():
    built = builtin_shapes()
    mamba1 = {(s.model, s.channels) for s in built if isinstance(s, Mamba1Shape)}
    assert mamba1 >= {("falcon-mamba-7b", 8192), ("falcon-mamba-7b-tp4", 2048), ("jamba-v0.1-tp2", 4096),
                      ("mamba-2.8b", 5120)}
    assert {s.model for s in built if isinstance(s, MixerShape)} >= {"mamba-codestral-7b",
                                                                             "mamba-codestral-7b-tp4"}
    assert any(s.model == "jamba-v0.1" for s in built if isinstance(s, LayerShape))
    assert not any(s.model.startswith("falcon-mamba") for s in built if isinstance(s, LayerShape))
    assert all(s not in builtin_shapes("attention") for s in built if is_mixer(s))


def test_a_mamba1_verdict_answers_every_channel_count_and_never_a_mamba2_mixer(tmp_path):
    config = BUILTIN_STATE_SPACE["falcon-mamba-7b"]
    document = mixer_table(tmp_path, config, 2048)
    (verdict,) = document["mixer_verdicts"]
    assert {k: verdict[k] for k in MAMBA1_FIELDS} == {"mixer": "mamba1", "state_size": 16, "conv_width": 4}
    for tp in (1, 2, 4):  # the channels set the grid alone: one verdict for every rank's share
        found = lookup.decide(document, model_layers(parse_config(config, "c"), "f", "c", tp), 75, 65536, VERSIONS)
        assert (found.hit, found.all_fit, found.max_shared) == (True, True, 2048)
    mamba2 = mixer_from_config(parse_config(dict(BUILTIN_HYBRIDS["falcon-h1-1.5b"], mamba_d_state=16), "c"), "h", "c")
    found = lookup.decide(document, [mamba2], 75, 65536, VERSIONS)
    assert not found.hit and "Mamba-2 mixer" in found.miss
    found = lookup.decide(document, [mixer_from_config(parse_config(dict(config, conv_kernel=3), "c"), "f", "c")], 75, 65536,
                          VERSIONS)
    assert not found.hit and "Mamba-1 mixer: state 16, conv 3" in found.miss


# transformers' LFM2 classes -> the channels vLLM gives ShortConv (lfm2.py: conv_dim, else the hidden size;
# lfm2_moe.py: the hidden size)
@pytest.mark.parametrize("cls, extra, channels", [("Lfm2Config", {"conv_dim": 1536}, 1536),
                                                  ("Lfm2Config", {}, 2560), ("Lfm2MoeConfig", {}, 2048)])
def test_each_lfm2_class_saved_by_transformers_reads_its_short_convolution(tmp_path, cls, extra, channels):
    config = dict(saved(tmp_path, cls, layer_types=["conv", "full_attention"] * 2, num_hidden_layers=4), **extra)
    mixer = mixer_from_config(parse_config(config, "config.json"), "m", "config.json")
    assert isinstance(mixer, ShortConvShape)
    assert (mixer.channels, mixer.conv_width) == (channels, getattr(transformers, cls)().conv_L_cache)
    attention = attention_layers(parse_config(config, "config.json"), "m", "config.json")
    assert attention and all(s.block_size == HYBRID_BLOCK_SIZE for s in attention)
    assert model_layers(parse_config(config, "config.json"), "m", "config.json") == attention + [mixer]


def test_a_short_convolution_splits_its_channels_over_the_ranks_or_is_refused_naming_the_setting():
    lfm2 = BUILTIN_SHORT_CONV["lfm2-1.2b"]
    assert [mixer_from_config(parse_config(lfm2, "c"), "l", "c", tp).channels for tp in (1, 2, 4)] == [2048, 1024, 512]
    with pytest.raises(ConfigProblem, match=r"2048 channels \('conv_dim'\) do not split over tensor parallel "
                                                 "size 3.*TENSOR_PARALLEL_SIZE"):
        mixer_from_config(parse_config(lfm2, "c"), "l", "c", tensor_parallel=3)


def test_the_matrix_holds_the_lfm2_models_at_each_tensor_parallel_size():
    built = builtin_shapes()
    convs = {(s.model, s.channels, s.conv_width) for s in built if isinstance(s, ShortConvShape)}
    assert convs >= {("lfm2-1.2b", 2048, 3), ("lfm2-700m-tp4", 384, 3), ("lfm2-8b-a1b-tp2", 1024, 3)}
    attention = {(s.model, s.num_query_heads, s.num_kv_heads) for s in built if isinstance(s, LayerShape)}
    assert {("lfm2-700m", 24, 8), ("lfm2-700m-tp4", 6, 2), ("lfm2-8b-a1b-tp4", 8, 2)} <= attention


def test_a_short_convolution_verdict_answers_every_rank_and_never_a_mamba1_mixer_of_its_width(tmp_path):
    config = BUILTIN_SHORT_CONV["lfm2-1.2b"]
    document = mixer_table(tmp_path, config, 1024)
    (verdict,) = document["mixer_verdicts"]
    assert {k: verdict[k] for k in SHORT_CONV_FIELDS} == {"mixer": "short_conv", "conv_width": 3}
    for tp in (1, 2, 4):
        found = lookup.decide(document, [mixer_from_config(parse_config(config, "c"), "l", "c", tp)], 75, 65536, VERSIONS)
        assert (found.hit, found.all_fit, found.max_shared) == (True, True, 1024)
    mamba1 = mixer_from_config(parse_config(dict(BUILTIN_STATE_SPACE["mamba-2.8b"], conv_kernel=3), "c"), "m", "c")
    found = lookup.decide(document, [mamba1], 75, 65536, VERSIONS)
    assert not found.hit and "Mamba-1 mixer: state 16, conv 3" in found.miss
    wider = mixer_from_config(parse_config(dict(config, conv_L_cache=4), "c"), "l", "c")
    found = lookup.decide(document, [wider], 75, 65536, VERSIONS)
    assert not found.hit and "short convolution: width 4" in found.miss


def fit_with_words(tmp_path, monkeypatch, config: dict, words: dict, env: dict | None = None):
    """The preflight's fit result for `config` on a T4 from a one-verdict table, beside the extra words."""
    from contract import layout
    from entrypoint.argv import Extras
    from entrypoint.checks.model import Resolved
    from contract.model_config import parse_config
    from entrypoint.device import Device
    from entrypoint.preflight import fit_check

    mixer_table(tmp_path, config, 2048)
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(tmp_path / "fit-table.json"))
    monkeypatch.setattr(lookup, "installed_versions", lambda: VERSIONS)
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    check = fit_check(Resolved(str(folder), None, None, config, parse_config(config)), extras=Extras(words), env=env)(
        Device("StandIn Tesla T4", (7, 5), 65536, 1))
    return check.start()()


MAMBA2_MODEL = {"model_type": "mamba2", "num_heads": 128, "head_dim": 64, "state_size": 128, "n_groups": 8,
                "chunk_size": 256, "conv_kernel": 4, "hidden_size": 4096, "expand": 2}


@pytest.mark.parametrize("words, says", [
    ({}, None), ({"use_replayssm": True}, None), ({"use_replayssm": True, "replayssm_buffer_len": "16"}, None),
    ({"replayssm_buffer_len": "64"}, None),
    ({"use_replayssm": True, "replayssm_buffer_len": "64"}, "--replayssm-buffer-len 64: the build proves it at 16")])
def test_replayssm_at_a_history_length_the_build_did_not_record_is_named_not_proven(tmp_path, monkeypatch, words,
                                                                                    says):
    result = fit_with_words(tmp_path, monkeypatch, MAMBA2_MODEL, words)
    assert result.status.value == ("warn" if says else "pass"), result
    assert says is None or (says in result.message and "\n" not in result.message + result.fix)


def test_replayssm_on_kimi_linear_names_its_recovery_kernels_unproven_whatever_the_length():
    from entrypoint.checks.clamp import replayssm_unproven

    assert "Kimi Linear's ReplaySSM recovery" in replayssm_unproven(True, None, "kimi_linear")
    assert replayssm_unproven(None, "64", "kimi_linear") is None and replayssm_unproven(True, "16", "mamba2") is None


def test_a_tuned_config_folder_is_named_not_proven_beside_a_fit_the_table_proved(tmp_path, monkeypatch):
    result = fit_with_words(tmp_path, monkeypatch, MAMBA2_MODEL, {}, {"VLLM_TUNED_CONFIG_FOLDER": "/configs/mine"})
    assert result.status.value == "warn" and "VLLM_TUNED_CONFIG_FOLDER='/configs/mine'" in result.message
    both = fit_with_words(tmp_path, monkeypatch, MAMBA2_MODEL, {"use_replayssm": True, "replayssm_buffer_len": "32"},
                          {"VLLM_TUNED_CONFIG_FOLDER": "/configs/mine"})
    assert "--replayssm-buffer-len 32" in both.message and "/configs/mine" in both.message
    assert fit_with_words(tmp_path, monkeypatch, MAMBA2_MODEL, {}, {"VLLM_TUNED_CONFIG_FOLDER": " "}).status.value == "pass"
