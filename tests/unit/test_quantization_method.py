"""--quantization against the checkpoint's quantization_config, judged as vLLM 0.33.0's
ModelConfig._verify_quantization decides it (entrypoint/checks/quant_method.py): the method after
vLLM's overrides, a mismatch refused in one line naming the flag, and the compute-capability rule
applied to the method that runs. The image tier holds the same rule to vLLM's own function
(tests/image/test_quantization_like_vllm.py)."""
import argparse

import pytest
from hypothesis import example, given, strategies as st

from contract.model_config import parse_config
from contract.verdict import Status
from entrypoint.argv import judge_extra
from entrypoint.checks import turing_settings
from door.problem import Problem, UsageError
from entrypoint.checks.quant_method import checkpoint_quantization, effective_method
from entrypoint.settings import SettingsError
from imagefacts.shape import option_table
from tests.support.standin_vllm_parser import add_vllm_like_options, standin_optional_type
from tests.support.quantization_cases import ARCHITECTURES, capabilities, flags, model_types, quantization_configs
from tests.support.vllm_033_facts import VLLM_033_MIN, VLLM_033_VALUES

TURING, AMPERE = (7, 5), (8, 0)
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
MODELOPT_FP8 = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}
MODELOPT_NVFP4 = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}


def config(quantization=None, model_type="llama", architecture="LlamaForCausalLM", **extra):
    found = {"model_type": model_type, "architectures": [architecture], "max_position_embeddings": 4096, **extra}
    if quantization is not None:
        found["quantization_config"] = quantization
    return parse_config(found)


def quantization_table() -> dict:
    parser = add_vllm_like_options(argparse.ArgumentParser(conflict_handler="resolve"))
    parser.add_argument("--quantization", "-q", type=standin_optional_type(str))
    parser.add_argument("--allow-deprecated-quantization", action=argparse.BooleanOptionalAction)
    return option_table(parser)


TABLE = quantization_table()
# what vLLM's override rules switch a method to (quant_method.OVERRIDE_RULES)
OVERRIDDEN_TO = {"auto_gptq", "auto_awq", "inc", "moe_wna16", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
                 "modelopt_mixed", "gpt_oss_mxfp4", "deepseek_v4_fp8", "humming"}


def check(config_json, *words, cc=TURING):
    extras = judge_extra(tuple(words), (), TABLE, VLLM_033_VALUES)
    return turing_settings.check_quantization(config_json, extras, cc, VLLM_033_MIN.get,
                                              turing_settings.deprecated_from(VLLM_033_VALUES.deprecated_quantization))


def effective(flag, quantization, model_type="llama", architecture="LlamaForCausalLM", cc=TURING):
    point = checkpoint_quantization({"quantization_config": quantization} if quantization is not None else {},
                                    model_type, architecture)
    return effective_method(flag, point, cc).method


# what vLLM 0.33.0 runs, from its source (each row: the flag, the checkpoint, the method)

@pytest.mark.parametrize("flag, quantization, model_type, method", [
    (None, None, "llama", None),
    ("fp8", None, "llama", "fp8"),                          # online quantization at load
    ("FP8", None, "llama", "fp8"),                          # vLLM lower-cases the flag
    (None, GPTQ, "llama", "auto_gptq"),                     # AutoGPTQConfig takes gptq over
    ("gptq_marlin", GPTQ, "llama", "auto_gptq"),
    ("marlin", GPTQ, "llama", "auto_gptq"),                 # not a method, but the override accepts it
    ("awq", AWQ, "llama", "auto_awq"),
    ("moe_wna16", GPTQ, "mixtral", "moe_wna16"),
    ("moe_wna16", AWQ, "mixtral", "moe_wna16"),             # AWQ needs 7.5 for moe_wna16: a T4 has it
    (None, {"quant_method": "auto-round"}, "llama", "inc"),
    (None, MODELOPT_FP8, "llama", "modelopt"),
    ("fp8", MODELOPT_FP8, "llama", "modelopt"),             # ModelOpt's overrides ignore the flag
    (None, MODELOPT_NVFP4, "llama", "modelopt_fp4"),
    (None, {"quant_method": "mxfp4"}, "gpt_oss", "gpt_oss_mxfp4"),
    ("mxfp4", {"quant_method": "mxfp4"}, "gpt_oss", "gpt_oss_mxfp4"),
    ("compressed-tensors", {"quant_method": "mxfp4"}, "gpt_oss", "gpt_oss_mxfp4"),  # its override ignores the flag
    (None, {"quant_method": "mxfp4"}, "llama", "mxfp4"),
    (None, {"quant_method": "fp8"}, "deepseek_v4", "deepseek_v4_fp8"),
    ("deepseek_v4_fp8", {"quant_method": "fp8"}, "llama", "deepseek_v4_fp8"),
    ("humming", {"quant_method": "fp8"}, "llama", "humming"),
    (None, {"quant_method": "Compressed_Tensors"}, "llama", "compressed-tensors"),
    (None, {"quant_method": ""}, "llama", None),
])
def test_the_method_vllm_runs(flag, quantization, model_type, method):
    assert effective(flag, quantization, model_type) == method


