"""The fit check answered from the fit table's verdicts (patches.fitcheck.lookup): a model whose every
layer shape the build judged on this device is answered without a subprocess; any other model, device
or version falls back to the full check, and the result says why."""
import json

import pytest
import transformers

from contract.model_config import parse_config
from contract import layout
from contract.verdict import Status
from entrypoint.checks.clamp import start_fit
from patches.fitcheck import lookup, fit_table as table
from patches.fitcheck.attention import run_dtype
from patches.fitcheck.family import UnprovenLayers
from patches.fitcheck.families import load_model_config
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS, BUILTIN_MODELS

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}
E2B = BUILTIN_MODELS["gemma4-e2b"]


def rows_for(model_shapes, shared_by_layer):
    """Report rows of the patched launches, three per layer shape."""
    return [{"model": s.model, "layer": s.layer, "shared": shared_by_layer[s.layer],
             "fits": shared_by_layer[s.layer] <= 65536} for s in model_shapes for _ in range(3)]


def written_table(tmp_path, shared_by_layer, versions=VERSIONS, cc=75, limit=65536):
    verdicts = table.shape_verdicts(rows_for(E2B, shared_by_layer), E2B, cc, limit)
    path = tmp_path / "fit-table.json"
    table.write_table(path, table.merge(None, [], versions, verdicts))
    return path


def config_file(tmp_path, name="gemma4-e2b"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BUILTIN_CONFIGS[name]))
    return folder / "config.json"


def start_fit_on(config_path):
    """The entrypoint's fit check for a config.json, parsed as the model check parses it."""
    return start_fit(str(config_path), parse_config(json.loads(config_path.read_text())), (7, 5), 65536)()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """vLLM 0.33.0 and Triton 3.8.0 as package metadata on sys.path (what lookup reads, not the code)."""
    site = tmp_path / "site"
    for name, version in VERSIONS.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    monkeypatch.syspath_prepend(str(site))


def test_every_layer_judged_is_a_hit_with_the_recorded_needs(tmp_path):
    document = table.read_table(written_table(tmp_path, {"sliding": 40000, "global": 61440}))
    found = lookup.decide(document, load_model_config(config_file(tmp_path)), 75, 65536, VERSIONS)
    assert (found.hit, found.all_fit, found.launches, found.max_shared) == (True, True, 6, 61440)


def test_a_recorded_verdict_that_does_not_fit_is_a_hit_that_fails_naming_the_head(tmp_path):
    document = table.read_table(written_table(tmp_path, {"sliding": 40000, "global": 98304}))
    found = lookup.decide(document, E2B, 75, 65536, VERSIONS)
    assert found.hit and not found.all_fit and found.worst["head_size"] == 512


@pytest.mark.parametrize("cc, limit, model", [(86, 101376, "gemma4-e2b"), (75, 65536, "gemma4-e4b")])
def test_another_device_or_a_shape_not_judged_is_a_miss_naming_it(tmp_path, cc, limit, model):
    document = table.read_table(written_table(tmp_path, {"sliding": 40000, "global": 61440}))
    found = lookup.decide(document, BUILTIN_MODELS[model], cc, limit, VERSIONS)
    assert not found.hit and f"on cc {cc} at {limit} bytes" in found.miss


@pytest.mark.parametrize("versions", [{"vllm": "0.32.0", "triton": "3.8.0"}, {"vllm": "0.33.0", "triton": "3.7.1"}])
def test_a_table_of_another_vllm_or_triton_is_a_miss(tmp_path, versions):
    document = table.read_table(written_table(tmp_path, {"sliding": 40000, "global": 61440}, versions))
    found = lookup.decide(document, E2B, 75, 65536, VERSIONS)
    assert not found.hit and found.miss.startswith("fit table written for vLLM")


def test_without_vllm_installed_it_is_a_miss():
    assert lookup.decide({}, E2B, 75, 65536, None).miss == "vLLM or Triton is not installed as a package"


def test_merging_keeps_verdicts_of_these_versions_and_drops_those_of_others(tmp_path):
    first = table.read_table(written_table(tmp_path, {"sliding": 40000, "global": 61440}))
    sm86 = table.shape_verdicts(rows_for(E2B, {"sliding": 1, "global": 2}), E2B, 86, 101376)
    assert len(table.merge(first, [], VERSIONS, sm86)["verdicts"]) == 4
    assert len(table.merge(first, [], {"vllm": "0.34.0", "triton": "3.8.0"}, sm86)["verdicts"]) == 2


def test_the_entrypoint_answers_a_hit_without_a_subprocess(tmp_path, monkeypatch, installed):
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    result = start_fit_on(config_file(tmp_path))
    assert result.status is Status.PASS
    assert "6 Triton launches fit 65536 bytes" in result.message and "nothing compiled" in result.message


