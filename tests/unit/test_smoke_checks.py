"""Each smoke check passing and failing against the OpenAI stand-in server."""
import json

import pytest

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.command_line import main
from tests.support.openai_standin import OpenAIStandIn
from tests import REPO

NAMES = [check.name for check in CHECKS]
# /metrics rows after the requests: the stand-in serves vLLM's text with no drafter configured
METRIC_OUTCOMES = {"spec-decode": "skip", "kv-cache": "pass"}
FAST = ["--interval", "0.05", "--timeout", "10", "--json"]
KEY = "sk-standin-key-7c1e"   # the stand-ins of this module guard /v1 with it, as `vllm serve --api-key`


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def keyed(**kwargs) -> OpenAIStandIn:
    return OpenAIStandIn(api_key=KEY, **kwargs)


def smoke(capsys, url, *args):
    code = main([url, *FAST, *args])
    return code, json.loads(capsys.readouterr().out)


def outcomes(report):
    return {check["name"]: check["status"] for check in report["checks"]}


def test_the_checks_cover_the_contract():
    assert NAMES == ["health", "models", "api-key", "stream", "arithmetic", "fact-capital", "fact-gold",
                     "tool-calls", "reasoning", "extra-body", "text", "image", "image-contrast", "audio"]
    assert len(set(NAMES)) == len(NAMES)


def test_every_check_passes_against_a_correct_server(capsys):
    with keyed() as standin:
        code, report = smoke(capsys, standin.url)
    assert code == 0 and report["ok"]
    assert outcomes(report) == {**{name: "pass" for name in NAMES}, **METRIC_OUTCOMES}


@pytest.mark.parametrize("name", NAMES)
def test_each_check_fails_alone_on_its_broken_reply(capsys, name):
    with keyed(broken={name}) as standin:
        code, report = smoke(capsys, standin.url)
    assert code == 1 and not report["ok"]
    failed = {n for n, outcome in outcomes(report).items() if outcome == "fail"}
    assert failed == {name}
    detail = next(c["message"] for c in report["checks"] if c["name"] == name)
    assert detail and "\n" not in detail


@pytest.mark.parametrize("name, expected_detail", [
    ("arithmetic", "'381' does not match"),
    ("fact-capital", "'Sydney' does not match"),
    ("fact-gold", "'Ag' does not match"),
    ("tool-calls", "no tool_calls"),
    ("reasoning", "raw thinking delimiter '<|channel>' in message.content"),
    ("extra-body", "HTTP 400 where 200 was expected: Unrecognized request argument supplied"),
    ("models", "lists no model"),
    ("stream", "without `data: [DONE]`"),
    ("health", "HTTP 503"),
    ("api-key", "without the key: HTTP 200 where 401 was expected"),
    ("image", "'Blue.' does not match"),
])
def test_a_failure_says_what_was_found(capsys, name, expected_detail):
    with keyed(broken={name}) as standin:
        _, report = smoke(capsys, standin.url)
    detail = next(c["message"] for c in report["checks"] if c["name"] == name)
    assert expected_detail in detail


def test_media_checks_are_skipped_with_the_servers_reason_when_it_takes_no_such_input(capsys):
    with keyed(modalities=()) as standin:
        code, report = smoke(capsys, standin.url)
    assert code == 0
    skipped = {c["name"]: c["message"] for c in report["checks"] if c["status"] == "skip"}
    assert set(skipped) == {"image", "image-contrast", "audio", "spec-decode"}
    assert "At most 0 image(s) may be provided" in skipped["image"]


def test_named_modalities_skip_without_asking_and_require_what_they_name(capsys):
    with keyed(modalities=()) as standin:
        code, report = smoke(capsys, standin.url, "--modalities", "text,image")
        sent = [body for _, path, body in standin.requests if path == "/v1/chat/completions"]
    assert code == 1
    assert outcomes(report)["image"] == "fail"          # named, so a refusal is a failure
    assert outcomes(report)["audio"] == "skip"
    assert not any("input_audio" in json.dumps(body) for body in sent)


CONTRACT_ONLY = {"health", "models", "api-key"}
ANSWERED = [name for name in NAMES if name not in CONTRACT_ONLY]


def test_contract_only_reports_wrong_answers_as_not_judged_never_passed(capsys):
    # every answer wrong, as from random weights; the server's side of the contract intact
    wrong = set(ANSWERED) - {"stream", "extra-body"}
    with keyed(broken=wrong) as standin:
        code, report = smoke(capsys, standin.url, "--contract-only")
    assert code == 0 and report["ok"]
    rows = {c["name"]: c for c in report["checks"]}
    # rows that prove the contract pass on it; rows that exist to judge the answer are not judged
    contract_rows = {check.name for check in CHECKS if check.proves_contract}
    assert contract_rows == {"stream", "reasoning", "extra-body", "text", "image-contrast"}
    assert {name for name, c in rows.items() if c["status"] == "pass"} == CONTRACT_ONLY | contract_rows | {"kv-cache"}
    for name in ANSWERED:
        expected = "pass" if name in contract_rows else "not judged"
        assert rows[name]["status"] == expected and rows[name]["answer"] == "not judged"
        assert "the answer is not judged (--contract-only)" in rows[name]["message"]
    judged_out = len(ANSWERED) - len(contract_rows)
    assert report["counts"] == {"pass": 4 + len(contract_rows), "fail": 0, "not judged": judged_out, "skip": 1}