@pytest.mark.parametrize("flag, quantization, model_type", [
    ("fp8", GPTQ, "llama"),                  # no override takes a GPTQ checkpoint to fp8
    ("awq", GPTQ, "llama"),
    ("gptq", AWQ, "llama"),
    ("fp8", {"quant_method": ""}, "llama"),  # a quantization_config naming no method
    ("moe_wna16", {**GPTQ, "bits": 3}, "mixtral"),
    ("compressed-tensors", {"quant_method": "mxfp4"}, "llama"),
    ("humming", {"quant_method": "mxfp4"}, "gpt_oss"),  # HummingConfig refuses it for gpt-oss
])
def test_a_flag_vllm_refuses_for_the_checkpoint_is_refused(flag, quantization, model_type):
    with pytest.raises(Problem) as refused:
        effective(flag, quantization, model_type)
    assert isinstance(refused.value, UsageError) and "\n" not in str(refused.value)


def test_moe_wna16_takes_awq_only_from_7_5_as_vllm_compares_the_device():
    assert effective("moe_wna16", AWQ, "mixtral", cc=(7, 5)) == "moe_wna16"
    with pytest.raises(Problem):
        effective("moe_wna16", AWQ, "mixtral", cc=(7, 0))


def test_kimi_k3_mxfp4_packed_compressed_tensors_run_as_mxfp4():
    packed = {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}
    assert effective(None, packed, "kimi_k3", "KimiK3ForConditionalGeneration") == "mxfp4"
    assert effective(None, packed, "llama", "LlamaForCausalLM") == "compressed-tensors"


def test_the_quantization_config_is_found_where_vllm_looks():
    assert checkpoint_quantization({"compression_config": {"quant_method": "compressed_tensors"}}).method \
        == "compressed-tensors"
    assert checkpoint_quantization({"text_config": {"quantization_config": {"quant_method": "AWQ"}}}).method == "awq"
    assert checkpoint_quantization({"quantization_config": None}) is None
    with pytest.raises(Problem) as refused:
        checkpoint_quantization({"quantization_config": {"producer": {"name": "modelopt"},
                                                         "quantization": {"quant_algo": "W4A8_AWQ"}}})
    assert not isinstance(refused.value, UsageError) and "W4A8_AWQ" in str(refused.value)


# the check: the capability rule on the method that runs, a refusal naming the flag

def test_an_override_is_judged_by_the_method_that_runs_not_the_one_written():
    """--quantization fp8 on a ModelOpt FP8 checkpoint runs modelopt, which needs 8.0 (fp8 alone runs
    on 7.5 with FP8 Marlin)."""
    assert check(None, "--quantization", "fp8").status is Status.PASS
    result = check(config(MODELOPT_FP8), "--quantization", "fp8")
    assert result.status is Status.FAIL and "modelopt (what vLLM runs for fp8) needs compute capability 8.0" \
        in result.message and result.message.startswith("VLLM_EXTRA_ARGS --quantization"), result
    assert check(config(MODELOPT_FP8), "--quantization", "fp8", cc=AMPERE).status is Status.PASS


