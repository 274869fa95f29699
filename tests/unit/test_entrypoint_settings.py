"""Settings from the environment: every invalid value exits 2 naming its variable, before anything starts."""
import json

import pytest

from entrypoint.settings import SettingsError, parse_settings, resolve_dtype, validate_for_device

from tests.support.entrypoint_cli import run_entrypoint
from tooling.standins.standin_driver import build_standin_driver

VALID = {"MODEL": "/models/gemma-4-E2B-it-qat"}

INVALID = [
    ("MODEL", ""),
    ("MAX_MODEL_LEN", "16k"),
    ("MAX_MODEL_LEN", "0"),
    ("MAX_NUM_SEQS", "-3"),
    ("MAX_NUM_SEQS", "8.5"),
    ("GPU_MEMORY_UTILIZATION", "0"),
    ("GPU_MEMORY_UTILIZATION", "1.2"),
    ("GPU_MEMORY_UTILIZATION", "ninety"),
    ("PORT", "80000"),
    ("PORT", "http"),
    ("DTYPE", "fp16"),
    ("KV_CACHE_DTYPE", "int3"),
    ("ENFORCE_EAGER", "maybe"),
    ("SPECULATIVE_CONFIG", "{model: x}"),
    ("SPECULATIVE_CONFIG", "[1, 2]"),
    ("VLLM_EXTRA_ARGS", "--chat-template 'unclosed"),
    ("SKIP_CHECKS", "devices,gpu"),
    ("HF_HOME", "relative/cache"),
    ("TRITON_CACHE_DIR", "cache/triton"),
    ("VLLM_CACHE_ROOT", "~/vllm"),
]



@pytest.mark.parametrize("variable,value", INVALID)
def test_invalid_setting_is_refused_naming_the_variable(variable, value):
    with pytest.raises(SettingsError) as caught:
        parse_settings({**VALID, variable: value})
    assert caught.value.variable == variable
    assert str(caught.value).startswith(f"{variable}=")


@pytest.mark.parametrize("variable,value", INVALID[:6])
def test_cli_exits_2_on_a_bad_setting_in_every_mode(variable, value):
    for mode in (["check"], ["print-command"], []):
        done = run_entrypoint({**VALID, variable: value}, *mode)
        assert done.returncode == 2, (mode, done.stdout, done.stderr)
        assert variable in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "preflight" not in done.stdout  # nothing ran


def test_json_mode_reports_the_bad_variable():
    done = run_entrypoint({**VALID, "MAX_NUM_SEQS": "many"}, "check", "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["variable"] == "MAX_NUM_SEQS"


def test_usage_error_exits_2():
    done = run_entrypoint(VALID, "check", "--verbose")
    assert done.returncode == 2 and "usage" in done.stderr


def test_empty_variables_count_as_unset():
    settings = parse_settings({**VALID, "MAX_MODEL_LEN": "", "DTYPE": "", "SKIP_CHECKS": " "})
    assert settings.max_model_len is None and settings.dtype == "auto" and settings.skip_checks == ()


@pytest.mark.parametrize("value, found", [
    ("0", "0"), ("-1", "-1"), ("2.5", "2.5"), ("4.0", "4.0"), ('"4"', '"4"'), ("true", "true"), ("129", "129"),
    ("1e9", "1000000000.0"), ("100000000000000000000", "100000000000000000000"), ("[4]", "a list"),
])
def test_speculative_values_are_typed(value, found):
    raw = '{"model": "/models/d", "num_speculative_tokens": %s}' % value
    with pytest.raises(SettingsError) as caught:
        parse_settings({**VALID, "SPECULATIVE_CONFIG": raw})
    message = str(caught.value)
    assert caught.value.variable == "SPECULATIVE_CONFIG" and len(message.splitlines()) == 1
    assert f'"num_speculative_tokens" as a JSON integer from 1 to 128, not {found}.' in message, message
    with pytest.raises(SettingsError) as caught:
        parse_settings({**VALID, "DRAFTER": "/models/d", "SPECULATIVE_CONFIG": '{"draft_tensor_parallel_size": 0}'})
    assert '"draft_tensor_parallel_size" as a JSON integer from 1 to 64, not 0' in str(caught.value)
    for good in ("1", "4", "128", "null"):
        config = parse_settings({**VALID, "SPECULATIVE_CONFIG": raw.replace(value, good, 1)}).speculative_config
        assert config["num_speculative_tokens"] == json.loads(good)


def test_drafter_and_speculative_config_merge_and_conflict():
    merged = parse_settings({**VALID, "DRAFTER": "/models/d", "SPECULATIVE_CONFIG": '{"num_speculative_tokens": 4}'})
    assert merged.speculative_config == {"model": "/models/d", "num_speculative_tokens": 4}
    with pytest.raises(SettingsError) as caught:
        parse_settings({**VALID, "DRAFTER": "/models/d", "SPECULATIVE_CONFIG": '{"model": "/models/other"}'})
    assert caught.value.variable == "DRAFTER"


@pytest.mark.parametrize("cc,dtype,expected", [((7, 5), "auto", "float16"), ((8, 6), "auto", "auto"),
                                               (None, "auto", "auto"), ((7, 5), "float32", "float32")])
def test_auto_dtype_is_float16_without_bf16(cc, dtype, expected):
    assert resolve_dtype(dtype, cc) == expected


@pytest.mark.parametrize("variable,value,cc", [("DTYPE", "bfloat16", (7, 5)), ("KV_CACHE_DTYPE", "fp8", (8, 6)),
                                               ("KV_CACHE_DTYPE", "fp8_e5m2", (7, 5)),
                                               ("KV_CACHE_DTYPE", "bfloat16", (7, 5))])
def test_device_cannot_run_the_setting(variable, value, cc):
    with pytest.raises(SettingsError) as caught:
        validate_for_device(parse_settings({**VALID, variable: value}), cc)
    assert caught.value.variable == variable


@pytest.mark.parametrize("variable,value,cc", [("DTYPE", "bfloat16", (8, 0)), ("KV_CACHE_DTYPE", "fp8", (8, 9)),
                                               ("DTYPE", "float16", (7, 5))])
def test_device_can_run_the_setting(variable, value, cc):
    settings = parse_settings({**VALID, variable: value})
    validate_for_device(settings, cc)
    assert getattr(settings, variable.lower()) == value
    assert resolve_dtype(settings.dtype, cc) == settings.dtype  # the device runs the dtype asked for, no cast


def test_bf16_on_a_standin_turing_device_exits_2_before_checks(tmp_path):
    libs = build_standin_driver(tmp_path / "lib", cc=(7, 5))
    done = run_entrypoint({**VALID, "DTYPE": "bfloat16"}, "check", library_path=libs)
    assert done.returncode == 2 and "DTYPE" in done.stderr and "7.5" in done.stderr
    done = run_entrypoint({**VALID, "KV_CACHE_DTYPE": "fp8"}, "print-command", library_path=libs)
    assert done.returncode == 2 and "KV_CACHE_DTYPE" in done.stderr
