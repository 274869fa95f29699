"""Requests sized to the served context: lowered to fit, or reported not runnable (never failed)."""
import json

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.command_line import main
from buildtool.smoke.sizing import estimated_prompt_tokens, size_request
from tests.support.openai_standin import OpenAIStandIn, prompt_tokens

FAST = ["--interval", "0.05", "--timeout", "10", "--json"]


def smoke(capsys, url, *args):
    code = main([url, *FAST, *args])
    return code, json.loads(capsys.readouterr().out)


def by_name(report):
    return {check["name"]: check for check in report["checks"]}


def test_size_request_keeps_lowers_or_refuses():
    assert size_request(1024, 64, None, None).max_tokens == 1024          # context unknown
    assert size_request(64, 8, 8192, 30).max_tokens == 64
    lowered = size_request(1024, 64, 256, 30)
    assert lowered.max_tokens == 226 and "lowered to 226" in lowered.note and "max_model_len=256" in lowered.note
    refused = size_request(1024, 64, 256, 220)
    assert refused.max_tokens is None
    assert refused.note.startswith("not runnable: max_model_len=256 leaves 36 tokens after the 220-token prompt")


def test_a_small_context_lowers_max_tokens_so_the_reasoning_check_runs(capsys):
    with OpenAIStandIn(max_model_len=256) as standin:
        code, report = smoke(capsys, standin.url, "--only", "reasoning")
        sent = [body for _, path, body in standin.requests if path == "/v1/chat/completions"]
    assert code == 0
    reasoning = by_name(report)["reasoning"]
    assert reasoning["status"] == "pass" and reasoning["http_status"] == 200
    assert sent[0]["max_tokens"] + prompt_tokens(sent[0]) == 256
    assert "max_tokens 1024 lowered to" in reasoning["message"]


def test_the_unsized_request_is_what_the_server_refuses():
    """The control: the check's own max_tokens at this context is a 400, so the sizing matters."""
    standin = OpenAIStandIn(max_model_len=256)
    body = next(c for c in CHECKS if c.name == "reasoning").request_body("standin-model")
    reply = standin.handle("POST", "/v1/chat/completions", body)
    assert reply.status == 400 and "cannot be greater than max_model_len=256" in reply.json["error"]["message"]


def test_checks_that_cannot_fit_are_not_runnable_not_failed(capsys):
    with OpenAIStandIn(max_model_len=60) as standin:
        code, report = smoke(capsys, standin.url)
        sent = [body for _, path, body in standin.requests if path == "/v1/chat/completions"]
    rows = by_name(report)
    assert code == 0 and report["ok"]
    for name in ("reasoning", "image", "audio", "tool-calls"):
        assert rows[name]["status"] == "skip", rows[name]
        assert rows[name]["message"].startswith("not runnable: max_model_len=60")
        assert "MAX_MODEL_LEN" in rows[name]["fix"]
    assert rows["arithmetic"]["status"] == "pass"
    assert all(body["max_tokens"] + prompt_tokens(body) <= 60 for body in sent)


def test_without_tokenize_an_upper_bound_estimate_sizes_the_request(capsys):
    with OpenAIStandIn(max_model_len=256) as standin:
        del standin.routes[("POST", "/tokenize")]
        code, report = smoke(capsys, standin.url, "--only", "reasoning")
        sent = [body for _, path, body in standin.requests if path == "/v1/chat/completions"]
    assert code == 0 and by_name(report)["reasoning"]["status"] == "pass"
    assert sent[0]["max_tokens"] == 256 - estimated_prompt_tokens(sent[0])
    assert estimated_prompt_tokens(sent[0]) >= prompt_tokens(sent[0])
