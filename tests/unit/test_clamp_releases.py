"""The clamp on every real release 0.19.0-0.33.0 (files from `pip download --no-deps`)."""
import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patches import turing_clamp
from patches.turing_clamp.placement import CLAMP_FUNCTION
from tooling import clamp_cycle, vllm_releases
from tooling.clamp_cycle import launcher_of, names, run_cli
from tests import REPO

CONTRACT_KEYS = {"file", "vllm_version", "outcome", "sha256_before", "sha256_after",
                 "patch_version", "message"}


@pytest.mark.parametrize("version", vllm_releases.RELEASES)
def test_cycle_on_release(version, tmp_path):
    cycle = clamp_cycle.run_cycle(version, tmp_path)
    assert cycle.first_apply == "applied"
    assert cycle.parses
    assert cycle.check == "present"
    assert cycle.second_apply == "already" and cycle.byte_identical
    assert cycle.show_empty
    assert cycle.strip_restores


@pytest.mark.parametrize("version", vllm_releases.RELEASES)
def test_clamp_call_sits_between_last_assignment_and_first_read(version, tmp_path):
    target = clamp_cycle.copy_release(version, tmp_path)
    original = target.read_bytes()
    assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
    body = launcher_of(target.read_bytes()).body
    index = next(i for i, stmt in enumerate(body)
                 if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == CLAMP_FUNCTION
                        for n in ast.walk(stmt)))
    tiles = {"TILE_SIZE_PREFILL", "TILE_SIZE_DECODE"}
    assert tiles & names(body[index - 1], ast.Store), "the statement before the clamp assigns a tile size"
    assert not any(tiles & names(stmt, ast.Store) for stmt in body[index + 1:])
    assert not any(tiles & names(stmt, ast.Load) for stmt in body[:index]
                   if not tiles & names(stmt, ast.Store))
    # launch_num_stages is adjusted exactly where the release has that variable
    has_stages = "launch_num_stages" in names(launcher_of(original), ast.Store)
    assert ("launch_num_stages" in names(body[index], ast.Store)) == has_stages


@pytest.mark.parametrize("version", ["0.19.0", "0.33.0"])
def test_cli_json_report_and_exit_codes(version, tmp_path):
    target = clamp_cycle.copy_release(version, tmp_path)
    before = target.read_bytes()

    absent = run_cli("check", "--target", target, "--json")
    assert absent.returncode == 1 and json.loads(absent.stdout)["outcome"] == "absent"

    applied = run_cli("apply", "--target", target, "--json")
    assert applied.returncode == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert set(report) == CONTRACT_KEYS
    assert report["outcome"] == "applied"
    assert report["vllm_version"] == version
    assert report["sha256_before"] == hashlib.sha256(before).hexdigest()
    assert report["sha256_after"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert report["sha256_after"] != report["sha256_before"]
    assert isinstance(report["patch_version"], int)

    again = run_cli("apply", "--target", target, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "already"
    present = run_cli("check", "--target", target)
    assert present.returncode == 0 and present.stdout.startswith("present")
    assert run_cli("show", "--target", target).stdout == ""


def test_show_prints_the_diff_apply_makes(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    before = target.read_bytes()
    shown = run_cli("show", "--target", target)
    assert shown.returncode == 0
    assert target.read_bytes() == before, "show writes nothing"
    added = [line[1:] for line in shown.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    turing_clamp.apply(target)
    after = target.read_text()
    assert added and all(line in after for line in added)
    assert f"def {CLAMP_FUNCTION}(" in shown.stdout


def test_finds_target_through_import_system_without_importing_vllm(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    site = target.parents[4]
    (site / "vllm" / "__init__.py").write_text("raise ImportError('vllm must not be imported by the clamp')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    result = run_cli("apply", "--json", env=env)
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)  # every site by default, by name
    assert list(reports) == list(turing_clamp.SITES)
    assert Path(reports["unified"]["file"]).resolve() == target.resolve()
    assert {report["vllm_version"] for report in reports.values()} == {"0.33.0"}
    assert run_cli("check", env=env).returncode == 0


def test_no_vllm_installed_is_a_usage_error(tmp_path):
    # -I -S: no site-packages at all, so no vLLM whatever this host has installed
    result = subprocess.run([sys.executable, "-I", "-S", "-c",
                             "import sys; sys.path.insert(0, %r); from patches.turing_clamp.__main__ import main; "
                             "raise SystemExit(main(['check']))" % str(REPO)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert "vLLM is not installed" in result.stderr and "--target" in result.stderr
    assert "Traceback" not in result.stderr


def test_docs_table_is_the_one_the_cycle_produces(tmp_path):
    cycles = [clamp_cycle.run_cycle(v, tmp_path / v) for v in vllm_releases.RELEASES]
    doc = (REPO / "docs" / "clamp.md").read_text()
    assert clamp_cycle.doc_table(doc) == clamp_cycle.markdown_table(cycles), \
        "regenerate with bench/clamp_releases --write-doc docs/clamp.md"