def test_the_entrypoint_judges_the_config_the_model_check_read_not_the_file_again(tmp_path, monkeypatch, installed):
    # The model check parsed config.json once; the fit lookup takes that dict (here E2B's, which
    # the table holds) and never re-reads the file (here E4B's, which the table lacks).
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    result = start_fit(str(config_file(tmp_path, "gemma4-e4b")), parse_config(BUILTIN_CONFIGS["gemma4-e2b"]), (7, 5), 65536)()
    assert result.status is Status.PASS and "nothing compiled" in result.message


def test_the_entrypoint_falls_back_to_the_full_check_on_a_miss_and_says_why(tmp_path, monkeypatch, installed):
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    result = start_fit_on(config_file(tmp_path, "gemma4-e4b"))
    # The full check is the subprocess; without vLLM on this host it exits without a report.
    assert "[full check: no verdict in the fit table for gemma4-e4b/sliding" in result.message


def test_a_hybrid_whose_mixers_are_not_recorded_is_not_reported_as_fitting(tmp_path, monkeypatch, installed):

    folder = tmp_path / "minimax"
    transformers.MiniMaxConfig().save_pretrained(folder)
    with pytest.raises(UnprovenLayers, match="'linear_attention'"):
        load_model_config(folder / "config.json")
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    result = start_fit_on(folder / "config.json")
    assert result.status is Status.WARN and "not proven" in result.message and "linear_attention" in result.message


def test_a_mamba2_hybrid_the_table_lacks_goes_to_the_full_check_naming_its_layer(tmp_path, monkeypatch, installed):

    folder = tmp_path / "nemotron-h"
    transformers.NemotronHConfig().save_pretrained(folder)
    read = load_model_config(folder / "config.json")
    assert [type(s).__name__ for s in read] == ["LayerShape", "MixerShape"]
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    result = start_fit_on(folder / "config.json")
    assert "[full check: no verdict in the fit table for nemotron-h/global" in result.message


@pytest.mark.parametrize("family", ["LlamaConfig", "MistralConfig", "Qwen2Config", "Qwen3Config", "NemotronConfig"])
def test_attention_only_families_saved_by_transformers_read_as_attention_shapes(tmp_path, family):

    getattr(transformers, family)().save_pretrained(tmp_path)
    read = load_model_config(tmp_path / "config.json")
    assert read and all(s.head_size == 128 and s.num_query_heads % s.num_kv_heads == 0 for s in read)


def test_a_config_the_fit_check_cannot_read_is_not_judged_and_does_not_stop_the_server(tmp_path, monkeypatch,
                                                                                         installed):
    # No heads and no class defaults for this model type: before, the full check exited 2 and the
    # preflight failed a model vLLM may serve. Now a warning names the missing field.
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "odd", "hidden_size": 1024}))
    result = start_fit_on(folder / "config.json")
    assert result.status is Status.WARN and result.message.startswith("not judged:")
    assert "'num_attention_heads' is not set" in result.message and "OutOfResources" in result.fix


def test_on_ampere_a_bf16_checkpoint_is_answered_from_bf16_verdicts_and_dtype_float16_from_fp16(
        tmp_path, monkeypatch, installed):
    # The table holds sm_86 verdicts in bf16 only: a bf16 Gemma 4 config is a hit there; under
    # DTYPE=float16 the same model is a miss that names the dtype.
    verdicts = table.shape_verdicts(rows_for(E2B, {"sliding": 40000, "global": 61440}), E2B, 86, 101376, "bfloat16")
    path = tmp_path / "fit-table.json"
    table.write_table(path, table.merge(None, [], VERSIONS, verdicts))
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(path))
    config_path = config_file(tmp_path)
    config = dict(json.loads(config_path.read_text()), dtype="bfloat16")
    hit = start_fit(str(config_path), parse_config(config), (8, 6), 101376)()
    assert hit.status is Status.PASS and "nothing compiled" in hit.message
    found = lookup.lookup(path, parse_config(config, str(config_path)), 86, 101376, str(config_path), dtype=run_dtype(parse_config(config), 86, "float16"))
    assert not found.hit and found.miss.endswith("on cc 86 at 101376 bytes in float16")


@pytest.mark.parametrize("launches, counted", [(1, "1 Triton launch fit"), (2, "2 Triton launches fit")])
def test_the_pass_line_counts_launches_in_words(launches, counted):
    from entrypoint.checks.clamp import judge_lookup

    found = lookup.Lookup(hit=True, launches=launches, max_shared=4096, all_fit=True)
    assert judge_lookup(found, (7, 5), 65536).message.startswith(f"{counted} 65536 bytes on cc 7.5")