@pytest.mark.parametrize("name", ["stream", "extra-body", "health", "models", "api-key"])
def test_contract_only_still_fails_a_server_that_breaks_the_contract(capsys, name):
    with keyed(broken={name}) as standin:
        code, report = smoke(capsys, standin.url, "--contract-only")
    assert code == 1
    assert {n for n, outcome in outcomes(report).items() if outcome == "fail"} == {name}


def test_a_reply_without_the_reasoning_field_breaks_the_contract(capsys):
    with keyed() as standin:
        standin_reply = standin.chat_completions
        def without_reasoning(body):
            reply = standin_reply(body)
            reply.json["choices"][0]["message"].pop("reasoning", None)
            return reply
        standin.route("POST", "/v1/chat/completions", without_reasoning)
        code, report = smoke(capsys, standin.url, "--contract-only", "--only", "reasoning")
    assert code == 1
    assert "has no `reasoning` field" in report["checks"][0]["message"]


def test_a_wrong_model_name_fails_naming_the_served_models_without_sending(capsys):
    with keyed(model="google/gemma-4-E2B-it") as standin:
        code, report = smoke(capsys, standin.url, "--model", "gemma-4")
        sent = [path for _, path, _ in standin.requests if path != "/health"]
    assert code == 1
    rows = {c["name"]: c for c in report["checks"]}
    assert "'gemma-4' is not listed; the server lists ['google/gemma-4-E2B-it']" in rows["models"]["message"]
    for name in ANSWERED:
        assert rows[name]["status"] == "fail"
        assert "not sent: model 'gemma-4' is not served; the server serves ['google/gemma-4-E2B-it']" \
            in rows[name]["message"]
    assert sent == ["/v1/models"] * 4 + ["/metrics"]   # the cards, the models row, the api-key row twice


def test_the_named_model_must_be_listed_and_is_sent(capsys):
    with keyed(model="google/gemma-4-E4B-it") as standin:
        code, report = smoke(capsys, standin.url, "--model", "other/model", "--only", "models")
        assert code == 1
        assert "'other/model' is not listed" in report["checks"][0]["message"]
        code, report = smoke(capsys, standin.url, "--only", "arithmetic")
        sent = standin.requests[-1][2]
    assert code == 0 and report["model"] == "google/gemma-4-E4B-it"
    assert sent["model"] == "google/gemma-4-E4B-it" and sent["temperature"] == 0


def test_a_server_gone_during_the_checks_fails_them_pointing_at_the_logs(capsys):
    standin = keyed().start()
    standin.route("GET", "/v1/models", lambda body: (standin.stop(), standin.models(body))[1])
    code, report = smoke(capsys, standin.url, "--only", "models", "--only", "arithmetic")
    assert code == 1
    arithmetic = report["checks"][1]
    assert arithmetic["status"] == "fail"
    assert "the server exited" in arithmetic["message"] and "docker compose logs vllm" in arithmetic["fix"]


@pytest.mark.parametrize("model, modalities, status", [
    ("google/gemma-4-E2B-it", ("image", "audio"), "fail"),   # takes audio: the image lacks the extras
    ("google/gemma-4-31B-it", ("image",), "skip"),           # vLLM asks for the extras before the limit
])
def test_missing_audio_extras_fail_the_audio_row_only_for_a_model_that_takes_audio(capsys, model, modalities,
                                                                                  status):
    with keyed(model=model, modalities=modalities, audio_extras=False) as standin:
        code, report = smoke(capsys, standin.url, "--only", "audio")
    audio = report["checks"][0]
    assert (code, audio["status"]) == ((1 if status == "fail" else 0), status)
    assert "Please install vllm[audio]" in audio["message"]
    assert ("EXTRAS=audio" in audio["fix"]) is (status == "fail")


def test_the_docs_add_a_check_example_holds_under_contract_only(capsys, monkeypatch):
    """docs/smoke.md's example Check, as written, against a model whose answers are not judged."""
    import re as regex
    from buildtool.smoke import checks, command_line
    doc = (REPO / "docs" / "smoke.md").read_text()
    code = regex.search(r"## Adding a check.*?```python\n(.*?)```", doc, regex.S).group(1)
    (example,) = eval(code, vars(checks))
    monkeypatch.setattr(command_line, "CHECKS", checks.CHECKS + (example,))
    with keyed() as standin:     # answers "OK." to a question it does not know: a wrong answer
        code_only, report = smoke(capsys, standin.url, "--contract-only", "--only", example.name)
        judged, judged_report = smoke(capsys, standin.url, "--only", example.name)
    assert code_only == 0 and report["checks"][0]["status"] == "not judged", report["checks"]
    assert judged == 1 and judged_report["checks"][0]["status"] == "fail"


def test_modalities_text_is_named_text_in_the_skip_reason(capsys):
    with keyed() as standin:
        code, report = smoke(capsys, standin.url, "--modalities", "text", "--only", "image")
    assert code == 0
    assert report["checks"][0]["message"] == "the served model takes no image input (--modalities text)"