def test_a_mismatch_fails_in_one_line_naming_the_flag_and_the_checkpoints_method():
    result = check(config(GPTQ), "-q", "fp8")
    assert result.status is Status.FAIL and "\n" not in result.message, result
    assert result.message.startswith("VLLM_EXTRA_ARGS -q fp8 does not match") and "(gptq)" in result.message
    assert "remove it (vLLM then runs the checkpoint's gptq)" in result.fix


def test_an_accepted_override_passes_naming_what_runs():
    result = check(config(GPTQ), "--quantization", "gptq_marlin")
    assert result.status is Status.PASS and "auto_gptq (what vLLM runs for gptq_marlin)" in result.message, result


def test_a_deprecated_method_needs_its_flag():
    result = check(None, "--quantization", "fbgemm_fp8", cc=(9, 0))
    assert result.status is Status.FAIL and "deprecated" in result.message and \
        "--allow-deprecated-quantization" in result.fix, result
    assert check(None, "--quantization", "fbgemm_fp8", "--allow-deprecated-quantization",
                 cc=(9, 0)).status is Status.PASS


def test_an_unknown_modelopt_algorithm_fails_naming_the_config():
    result = check(config({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A8_AWQ"}}))
    assert result.status is Status.FAIL and result.message.startswith("the checkpoint's config.json"), result


# generated: any flag against any checkpoint

@given(flags, quantization_configs, model_types, capabilities)
@example("fp8", {"quant_method": "gptq"}, "llama", (7, 5))
@example("", {"quant_method": "fp8"}, "llama", (7, 5))           # an empty flag is no flag (vLLM's optional type)
@example(None, {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "llama", (7, 5))
def test_any_flag_and_checkpoint_end_in_the_method_that_runs_or_one_refusal(flag, quantization, model_type, cc):
    user = flag.lower() if flag else None
    try:
        point = checkpoint_quantization({"quantization_config": quantization} if quantization else {}, model_type,
                                        ARCHITECTURES[model_type])
        choice = effective_method(flag, point, cc)
    except Problem as refused:
        assert "\n" not in str(refused) and refused.fix
        assert not isinstance(refused, UsageError) or user is not None  # without a flag only the config itself is refused
        return
    if point is None:
        assert choice.method == user
    elif choice.method not in OVERRIDDEN_TO:  # no override: the checkpoint's method, the flag agreeing
        assert choice.method == (point.method or None) and user in (None, choice.method), choice
    else:
        assert choice.method in VLLM_033_MIN


@given(flags, quantization_configs, model_types, capabilities)
@example("fp8", {"quant_method": "modelopt", "producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}},
         "llama", (7, 5))
@example("auto_awq", {"quant_method": "auto_awq", "producer": {"name": "modelopt"},
                      "quantization": {"quant_algo": "w4a16_nvfp4"}}, "llama", (6, 1))  # found: the config's refusal
def test_the_check_judges_the_capability_of_the_method_that_runs(flag, quantization, model_type, cc):
    typed = config(quantization, model_type, ARCHITECTURES[model_type])
    words = ("--quantization", flag) if flag is not None else ()
    try:
        extras = judge_extra(words, (), TABLE, VLLM_033_VALUES)
    except SettingsError:  # a flag value that reads as an option: the parser's own refusal
        return
    result = check(typed, *words, cc=cc)
    assert "\n" not in result.message and "\n" not in result.fix
    try:
        choice = effective_method(extras.get("quantization"), turing_settings.checkpoint_of(typed), cc)
    except Problem as refused:
        assert result.status is Status.FAIL and (not isinstance(refused, UsageError) or "--quantization" in result.message), result
        return
    needed = VLLM_033_MIN.get(choice.method) if choice.method else None
    if choice.method and (needed is None or needed > cc[0] * 10 + cc[1]):
        assert result.status is Status.FAIL, result
    elif choice.method not in VLLM_033_VALUES.deprecated_quantization:
        assert result.status is Status.PASS, result
