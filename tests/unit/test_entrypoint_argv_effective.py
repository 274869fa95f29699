"""The extra words judged as vLLM will take them (entrypoint/argv.py, argv_files.py, the checks that
re-judge what they change): each value typed by the option table's type, choices and nargs, refused
in one line as vLLM's parser refuses it; the options that change what a check decided re-judged on
the effective values (--hf-overrides, --hf-config-path, --mm-encoder-attn-backend, the files the
server opens), not refused wholesale. The table is made here by argparse with the kinds of options
vLLM's parser has; the image tier (tests/image/test_argv_types_in_image.py) judges with the real one."""
import json
import os
import shutil

import pytest

from contract.verdict import Status
from entrypoint import preflight
from entrypoint.argv import judge_extra, speculative_problem
from entrypoint.argv_files import opened_files_problem
from entrypoint.checks import model, turing_settings
from entrypoint.settings import SettingsError, parse_settings
from imagefacts.value_types import human_readable_int, type_spec
from tests.support.model_files import write_hf_cache_model, write_model_dir
from tests.support.option_tables import vllm_like_table
from tests.support.vllm_033_facts import VLLM_033_MIN, VLLM_033_VALUES



TABLE = vllm_like_table()


def refusal(*words) -> str:
    with pytest.raises(SettingsError) as raised:
        judge_extra(tuple(words), (), TABLE)
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("words, vllm_says", [
    (("--seed", "abc"), "argument --seed: invalid int value: 'abc'"),
    (("--seed", "²"), "argument --seed: invalid int value: '²'"),
    (("--swap-space", "4GB"), "argument --swap-space: invalid float value: '4GB'"),
    (("--load-format", "gguff"), "argument --load-format: invalid choice: 'gguff'"),
    (("--max-num-batched-tokens", "1.5K"), "Decimals are not allowed with binary suffixes like K"),
    (("--max-num-batched-tokens", "lots"), "invalid human_readable_int value: 'lots'"),
    (("--cudagraph-capture-sizes", "1", "x"), "argument --cudagraph-capture-sizes: invalid int value: 'x'"),
    (("--compilation-config", "3"), "argument --compilation-config: expected a JSON object"),
    (("--compilation-config", "{level: 3}"), "argument --compilation-config: invalid JSON"),
    (("--compilation-config", '{"level": 3}'), "argument --compilation-config: unknown key(s) 'level'; this config "
                                               "takes cache_dir, compile_sizes, cudagraph_mode, mode"),
    (("--hf-overrides", '{"max_position_embeddings": }'), "argument --hf-overrides: Value"),
    (("--default-chat-template-kwargs", "[" * 100000), "invalid loads value"),  # deeper than json's stack
    (("--hf-overrides", '{"a": ' + "[" * 100000 + "}"), "argument --hf-overrides: Value"),
    (("--compilation-config", "[" * 100000), "argument --compilation-config: invalid JSON"),
])
def test_a_value_vllms_parser_refuses_is_refused_in_one_line_as_it_says(words, vllm_says):
    message = refusal(*words)
    assert message.startswith("VLLM_EXTRA_ARGS=") and vllm_says in message, message


def test_accepted_values_reach_the_checks_typed():
    extras = judge_extra(("--seed", "7", "--swap-space=2.5", "--max-num-batched-tokens", "8k", "--load-format", "dummy",
                          "--cudagraph-capture-sizes", "1", "2", "--hf-overrides", '{"rope_theta": 5}',
                          "--compilation-config.cache_dir", "/c", "--chat-template", "None"), (), TABLE)
    assert extras.values == {"seed": 7, "swap_space": 2.5, "max_num_batched_tokens": 8000, "load_format": "dummy",
                             "cudagraph_capture_sizes": [1, 2], "hf_overrides": {"rope_theta": 5},
                             "compilation_config": {"cache_dir": "/c"}, "chat_template": None}


def test_a_config_that_takes_other_keys_is_recorded_without_fields_and_keeps_them():
    fields = {entry["dest"]: entry.get("fields") for entry in TABLE["options"] if entry.get("type") == "dataclass"}
    assert fields == {"compilation_config": ["cache_dir", "compile_sizes", "cudagraph_mode", "mode"],
                      "kv_transfer_config": None}
    assert judge_extra(("--kv-transfer-config", '{"anything": 1}'), (), TABLE).get("kv_transfer_config") == {"anything": 1}


def test_a_table_without_types_takes_any_text_as_before():
    untyped = json.loads(json.dumps(TABLE))
    for entry in untyped["options"]:
        entry.pop("type", None)
    assert judge_extra(("--hf-overrides", '{"a": 1}'), (), untyped).get("hf_overrides") == '{"a": 1}'
    assert judge_extra(("--max-num-batched-tokens", "lots"), (), untyped).get("max_num_batched_tokens") == "lots"


