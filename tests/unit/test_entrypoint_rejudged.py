"""Options of the extra words that change what a check decided, re-judged on their effective values
as vLLM 0.33.0 takes them (each rule cites where its source says so): kernel backends a device
cannot run, the load format and the weights it reads, the config format, the LoRA adapters,
--quantization-config, and every JSON option parsed once. The option table is made here by
argparse with these options of the kinds vLLM 0.33.0's parser gives them (the image facts' types)."""
import argparse
import json

import pytest
from hypothesis import example, given, strategies as st

from contract.verdict import Status
from entrypoint import argv_files, preflight
from entrypoint.argv import judge_extra
from entrypoint.argv_files import opened_files_problem
from entrypoint.checks import model, turing_settings
from entrypoint.settings import SettingsError, parse_settings
from imagefacts.shape import option_table
from tests.support.model_files import write_model_dir
from tests.support.vllm_033_facts import VLLM_033_MIN, VLLM_033_VALUES
from tests.support.standin_vllm_parser import add_vllm_like_options, parse_dataclass, standin_optional_type
from door.problem import Problem


def rejudged_parser() -> argparse.ArgumentParser:
    """The stand-in parser with these options as vLLM 0.33.0's has them (its image facts: type,
    nargs, choices)."""
    parser = add_vllm_like_options(argparse.ArgumentParser(conflict_handler="resolve"))
    parser.add_argument("--load-format", type=str)
    parser.add_argument("--config-format", type=str)
    parser.add_argument("--lora-modules", nargs="+", type=standin_optional_type(str))
    parser.add_argument("--enable-lora", action=argparse.BooleanOptionalAction)
    parser.add_argument("--quantization-config", type=standin_optional_type(parse_dataclass))
    for flag in ("--kernel-config", "--attention-config", "--structured-outputs-config"):
        parser.add_argument(flag, type=parse_dataclass)
    parser.add_argument("--mamba-backend", type=str)
    parser.add_argument("--gdn-prefill-backend", choices=["flashinfer", "triton", "cutedsl", "aiter_flydsl", "sycl"])
    parser.add_argument("--kda-prefill-backend", choices=["auto", "triton", "flashkda", "flashinfer", "fused"])
    parser.add_argument("--kda-decode-backend", choices=["auto", "native", "flashinfer", "triton"])
    return parser


TABLE = option_table(rejudged_parser())
TURING, AMPERE, HOPPER, BLACKWELL = (7, 5), (8, 6), (9, 0), (10, 0)


def words(*given):
    return judge_extra(tuple(given), (), TABLE, VLLM_033_VALUES)


# kernel backends: refused where vLLM 0.33.0 cannot run them, as --mm-encoder-attn-backend FLASH_ATTN is

@pytest.mark.parametrize("option, value, runs_on", [
    ("--kda-prefill-backend", "flashkda", HOPPER), ("--kda-prefill-backend", "flashinfer", BLACKWELL),
    ("--kda-decode-backend", "native", HOPPER), ("--kda-decode-backend", "flashinfer", BLACKWELL),
    ("--gdn-prefill-backend", "sycl", None), ("--gdn-prefill-backend", "aiter_flydsl", None),
    ("--kda-prefill-backend", "fused", None),
])
def test_a_kernel_backend_the_device_cannot_run_is_refused_naming_the_option(option, value, runs_on):
    problem = turing_settings.settings_problem({}, words(option, value), TURING)
    assert isinstance(problem, SettingsError) and problem.variable == f"VLLM_EXTRA_ARGS {option}", problem
    assert "\n" not in str(problem) and f"Remove {option}" in str(problem)
    assert turing_settings.settings_problem({}, words(option, value), AMPERE) is not None
    if runs_on:
        assert turing_settings.settings_problem({}, words(option, value), runs_on) is None


