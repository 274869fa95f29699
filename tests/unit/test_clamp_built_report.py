"""The preflight's clamp check answers from the build's apply report while the launcher still holds
the bytes that report proved, and parses the file again the moment a byte differs."""
import json
from unittest import mock

from patches import turing_clamp
from patches.turing_clamp import Outcome
from patches.turing_clamp.placement import UNIFIED
from tooling import clamp_cycle


def applied(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path, UNIFIED)
    original = target.read_bytes()
    report = turing_clamp.apply(target, UNIFIED).to_dict()
    assert report["outcome"] == "applied"
    return target, original, json.loads(json.dumps(report))


def test_an_unchanged_launcher_is_answered_from_the_report_without_parsing(tmp_path):
    target, _, report = applied(tmp_path)
    with mock.patch.object(turing_clamp, "parse", side_effect=AssertionError("parsed")):
        found = turing_clamp.check(target, UNIFIED, report)
    assert found.outcome is Outcome.PRESENT and found.sha256_after == report["sha256_after"]


def test_a_reinstalled_launcher_is_parsed_and_found_without_the_clamp(tmp_path):
    target, original, report = applied(tmp_path)
    target.write_bytes(original)  # vLLM's own file back over the patched one (a pip reinstall)
    assert turing_clamp.check(target, UNIFIED, report).outcome is Outcome.ABSENT


def test_a_report_that_does_not_prove_these_bytes_is_not_trusted(tmp_path):
    target, _, report = applied(tmp_path)
    for untrusted in (dict(report, patch_version=report["patch_version"] - 1), dict(report, file=str(tmp_path / "x")),
                      dict(report, outcome="refused"), dict(report, sha256_after="0" * 64), None, "not a dict"):
        parsed = mock.Mock(wraps=turing_clamp.parse)
        with mock.patch.object(turing_clamp, "parse", parsed):
            assert turing_clamp.check(target, UNIFIED, untrusted).outcome is Outcome.PRESENT
        assert parsed.called, untrusted


def test_the_build_outcomes_map_to_what_the_check_would_find():
    sha = "a" * 64
    built = {"file": "/f.py", "sha256_after": sha, "patch_version": turing_clamp.PATCH_VERSION}
    from pathlib import Path
    assert turing_clamp.recorded_outcome(sha, Path("/f.py"), dict(built, outcome="applied")) is Outcome.PRESENT
    assert turing_clamp.recorded_outcome(sha, Path("/f.py"), dict(built, outcome="already")) is Outcome.PRESENT
    assert turing_clamp.recorded_outcome(sha, Path("/f.py"), dict(built, outcome="skipped")) is Outcome.UPSTREAM
    assert turing_clamp.recorded_outcome(None, Path("/f.py"), dict(built, outcome="applied")) is None
