"""The image facts' `vllm_values` (imagefacts/shape.py VllmValues): a facts file is used only with a
section of the right shape, generated sections end typed or as one phrase saying what is wrong, and
the re-judged options take their lists from it (none from constants in entrypoint/)."""
import argparse
import copy

from hypothesis import example, given, strategies as st

from entrypoint.argv import Extras, judge_extra
from entrypoint.argv_files import opened_files_problem
from entrypoint.checks import turing_settings
from entrypoint.image_facts import Facts, judge
from imagefacts.shape import PACKAGES, SCHEMA, VllmValues, option_table, vllm_values
from tests.support.standin_vllm_parser import add_vllm_like_options
from tests.support.vllm_033_facts import VLLM_033_VALUES, VLLM_033_VALUES_SECTION

VERSIONS = {"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"}


def facts_document(section=VLLM_033_VALUES_SECTION) -> dict:
    document = {"schema": SCHEMA, "packages": dict(VERSIONS), "torch": {}, "server_parser": {}, "parsers": {},
                "quantization": {}}
    if section is not None:
        document["vllm_values"] = copy.deepcopy(section)
    return document


def test_a_facts_file_is_used_only_with_its_value_lists():
    assert judge(facts_document(), VERSIONS) is None
    assert Facts(facts_document()).values == VLLM_033_VALUES
    assert judge(facts_document(None), VERSIONS) == "missing its vllm_values"
    broken = facts_document({**VLLM_033_VALUES_SECTION, "load_formats": "auto"})
    assert judge(broken, VERSIONS) == "holding a vllm_values.load_formats that is not a list of the right kind"
    assert set(VERSIONS) == set(PACKAGES)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@given(st.dictionaries(st.sampled_from(sorted(VLLM_033_VALUES_SECTION)), JSON, max_size=6) | JSON)
@example({**VLLM_033_VALUES_SECTION, "attention_backends": {"FLASH_ATTN": [True]}})
@example({**VLLM_033_VALUES_SECTION, "probed_capabilities": None})
def test_any_section_is_typed_or_named_in_one_phrase(section):
    found = vllm_values(section)
    if isinstance(found, str):
        assert "\n" not in found and "vllm_values" in found
        return
    assert isinstance(found, VllmValues)
    for backend in found.attention_backends:
        for cc in ((7, 5), (9, 0)):
            assert found.backend_runs(backend, cc) in (True, False, None)


def test_the_options_are_judged_by_the_lists_the_facts_hold():
    """A build whose vLLM has a load format (or Mamba backend) the facts list is accepted; without
    the lists (no facts, no vLLM) the values are left for vLLM to judge."""
    parser = add_vllm_like_options(argparse.ArgumentParser(conflict_handler="resolve"))
    parser.add_argument("--load-format", type=str)  # vLLM 0.33.0's parser takes any text here
    table = option_table(parser)
    own = VllmValues(("auto", "gguf"), ("auto", "hf"), ("triton", "mamba3"), ())
    assert opened_files_problem(judge_extra(("--load-format", "gguf"), (), table, own)) is None
    assert opened_files_problem(judge_extra(("--load-format", "gguf"), (), table, VLLM_033_VALUES)) is not None
    assert opened_files_problem(judge_extra(("--load-format", "gguf"), (), table, None)) is None
    assert turing_settings.kernel_backend_problem(Extras({"mamba_backend": "mamba3"}, lists=own), None) is None
    assert turing_settings.kernel_backend_problem(Extras({"mamba_backend": "mamba3"}, lists=VLLM_033_VALUES), None)
    assert turing_settings.kernel_backend_problem(Extras({"mamba_backend": "mamba3"}), None) is None


def test_an_attention_backend_the_facts_lack_is_asked_of_vllm_and_left_alone_without_one():
    """CUTLASS_MLA's class does not import on the build host: the facts lack it. On this host no vLLM
    answers either, so nothing refuses it (vLLM decides at start); a backend the facts hold is judged."""
    assert VLLM_033_VALUES.backend_runs("CUTLASS_MLA", (7, 5)) is None
    assert turing_settings.backend_refused(VLLM_033_VALUES, "CUTLASS_MLA", (7, 5)) is None
    assert turing_settings.backend_refused(VLLM_033_VALUES, "flash_attn", (7, 5)) == "needs 8.0 or newer"
    assert turing_settings.backend_refused(VLLM_033_VALUES, "FLASHMLA", (7, 5)) == "runs on 9.0, 10.0, 10.1, 10.3"
    assert turing_settings.backend_refused(VLLM_033_VALUES, "TRITON_ATTN", (7, 5)) is None
    assert VLLM_033_VALUES.backend_runs("FLASH_ATTN", (7, 3)) is None  # a capability not probed