@pytest.mark.parametrize("given", [
    ("--gdn-prefill-backend", "flashinfer"), ("--gdn-prefill-backend", "cutedsl"),  # vLLM falls back to Triton
    ("--gdn-prefill-backend", "triton"), ("--kda-prefill-backend", "auto"), ("--kda-decode-backend", "triton"),
    ("--mamba-backend", "triton"), ("--mamba-backend", "FlashInfer"), ("--mamba-backend", "cpu"),
])
def test_a_backend_vllm_runs_or_falls_back_from_on_turing_is_accepted(given):
    assert turing_settings.settings_problem({}, words(*given), TURING) is None


def test_a_mamba_backend_vllm_does_not_know_is_refused_on_any_device_or_none():
    for cc in (None, TURING, BLACKWELL):
        problem = turing_settings.settings_problem({}, words("--mamba-backend", "mamba3"), cc)
        assert problem is not None and problem.variable == "VLLM_EXTRA_ARGS --mamba-backend", problem
        assert "triton, flashinfer, cpu" in str(problem)


BACKEND_OPTIONS = ["--mamba-backend", "--gdn-prefill-backend", "--kda-prefill-backend", "--kda-decode-backend",
                   "--attention-backend", "--mm-encoder-attn-backend"]


@given(st.sampled_from(BACKEND_OPTIONS),
       st.sampled_from(["triton", "flashinfer", "flashkda", "native", "sycl", "fused", "FLASH_ATTN", "TRITON_ATTN"])
       | st.text(max_size=12),
       st.tuples(st.integers(0, 13), st.integers(0, 9)))
@example("--mamba-backend", "", (7, 5))
@example("--mamba-backend", "TRITON_ATTN", (0, 0))  # an attention backend's name: rightly refused here
def test_a_backend_is_accepted_or_refused_in_one_line_naming_its_option(option, value, cc):
    try:
        extras = words(option, value)
    except SettingsError as error:  # not a choice of the option: the parser's own refusal
        assert "\n" not in str(error) and option in str(error)
        return
    problem = turing_settings.settings_problem({}, extras, cc)
    if problem is not None:
        assert problem.variable == f"VLLM_EXTRA_ARGS {option}" and "\n" not in str(problem), problem
    if value in ("triton", "auto") or (value == "TRITON_ATTN" and option in BACKEND_OPTIONS[-2:]):
        assert problem is None


# --load-format and --config-format: the weights and config the server reads from the folder

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
         "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512, "num_hidden_layers": 2}


def model_check(tmp_path, *given):
    extras = words(*given)
    chosen = parse_settings({"MODEL": str(tmp_path / "model"), "HF_HOME": str(tmp_path / "hf")})
    resolved = preflight.resolve_models(chosen, None, extras).model
    return model.check_model(resolved, 4096), resolved


def test_a_load_format_whose_files_the_folder_lacks_fails_the_model_check_naming_it(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)               # safetensors only
    for load_format in ("pt", "npcache"):
        result, _ = model_check(tmp_path, "--load-format", load_format)
        assert result.status is Status.FAIL, result
        assert f"--load-format {load_format} loads" in result.message and "remove VLLM_EXTRA_ARGS --load-format" \
            in result.fix, result
    for load_format in ("auto", "hf", "safetensors", "fastsafetensors"):
        assert model_check(tmp_path, "--load-format", load_format)[0].status is Status.PASS, load_format


