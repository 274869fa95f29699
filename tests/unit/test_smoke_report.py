"""The smoke report (JSON and table), its timings, and the command line's exit codes."""
import json
import re
import subprocess
import sys

import pytest

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.command_line import base_url, main
from buildtool.smoke.expect import Reply, unsupported_input
from tests.support.openai_standin import OpenAIStandIn
from tests import REPO

FAST = ["--interval", "0.05", "--timeout", "10"]


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)   # these servers want none: the api-key row skips


def test_json_report_records_time_to_ready_and_first_token(capsys):
    with OpenAIStandIn(loading_s=0.5, first_token_delay_s=0.3) as standin:
        code = main([standin.url, *FAST, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["ready"] is True and report["readiness_error"] is None
    assert report["url"] == standin.url and report["model"] == "standin-model"
    assert report["time_to_ready_s"] >= 0.5
    first = report["first_token"]
    assert first["check"] == "stream"
    assert 0.3 <= first["time_to_first_token_s"] <= first["total_s"]
    assert report["counts"] == {"pass": len(CHECKS), "fail": 0, "not judged": 0, "skip": 2}
    assert [c["name"] for c in report["checks"]] == [c.name for c in CHECKS] + ["spec-decode", "kv-cache"]
    assert set(report["checks"][0]) == {"name", "status", "message", "fix", "proves", "answer",
                                        "http_status", "elapsed_s", "first_token_s"}


def test_table_lists_every_check_and_the_verdict(capsys):
    with OpenAIStandIn(broken={"fact-gold"}, modalities=("image",)) as standin:
        code = main([standin.url, *FAST])
    table = capsys.readouterr().out
    assert code == 1
    for check in CHECKS:
        assert check.name in table
    assert re.search(r"^fact-gold +FAIL ", table, re.M) and re.search(r"^audio +SKIP ", table, re.M)
    assert table.rstrip().endswith(f"{len(CHECKS) - 2} passed, 1 failed, 0 not judged, 3 skipped: FAILED")


def test_a_server_that_never_gets_ready_gives_a_report_without_checks(capsys):
    with OpenAIStandIn(loading_s=60) as standin:
        code = main([standin.url, "--interval", "0.05", "--timeout", "0.3", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["ready"] is False and report["time_to_ready_s"] is None
    assert report["checks"] == [] and "not ready after" in report["readiness_error"]


@pytest.mark.parametrize("args, message", [
    (["ftp://host"], "is not an http(s) URL"),
    (["--only", "nonsense"], "--only names unknown check(s) ['nonsense']"),
    (["--modalities", "image,video"], "--modalities names ['video']"),
    (["--timeout", "0"], "must be positive seconds"),
    (["--request-timeout", "nan"], "must be positive seconds, at most 604800"),   # a traceback from the timer once
    (["--timeout", "inf"], "must be positive seconds, at most 604800"),
    (["--api-key-file", "/nonexistent/key"], "--api-key-file /nonexistent/key: no such file"),
    (["--api-key-file", "/dev/null"], "--api-key-file /dev/null is a character device, not a regular file"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    run = subprocess.run([sys.executable, "-m", "buildtool.smoke", *args], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and message in run.stderr and "Traceback" not in run.stderr


def test_module_entry_point_runs_against_a_server():
    with OpenAIStandIn() as standin:
        run = subprocess.run([sys.executable, "-m", "buildtool.smoke", standin.url + "/v1/", *FAST,
                              "--only", "arithmetic"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^arithmetic +PASS ", run.stdout, re.M)


def test_base_url_accepts_the_v1_form():
    assert base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert base_url("https://gpu-box/llm/v1") == "https://gpu-box/llm"


@pytest.mark.parametrize("status, message, skipped", [
    (400, "At most 0 image(s) may be provided in one prompt.", True),
    (400, "At most 0 audio(s) may be provided in one prompt. Set `--limit-mm-per-prompt` to increase", True),
    (500, "Please install vllm[audio] for audio support", True),
    (400, "google/gemma-3-1b-it is not a multimodal model", True),
    (400, "messages: Field required", False),
    (200, "At most 0 image(s) may be provided in one prompt.", False),
])
def test_unsupported_input_is_recognised_only_from_vllms_refusals(status, message, skipped):
    reply = Reply(status, {"error": {"message": message, "type": "BadRequestError", "code": status}})
    assert (unsupported_input(reply) is not None) is skipped