def test_type_spec_names_the_callables_vllm_uses():
    def standin_optional_type(return_type):  # vLLM's optional_type, whose closure the table reads
        def _optional_type(value):
            return None if value in ("", "None") else return_type(value)
        return _optional_type

    assert [type_spec(kind) for kind in (None, int, float, str, json.loads, human_readable_int)] == \
        [None, "int", "float", "str", "json", "human_readable_int"]
    assert type_spec(standin_optional_type(int)) == "optional:int"
    assert type_spec(standin_optional_type(json.loads)) == "optional:json"
    assert type_spec(lambda value: value).startswith("callable:")


@pytest.mark.parametrize("words, written", [
    (("--enforce-eager",), "no --enforce-eager:"), (("--no-enforce-eager",), "no --no-enforce-eager:"),
    (("--enforce_eager",), "no --enforce-eager:"), (("--enforce",), "no --enforce-eager:"),  # what it abbreviates
])
def test_a_refusal_names_the_option_as_the_user_wrote_it(words, written):
    message = refusal(*words)
    assert written in message and "Set ENFORCE_EAGER instead" in message, message
    assert "which the preflight checks" not in message  # no check reads it: the setting is its one place


# --hf-overrides and --hf-config-path: the checks read the config the server will

def settings(tmp_path, **env):
    return parse_settings({"MODEL": str(tmp_path / "model"), "HF_HOME": str(tmp_path / "hf"), **env})


def model_result(tmp_path, words, max_model_len):
    extras = judge_extra(tuple(words), (), TABLE)
    chosen = settings(tmp_path, MAX_MODEL_LEN=str(max_model_len))
    models = preflight.resolve_models(chosen, None, extras)
    return model.check_model(models.model, chosen.max_model_len), models


LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
         "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512, "num_hidden_layers": 2}