def test_the_mistral_layout_is_read_by_its_own_patterns(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    result, _ = model_check(tmp_path, "--load-format", "mistral")
    assert result.status is Status.FAIL and "consolidated*.safetensors" in result.message, result
    (tmp_path / "model" / "model.safetensors").rename(tmp_path / "model" / "consolidated.safetensors")
    result, resolved = model_check(tmp_path, "--load-format", "mistral")
    assert result.status is Status.PASS and resolved.found.weight_files == ("consolidated.safetensors",), result


def test_pytorch_weights_are_read_by_pt_only_as_pt_files(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    (tmp_path / "model" / "model.safetensors").unlink()
    (tmp_path / "model" / "weights.pt").write_bytes(b"PK\x03\x04" + b"\0" * 64 + b"PK\x05\x06" + b"\0" * 18)
    assert model_check(tmp_path, "--load-format", "safetensors")[0].status is Status.FAIL
    for load_format in ("pt", "auto", "npcache"):  # npcache falls back to *.pt as the default loader does
        result, resolved = model_check(tmp_path, "--load-format", load_format)
        assert resolved.found is not None and resolved.found.weight_files == ("weights.pt",), (load_format, result)


def test_dummy_weights_need_no_weight_files(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA))
    assert model_check(tmp_path)[0].status is Status.FAIL                       # no weights: refused
    result, resolved = model_check(tmp_path, "--load-format", "dummy")          # random weights: none read
    assert result.status is Status.PASS and resolved.found.weight_bytes == 0, result


@pytest.mark.parametrize("given", [("--load-format", "gguf"), ("--load-format", "bitsandbytes"),
                                   ("--load-format", "Safetensors"), ("--config-format", "json")])
def test_a_format_this_vllm_does_not_have_is_refused_naming_the_option(given):
    problem = opened_files_problem(words(*given))
    assert problem is not None and problem.variable == f"VLLM_EXTRA_ARGS {given[0]}", problem
    assert "\n" not in str(problem) and "auto is the default" in str(problem)


def test_config_format_mistral_needs_params_json_in_the_folder(tmp_path):
    write_model_dir(tmp_path / "model", LLAMA)
    result, _ = model_check(tmp_path, "--config-format", "mistral")
    assert result.status is Status.FAIL and "has no params.json" in result.message, result
    assert "remove VLLM_EXTRA_ARGS --config-format" in result.fix
    (tmp_path / "model" / "params.json").write_text("{}")
    assert model_check(tmp_path, "--config-format", "mistral")[0].status is Status.PASS
    assert model_check(tmp_path, "--config-format", "hf")[0].status is Status.PASS


@given(st.sampled_from(sorted(VLLM_033_VALUES.load_formats)) | st.text(max_size=10),
       st.sets(st.sampled_from(["model.safetensors", "consolidated.safetensors", "pytorch_model.bin", "w.pt",
                                "optimizer.pt", ".hidden.safetensors", "training_args.bin"]), max_size=4))
@example("gguf", set())
def test_any_load_format_and_folder_end_in_weights_or_one_line(load_format, present):
    try:
        kind, found = model.weight_files("/nowhere", sorted(present), load_format)
    except Problem as problem:
        assert "\n" not in str(problem) and ("/nowhere" in str(problem) or "--load-format" in str(problem))
        return
    assert found and set(found) <= present and not any(name.startswith(".") for name in found)
    assert not set(found) & set(model.NOT_WEIGHTS)


# --lora-modules: each adapter as vLLM's parser reads it, its local folder readable

def adapter(folder):
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"r": 8, "target_modules": ["q_proj"]}')
    return folder


def test_lora_adapters_the_server_can_read_are_accepted(tmp_path):
    first, second = adapter(tmp_path / "a"), adapter(tmp_path / "b")
    given = ("--enable-lora", "--lora-modules", f"sql={first}", json.dumps({"name": "b", "path": str(second),
                                                                             "base_model_name": "m"}), "hub=org/adapter")
    assert opened_files_problem(words(*given)) is None
    assert argv_files.lora_module(f"sql={first}") == argv_files.LoraModule("sql", str(first))


@pytest.mark.parametrize("word, says", [
    ("sql=/nowhere/adapter", "/nowhere/adapter does not exist"),
    ("{bad", "neither name=path nor a JSON object"),
    ('{"name": "a"}', 'needs "name" and "path"'),
    ('{"name": "a", "path": "/p", "rank": 8}', "rank not among name, path"),
    ("[1, 2]", "a list, not a JSON object"),
])
def test_a_lora_adapter_vllm_refuses_or_cannot_read_is_refused_naming_the_option(word, says):
    problem = opened_files_problem(words("--lora-modules", word))
    assert problem is not None and problem.variable == "VLLM_EXTRA_ARGS --lora-modules", problem
    assert says in str(problem) and "\n" not in str(problem), problem


