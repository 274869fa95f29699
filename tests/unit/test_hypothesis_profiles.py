"""The Hypothesis profiles of tests/conftest.py, as the installed Hypothesis applies them: "ci" is
derandomized without a database (Hypothesis refuses the two together), so two runs draw the same
examples; a failure the "dev" profile finds is stored, and the "replay" profile replays it, the same
way on every run, without writing."""
import hashlib
import unittest

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase
from hypothesis.errors import InvalidArgument

from tests.conftest import EXAMPLES

THRESHOLD = 1000  # the values drawn start here; the planted bug fails every one, so the first example
# Hypothesis tries (the simplest: THRESHOLD) fails, and the dev run stores it whatever its random seed


def run(profile: settings, broken: bool) -> tuple[list[int], str]:
    """(the values drawn, "failed", "passed" or "skipped") of one run of a property under `profile`
    (Hypothesis skips a test it has no example to run for). The property is defined the same way on
    every call, so its database key (a hash of its source) is the same."""
    seen: list[int] = []

    def holds_unless_broken(value):
        seen.append(value)
        assert not broken

    try:
        settings(profile)(given(st.integers(min_value=THRESHOLD))(holds_unless_broken))()
    except AssertionError:
        return seen, "failed"
    except unittest.SkipTest:
        return seen, "skipped"
    return seen, "passed"


def folder_digest(folder) -> str:
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    return hashlib.sha256(b"".join(path.read_bytes() + str(path).encode() for path in files)).hexdigest()


def test_ci_is_derandomized_with_its_fixed_budget_and_no_database():
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None and ci.max_examples == 60 and ci.deadline is None


def test_hypothesis_refuses_a_database_beside_derandomize(tmp_path):
    """Why "ci" cannot replay the stored examples: derandomize=True implies database=None."""
    with pytest.raises(InvalidArgument, match="derandomize=True implies database=None"):
        settings(derandomize=True, database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(tmp_path)))


def test_ci_draws_the_same_examples_on_every_run():
    first, outcome = run(settings.get_profile("ci"), broken=False)
    assert outcome == "passed" and len(first) >= 10
    assert run(settings.get_profile("ci"), broken=False) == (first, "passed")


def test_a_failure_dev_stores_is_replayed_read_only_and_deterministically(tmp_path):
    stored = tmp_path / "examples"
    dev = settings(settings.get_profile("dev"), database=DirectoryBasedExampleDatabase(stored), max_examples=300)
    found, outcome = run(dev, broken=True)
    assert outcome == "failed" and found[0] == THRESHOLD and stored.is_dir()  # the first example failed, and is saved
    nothing = settings(settings.get_profile("replay"), database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(
        tmp_path / "empty")))
    assert run(nothing, broken=True) == ([], "skipped")          # replay generates nothing itself

    replay = settings(settings.get_profile("replay"), database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(stored)))
    before = folder_digest(stored)
    replayed, outcome = run(replay, broken=True)
    assert outcome == "failed" and set(replayed) == {THRESHOLD}, replayed  # only the stored failure
    assert run(replay, broken=True) == (replayed, "failed")     # the same, run after run
    fixed, outcome = run(replay, broken=False)                  # once fixed, every stored example runs:
    assert outcome == "passed" and THRESHOLD in fixed           # the failure and any other it stored,
    assert run(replay, broken=False) == (fixed, "passed")       # in the same order
    assert folder_digest(stored) == before                      # and nothing was written


def test_the_committed_examples_folder_is_where_the_profiles_point():
    assert EXAMPLES.is_dir() and (EXAMPLES / "README.md").is_file()
    assert settings.get_profile("replay").database == ReadOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLES))