def test_hf_overrides_lowering_the_limit_refuses_a_length_the_folder_allows(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    assert model_result(tmp_path, (), 4096)[0].status is Status.PASS
    result, _ = model_result(tmp_path, ("--hf-overrides", '{"max_position_embeddings": 1024}'), 4096)
    assert result.status is Status.FAIL and "above the model's limit of 1024" in result.message, result


def test_hf_overrides_raising_the_limit_is_accepted(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    assert model_result(tmp_path, (), 8192)[0].status is Status.FAIL
    result, models = model_result(tmp_path, ("--hf-overrides.max_position_embeddings", "8192"), 8192)
    assert result.status is Status.PASS, result
    assert models.model.overridden and json.loads((tmp_path / "model" / "config.json").read_text()) == LLAMA


def test_hf_overrides_update_a_nested_config_key_by_key_and_replace_the_rest():
    config = {"text_config": {"max_position_embeddings": 4096, "hidden_size": 8}, "quantization_config": {"a": 1, "b": 2}}
    merged = model.with_overrides(config, {"text_config": {"max_position_embeddings": 1024},
                                           "quantization_config": {"quant_method": "fp8"}})
    assert merged == {"text_config": {"max_position_embeddings": 1024, "hidden_size": 8},
                      "quantization_config": {"quant_method": "fp8"}}
    assert config["text_config"]["max_position_embeddings"] == 4096


@pytest.mark.parametrize("method, runs_on_turing", [("mxfp4", False), ("fp8", True)])
def test_a_quantization_override_is_judged_by_the_quantization_check(tmp_path, method, runs_on_turing):
    """vLLM 0.33.0's own minimums (the image facts): mxfp4 needs 8.0; fp8 runs on 7.5 (FP8 Marlin)."""
    write_model_dir(tmp_path / "model", LLAMA)
    words = ("--hf-overrides", '{"quantization_config": {"quant_method": "%s"}}' % method)
    _, models = model_result(tmp_path, words, 4096)
    result = turing_settings.check_quantization(models.model.typed, judge_extra(words, (), TABLE, VLLM_033_VALUES), (7, 5),
                                                VLLM_033_MIN.get)
    if runs_on_turing:
        assert result.status is Status.PASS, result
        return
    assert result.status is Status.FAIL and f"VLLM_EXTRA_ARGS --hf-overrides quantization_config: {method}" in result.message
    assert "remove VLLM_EXTRA_ARGS --hf-overrides quantization_config" in result.fix
    assert turing_settings.check_quantization(models.model.typed, judge_extra(words, (), TABLE, VLLM_033_VALUES), (8, 0),
                                              VLLM_033_MIN.get).status is Status.PASS


def test_an_override_of_the_wrong_type_is_named_as_the_overrides(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    result, _ = model_result(tmp_path, ("--hf-overrides", '{"num_attention_heads": "eight"}'), 4096)
    assert result.status is Status.FAIL and "with --hf-overrides" in result.message and "--hf-overrides" in result.fix


def test_hf_config_path_is_the_config_the_checks_read(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({**LLAMA, "max_position_embeddings": 1024}))
    for where in (tmp_path / "other", tmp_path / "other" / "config.json"):
        result, models = model_result(tmp_path, ("--hf-config-path", str(where)), 4096)
        assert result.status is Status.FAIL and "limit of 1024" in result.message, result
        assert models.model.config_file == str(tmp_path / "other" / "config.json")


def test_an_hf_config_path_that_is_not_there_fails_naming_it(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    result, _ = model_result(tmp_path, ("--hf-config-path", str(tmp_path / "none")), 4096)
    assert result.status is Status.FAIL and f"--hf-config-path {tmp_path / 'none'} does not exist" in result.message
    result, _ = model_result(tmp_path, ("--hf-config-path", "org/not-cached"), 4096)
    assert result.status is Status.FAIL and "not in the Hugging Face cache" in result.message


def test_revision_picks_the_snapshot_the_checks_read(tmp_path):
    snapshot = write_hf_cache_model(tmp_path / "hf" / "hub", "org/llama", config=LLAMA)
    chosen = parse_settings({"MODEL": "org/llama", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    for words, found in (((), True), (("--revision", "main"), True), (("--revision", snapshot.name), True),
                         (("--revision", "v2"), False)):
        resolved = preflight.resolve_models(chosen, None, judge_extra(words, (), TABLE, VLLM_033_VALUES)).model
        assert (resolved.path == str(snapshot)) is found, (words, resolved)
    assert "HF_HUB_OFFLINE is set" in resolved.problem.message


def test_speculative_config_in_the_words_is_judged_like_the_setting(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    write_model_dir(tmp_path / "drafter", {**LLAMA, "quantization_config": {"quant_method": "compressed-tensors"}})
    words = ("--speculative-config.model", str(tmp_path / "drafter"), "--speculative-config.num_speculative_tokens", "4")
    extras = judge_extra(words, (), TABLE, VLLM_033_VALUES)
    assert speculative_problem(extras, False) is None
    drafter = preflight.resolve_models(settings(tmp_path), None, extras).drafter
    assert model.check_drafter(drafter).status is Status.FAIL  # the quantized drafter, found through the option
    conflict = speculative_problem(extras, True)
    assert conflict is not None and "while SPECULATIVE_CONFIG or DRAFTER is set" in str(conflict)
    for value in ("[1]", '{"model": ["/d"]}', '{"model": "/d", "num_speculative_tokens": 0}'):
        problem = speculative_problem(judge_extra(("--speculative-config", value), (), TABLE), False)
        assert problem is not None and problem.variable == "VLLM_EXTRA_ARGS --speculative-config", value
    dotted = ("--speculative-config.model", "/d", "--speculative-config.num_speculative_tokens", "0")
    problem = speculative_problem(judge_extra(dotted, (), TABLE), False)
    assert problem is not None and '"num_speculative_tokens" as a JSON integer from 1 to 128, not 0' in str(problem)


def test_the_fit_check_is_handed_the_overridden_config(tmp_path):
    path = preflight.written_config({"max_position_embeddings": 1024})
    try:
        assert json.loads(open(path).read()) == {"max_position_embeddings": 1024}
        assert os.path.basename(path) == "config.json"
    finally:
        shutil.rmtree(os.path.dirname(path))


# the files and folders the words point the server at

@pytest.mark.parametrize("words", [
    ("--chat-template", "/nowhere/template.jinja"), ("--chat-template", "template.jinja"),
    ("--tokenizer", "/nowhere/tokenizer"), ("--tokenizer", "./tok"), ("--tool-parser-plugin", "/nowhere/p.py"),
    ("--generation-config", "/nowhere"), ("--ssl-keyfile", "/nowhere/key.pem"),
])
def test_a_path_the_server_cannot_open_is_refused_naming_the_option(words):
    problem = opened_files_problem(judge_extra(words, (), TABLE, VLLM_033_VALUES))
    assert problem is not None and problem.variable == f"VLLM_EXTRA_ARGS {words[0]}", problem
    assert "\n" not in str(problem) and "Mount it into the container" in str(problem)


def test_paths_and_values_the_server_can_use_are_accepted(tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    for words in (("--chat-template", str(template)), ("--chat-template", "{% for m in messages %}{{ m }}{% endfor %}"),
                  ("--tokenizer", "google/gemma-4-E2B-it"), ("--tokenizer", str(tmp_path)),
                  ("--generation-config", "vllm"), ("--hf-overrides", "{}")):
        assert opened_files_problem(judge_extra(words, (), TABLE, VLLM_033_VALUES)) is None, words


def test_a_torn_tokenizer_is_refused_where_the_server_reads_it(tmp_path):
    """MODEL's folder's tokenizer files fail the model check; with --tokenizer FOLDER that folder's are
    the ones read, and refused naming the option (the model folder's are then not the server's)."""
    write_model_dir(tmp_path / "model", LLAMA)
    (tmp_path / "model" / "tokenizer.json").write_text('{"version": "1.0", "model": {"vocab": {"a": 0')
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer_config.json").write_text('{"added_tokens_decoder": {')
    extras = judge_extra(("--tokenizer", str(tmp_path / "tok")), (), TABLE, VLLM_033_VALUES)
    problem = opened_files_problem(extras)
    assert problem is not None and problem.variable == "VLLM_EXTRA_ARGS --tokenizer", problem
    assert f"{tmp_path}/tok/tokenizer_config.json is not valid JSON" in str(problem), problem
    assert model.check_model(preflight.resolve_models(settings(tmp_path), None, extras).model).status is Status.PASS
    result = model.check_model(preflight.resolve_models(settings(tmp_path), None, judge_extra((), (), TABLE)).model)
    assert result.status is Status.FAIL and f"{tmp_path}/model/tokenizer.json is not valid JSON" in result.message
    assert "replace tokenizer.json with the model's own file" in result.fix
    (tmp_path / "tok" / "tokenizer_config.json").write_text('{"added_tokens_decoder": {}}')
    assert opened_files_problem(extras) is None


def test_hf_overrides_that_are_not_an_object_are_refused():
    problem = opened_files_problem(judge_extra(("--hf-overrides", "max_position_embeddings=1024"), (), TABLE))
    assert problem is not None and "a JSON object of config.json keys" in str(problem)


@pytest.mark.parametrize("words", [("--mm-encoder-attn-backend", "FLASH_ATTN"), ("--attention-backend", "FLASHINFER")])
def test_a_forced_backend_turing_lacks_is_refused_naming_the_option(words):
    problem = turing_settings.settings_problem({}, judge_extra(words, (), TABLE, VLLM_033_VALUES), (7, 5))
    assert problem is not None and problem.variable == f"VLLM_EXTRA_ARGS {words[0]}", problem
    assert turing_settings.settings_problem({}, judge_extra(words, (), TABLE, VLLM_033_VALUES), (8, 6)) is None
    assert turing_settings.settings_problem({}, judge_extra((words[0], "TRITON_ATTN"), (), TABLE, VLLM_033_VALUES), (7, 5)) is None


def test_the_cache_folders_the_words_name_are_probed(tmp_path):
    extras = judge_extra(("--download-dir", "/d", "--compilation-config", '{"cache_dir": "/c"}'), (), TABLE)
    named = {written.setting: written.path for written in preflight.cache_writes(settings(tmp_path), extras)}
    assert named["VLLM_EXTRA_ARGS --download-dir"] == "/d"
    assert named["VLLM_EXTRA_ARGS --compilation-config cache_dir"] == "/c"
    assert named["TRITON_CACHE_DIR"] == "/root/.triton/cache"
    chosen = settings(tmp_path, CUDA_CACHE_PATH="/cuda", TORCHINDUCTOR_CACHE_DIR="/inductor", XDG_CACHE_HOME="/xdg")
    named = {written.setting: written.path for written in preflight.cache_writes(chosen, extras)}
    assert (named["CUDA_CACHE_PATH"], named["TORCHINDUCTOR_CACHE_DIR"], named["XDG_CACHE_HOME"]) == ("/cuda", "/inductor", "/xdg")


@pytest.mark.parametrize("variable, raw", [
    ("TURING_CLAMP_SMEM_LIMIT", "64k"), ("TURING_CLAMP_SMEM_LIMIT", "0"), ("TURING_CLAMP_SMEM_LIMIT", "99999999"),
    ("TURING_CLAMP_SMEM_LIMIT", "²"), ("VLLM_TURING_SMEM_LIMIT", "65536.0"), ("TURING_CLAMP_CC", "7.5"),
    ("TURING_CLAMP_FIT_TABLE", "fit.json"), ("TURING_CLAMP_RANKED_CONFIGS", "/a\nb"),
])
def test_the_clamps_settings_are_refused_at_settings_time_naming_them(tmp_path, variable, raw):
    with pytest.raises(SettingsError) as raised:
        settings(tmp_path, **{variable: raw})
    assert raised.value.variable == variable and str(raised.value).startswith(f"{variable}=")


def test_the_clamps_settings_are_typed(tmp_path):
    chosen = settings(tmp_path, TURING_CLAMP_SMEM_LIMIT="65536", VLLM_TURING_CC="86")
    assert (chosen.clamp_smem_limit, chosen.clamp_cc) == (65536, 86)
