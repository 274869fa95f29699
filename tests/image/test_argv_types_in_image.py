"""Generated word lists judged in the image against vLLM's own parser: the option table this
checkout records from the image's vLLM (types, choices, const: imagefacts/value_types.py) makes the
entrypoint's parse agree with vLLM's, value for value. Every list the judge accepts, vLLM parses to
the same dests and the same typed values; every list vLLM refuses, the judge refuses (so `--seed abc`
ends in the preflight, not after the load). The words come from the recorded table: each option
with generated values of its type, its choices, or junk."""
import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tests import REPO
from tests.image.containers import run_to_end
from tests.support.option_tables import option_words

HERE = Path(__file__).parent
NOT_PARSED_HERE = {"help", "config", "version"}  # print and exit, or read a file vLLM's parser opens
JSON_SAMPLES = ['{"max_position_embeddings": 1024}', "{}", "3", "{bad", '["a"]', '{"level": 3}']


def in_image(docker_client, image, *args: str) -> object:
    code, out, err = run_to_end(
        docker_client, image, ["/probe/tests/image/argv_typed_agreement.py", *args], entrypoint="python3",
        environment={"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/probe"}, network_mode="none", timeout=900,
        volumes={str(REPO / name): {"bind": f"/probe/{name}", "mode": "ro"}
                 for name in ("imagefacts", "entrypoint", "contract", "door", "tests/image/argv_typed_agreement.py")})
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def table(docker_client, image) -> dict:
    return in_image(docker_client, image, "table")


def values(entry: dict) -> st.SearchStrategy:
    kind = str(entry.get("type") or "str").split(":")[-1]
    junk = st.sampled_from(["abc", "", "None", "1.5", "-1", "²", "8k", "1.5K", "auto"])
    if entry.get("choices"):
        return st.sampled_from([str(choice) for choice in entry["choices"]]) | junk
    if kind in ("int", "human_readable_int", "human_readable_int_or_auto"):
        return st.integers(-3, 100000).map(str) | junk
    if kind == "float":
        return st.floats(0, 64, allow_nan=False).map(lambda number: f"{number:.3g}") | junk
    if kind in ("json", "union_dict_and_str", "dataclass"):
        return st.sampled_from(JSON_SAMPLES) | junk
    return st.text("abcdefghijklmnopqrstuvwxyz0123456789/._-", min_size=1, max_size=10) | junk


def word_lists(table: dict) -> st.SearchStrategy:
    return st.lists(option_words(table, values, NOT_PARSED_HERE), min_size=1, max_size=3).map(
        lambda groups: [word for group in groups for word in group])


def generated(table: dict) -> list[list[str]]:
    """The word lists Hypothesis draws from the table under the suite's profile (derandomized, fixed
    budget), judged in one container run."""
    drawn: list[list[str]] = []

    @given(word_lists(table))
    def draw(words):
        drawn.append(words)
    draw()
    return drawn + [["--seed", "abc"], ["--seed", "7"], ["--max-model-len", "1k"], ["--hf-overrides", "{}"],
                    ["--mm-encoder-attn-backend", "FLASH_ATTN"], ["--chat-template", "None"],
                    ['--fault-tolerance-config={"level": 3}'], ["--structured-outputs-config", "{}"]]


@pytest.fixture(scope="module")
def outcomes(docker_client, image, table) -> list[dict]:
    return in_image(docker_client, image, "judge", json.dumps(generated(table)))


def test_the_table_records_types_and_choices(table):
    typed = {entry["dest"]: entry.get("type") for entry in table["options"]}
    assert typed["seed"] == "int" and typed["max_model_len"] == "human_readable_int_or_auto", typed
    assert any(entry.get("choices") for entry in table["options"])
    assert not [dest for dest, kind in typed.items() if str(kind).startswith("callable:")
                and dest in ("hf_overrides", "compilation_config", "speculative_config")], typed


def test_an_accepted_argv_parses_identically_under_vllms_parser(outcomes):
    disagreements = [outcome for outcome in outcomes if outcome["judge"] != "refused"
                     and not agrees(outcome["judge"], outcome["vllm"])]
    assert not disagreements, disagreements[:5]


def test_what_vllms_parser_refuses_the_judge_refuses(outcomes):
    missed = [outcome for outcome in outcomes if outcome["vllm"] == "refused" and outcome["judge"] != "refused"]
    assert not missed, missed[:5]


def agrees(judged: dict, parsed) -> bool:
    """Same dests; the same values where vLLM's value is plain JSON (a config object stays opaque)."""
    if parsed == "refused" or set(judged) != set(parsed):
        return False
    return all(parsed[dest] == judged[dest] or (isinstance(parsed[dest], str) and parsed[dest].startswith("<"))
               for dest in judged)


def test_the_samples_hold_both_verdicts_and_the_issues_example(outcomes):
    by_words = {" ".join(outcome["words"]): outcome for outcome in outcomes}
    assert by_words["--seed abc"]["judge"] == by_words["--seed abc"]["vllm"] == "refused"
    assert by_words["--seed 7"]["judge"] == by_words["--seed 7"]["vllm"] == {"seed": 7}
    assert by_words["--max-model-len 1k"]["judge"] == {"max_model_len": 1000}
    verdicts = {outcome["judge"] == "refused" for outcome in outcomes}
    assert verdicts == {True, False}, "the generated lists must reach both an acceptance and a refusal"
