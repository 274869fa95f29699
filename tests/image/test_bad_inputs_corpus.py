"""The corpus of bad inputs (tests/support/bad_inputs.py, tests/support/bad_model_folders.py)
against the built image's entrypoint, in one container of 1 GiB: no case may end in a traceback,
run past 20 s, be killed for memory, or be accepted when it must be refused. A refusal is one line
naming the setting or file; a failed check names its fix."""
import dataclasses

import pytest

from tests.image.containers import run_corpus
from tests.support import bad_inputs, bad_model_folders
from tests.support.model_files import write_model_dir

FOLDERS = "/corpus/folders"


def folder_case(case: bad_model_folders.Case) -> bad_inputs.Case:
    """A model-folder case of bad_model_folders as a corpus row: `check` here has no GPU, so it
    exits 1 (the device checks fail) and the case's own check line is judged."""
    return bad_inputs.Case(f"folder-{case.name}", "model folders", case.settings_env(f"{FOLDERS}/{case.name}"),
                           exit=1, check=case.check, status=case.status, says=(case.says,))


CASES = bad_inputs.CASES + [folder_case(case) for case in bad_model_folders.CASES]
PLANTED_KEY = bad_inputs.PLANTED_KEY


def as_json(case) -> dict:
    return {"id": case.id, "env": {"MODEL": bad_inputs.GOOD_MODEL, **case.env}, "args": list(case.args),
            "mode": case.mode}


@pytest.fixture(scope="module")
def outcomes(docker_client, image, tmp_path_factory) -> dict:
    corpus = tmp_path_factory.mktemp("corpus")
    write_model_dir(corpus / "good")
    (corpus / "key").write_text(PLANTED_KEY + "\n")
    for case in bad_model_folders.CASES:
        case.build(corpus / "folders" / case.name)
    return run_corpus(docker_client, image, corpus, [as_json(case) for case in CASES])


def check_line(stdout: str, name: str) -> str:
    return next((line for line in stdout.splitlines() if line.split()[1:2] == [name]), "")


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_each_bad_input_ends_in_one_line_naming_what_to_fix(outcomes, case):
    outcome = outcomes[case.id]
    output = outcome["stdout"] + outcome["stderr"]
    assert not outcome["timed_out"], f"{case.id} ran past 20 s"
    assert outcome["code"] not in (137, -9), f"{case.id} was killed"
    assert "Traceback" not in output, output[-3000:]
    if case.id == bad_inputs.PLANTED_ECHO:
        assert PLANTED_KEY in output  # the search of the other cases can see a key where there is one
    else:
        assert PLANTED_KEY not in output
    assert outcome["code"] == case.exit, output[-3000:]
    if case.exit == 2:
        lines = outcome["stderr"].strip().splitlines()
        assert len(lines) == 1 and outcome["stdout"] == "", output
        assert all(part in lines[0] for part in case.says), lines[0]
    elif case.check is None:
        assert all(part in outcome["stdout"] for part in case.says), outcome["stdout"]
    else:
        line = check_line(outcome["stdout"], case.check)
        assert line.startswith(case.status.upper()) and all(part in line for part in case.says), outcome["stdout"]
        if case.status in ("fail", "warn"):
            assert " -> fix: " in line


def test_the_corpus_has_a_hundred_cases_across_its_classes():
    kinds = {}
    for case in CASES:
        kinds[case.kind] = kinds.get(case.kind, 0) + 1
    assert len(CASES) >= 100 and {"settings", "argv", "parsers", "secrets", "model"} <= set(kinds), kinds
    assert len({case.id for case in CASES}) == len(CASES)
