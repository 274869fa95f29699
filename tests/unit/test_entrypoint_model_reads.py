"""Every bad model folder of tests/support/bad_model_folders.py through the preflight's real checks
on the host: each in its own process with a deadline (a read that blocks on a FIFO is caught as a
hang, not waited for), and each must end in one-line results, the expected verdict among them.
The deadline is generous: the assertion is that the case ended, not that it was fast."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bad_model_folders import BY_NAME, CASES, JUDGED
from tests import REPO

DEADLINE_S = 20
STATUSES = {"pass", "warn", "fail", "skip"}


def judged(name: str, tmp_path: Path) -> tuple[dict, str]:
    """Builds the case here (outside the deadline: some recipes import torch), judges it in a child."""
    BY_NAME[name].build(tmp_path / "model")
    command = [sys.executable, "-m", "tests.support.bad_model_folders", "judge", name, str(tmp_path / "model")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: the checks did not end within {DEADLINE_S} s (a read blocked)")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_the_corpus_is_large_and_covers_every_verdict():
    assert len(CASES) >= 45
    assert {case.status for case in CASES} <= STATUSES
    assert {"pass", "fail", "warn"} <= {case.status for case in CASES}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_a_bad_model_folder_ends_in_its_verdict_in_one_line(name, tmp_path):
    case = BY_NAME[name]
    results, _ = judged(name, tmp_path)
    assert set(results) == set(JUDGED)
    for result in results.values():  # every check that reads the folder answered in one line
        text = result["message"] + (result.get("fix") or "")
        assert "\n" not in text and "\r" not in text and "\x1b" not in text, result
    found = results[case.check]
    assert found["status"] == case.status, found
    assert case.says in found["message"], found
    if case.status in ("fail", "warn"):
        assert found.get("fix"), found  # a refusal says what to do


def test_a_refused_config_is_not_handed_to_the_checks_that_read_it(tmp_path):
    # The model check refuses the wrong-typed field; the fit, parallel, audio and quantization
    # checks get no config rather than one they would trip over.
    from entrypoint.checks.model import MODEL, resolve

    BY_NAME["architectures-object"].build(tmp_path / "m")
    resolved = resolve(MODEL, "MODEL", str(tmp_path / "m"), str(tmp_path / "hub"), True)
    assert resolved.config is None and resolved.typed is None and "architectures" in resolved.problem.message