def test_a_lora_folder_without_its_adapter_config_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    problem = opened_files_problem(words("--lora-modules", f"a={tmp_path / 'empty'}"))
    assert problem is not None and "adapter_config.json" in str(problem), problem


@given(st.lists(st.text(max_size=24) | st.sampled_from(["a=/", "a=b", '{"name": 1, "path": "/"}', "{}", "null"]),
                min_size=1, max_size=3))
@example(["a=b,c"])
@example(['{"name": "a", "path": "' + "[" * 3000 + '"}'])
def test_any_lora_words_end_typed_or_in_one_line_naming_the_option(given):
    try:
        extras = words("--lora-modules", *given)
    except SettingsError as error:   # the parser's own refusal (a word that reads as an option)
        assert "\n" not in str(error)
        return
    problem = opened_files_problem(extras)
    if problem is not None:
        assert problem.variable == "VLLM_EXTRA_ARGS --lora-modules" and "\n" not in str(problem), problem


# --quantization-config: judged with the method it is applied under

QUANTIZE_LINEAR = '{"linear": "fp8_per_channel_static"}'


def quantization(*given, config=None, cc=TURING):
    return turing_settings.check_quantization(config, words(*given), cc, VLLM_033_MIN.get)


def test_a_quantization_config_without_a_method_is_named_as_having_no_effect():
    result = quantization("--quantization-config", QUANTIZE_LINEAR)
    assert result.status is Status.WARN and "VLLM_EXTRA_ARGS --quantization-config has no effect" in result.message
    assert "--quantization online" in result.fix
    assert quantization("--quantization-config", "{}").status is Status.PASS


def test_a_quantization_config_is_judged_by_the_method_it_applies_under(tmp_path):
    assert quantization("--quantization", "online", "--quantization-config", QUANTIZE_LINEAR).status is Status.PASS
    refused = quantization("--quantization", "mxfp4", "--quantization-config", QUANTIZE_LINEAR)
    assert refused.status is Status.FAIL and "VLLM_EXTRA_ARGS --quantization: mxfp4 needs compute capability 8.0" \
        in refused.message, refused
    write_model_dir(tmp_path / "model", {**LLAMA, "quantization_config": {"quant_method": "awq"}})
    _, resolved = model_check(tmp_path)
    composed = quantization("--quantization-config", QUANTIZE_LINEAR, config=resolved.typed)
    assert composed.status is Status.PASS and "awq" in composed.message, composed


JSON_OPTIONS = ["--kernel-config", "--attention-config", "--structured-outputs-config", "--quantization-config",
                "--compilation-config", "--hf-overrides", "--speculative-config", "--default-chat-template-kwargs"]


@given(st.sampled_from(JSON_OPTIONS), st.text(max_size=20) | st.sampled_from(["{", "[1]", "3", "null", "[" * 5000]))
@example("--kernel-config", "{bad")
@example("--quantization-config", "[" * 5000)
def test_a_json_option_is_parsed_once_or_refused_in_one_line_naming_it(option, value):
    try:
        extras = words(option, value)
    except SettingsError as error:
        assert "\n" not in str(error) and f"argument {option}" in str(error), error
        return
    dest = option[2:].replace("-", "_")
    assert extras.get(dest) is None or isinstance(extras.get(dest), (dict, list, str, int, float, bool))


def test_training_files_alone_are_no_weights_though_pt_files_follow_as_vllm_globs_them():
    """The default loader stops at the first pattern that matches, then drops the training files."""
    with pytest.raises(Problem):
        model.weight_files("/m", ["training_args.bin", "weights.pt"], "hf")
    assert model.weight_files("/m", ["optimizer.pt", "weights.pt"], "pt") == ("pt", ["weights.pt"])
