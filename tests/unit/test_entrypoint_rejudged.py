"""Options of the extra words that change what a check decided, re-judged on their effective values
as vLLM 0.33.0 takes them (each rule cites where its source says so): kernel backends a device
cannot run, the load format and the weights it reads, the config format, the LoRA adapters,
--quantization-config, and every JSON option parsed once. The option table is made here by
argparse with these options of the kinds vLLM 0.33.0's parser gives them (the image facts' types)."""
import argparse

import pytest
from hypothesis import example, given, strategies as st

from entrypoint.argv import judge_extra
from entrypoint.checks import turing_settings
from entrypoint.settings import SettingsError
from imagefacts.shape import option_table
from tests.support.standin_vllm_parser import add_vllm_like_options, parse_dataclass, standin_optional_type


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
    return judge_extra(tuple(given), (), TABLE)


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
