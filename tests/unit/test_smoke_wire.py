"""`build.py smoke` names the cause of a failed endpoint in one line, against real sockets: DNS,
a refused port and TLS end the wait at once (or after the short connect grace), not after the
readiness timeout; 401/403 name the API key; the key itself is never printed."""
import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import hostile_server as hostile, wire_failures
from tests.support.hostile_server import HostileServer
from tests.support.openai_standin import OpenAIStandIn, StandInResponse, chat_chunk
from tests.support.slack import SCHEDULING_SLACK_S
from buildtool.endpoint import replies
from tests import REPO

KEY = "sk-wire-test-9f3a51"


def smoke(url, *args, env=None):
    """The command line as a user runs it, its readiness timeout left at the default 600 s: a
    cause that waited it out would hit this call's own timeout instead of answering."""
    environ = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, str(REPO / "build.py"), "smoke", url, "--json", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**environ, **(env or {})})
    return proc, json.loads(proc.stdout)


def one_line(proc, report) -> str:
    assert proc.returncode == 1 and report["ok"] is False and report["checks"] == []
    error = report["readiness_error"]
    assert "\n" not in error and "Traceback" not in proc.stderr
    return error


def test_an_unresolvable_name_is_named_as_dns_at_the_first_poll():
    proc, report = smoke(wire_failures.UNRESOLVABLE_URL)
    error = one_line(proc, report)
    assert error.startswith("cannot resolve the host name 'nonexistent.invalid' (DNS)"), error
    assert "check the host in the URL" in error


def test_a_refused_port_is_named_after_the_short_connect_grace():
    url = wire_failures.refused_url()
    proc, report = smoke(url)
    error = one_line(proc, report)
    assert error.startswith(f"connection refused: nothing listens on {url} after"), error
    assert "--connect-grace" in error


def test_a_self_signed_certificate_is_named_as_tls(tmp_path):
    with wire_failures.tls_server(tmp_path) as url:
        proc, report = smoke(url)
    error = one_line(proc, report)
    assert error.startswith(f"TLS with {url.removeprefix('https://')} failed (certificate verify failed)"), error
    assert "REQUESTS_CA_BUNDLE" in error


def test_plain_http_behind_an_https_url_is_named_as_tls():
    with wire_failures.status_server(200) as url:
        proc, report = smoke(url.replace("http://", "https://"))
    error = one_line(proc, report)
    assert error.startswith("TLS with") and "use an http:// URL" in error, error


@pytest.mark.parametrize("status", [401, 403])
def test_a_proxy_answering_401_or_403_on_health_names_the_key(status):
    with wire_failures.status_server(status) as url:
        proc, report = smoke(url)
    error = one_line(proc, report)
    assert error == (f"{url}/health answered HTTP {status}: the server wants an API key; "
                     "set $OPENAI_API_KEY or pass --api-key-file PATH"), error


def test_a_keyed_server_without_the_key_stops_after_readiness_in_one_line():
    with OpenAIStandIn(api_key=KEY) as standin:
        proc, report = smoke(standin.url)
        table = subprocess.run([sys.executable, str(REPO / "build.py"), "smoke", standin.url], cwd=REPO,
                               capture_output=True, text=True, timeout=120)
    error = one_line(proc, report)
    assert error == (f"{standin.url}/v1/models answered HTTP 401: the server wants an API key; "
                     "set $OPENAI_API_KEY or pass --api-key-file PATH")
    assert f"STOPPED: {error}" in table.stdout and table.returncode == 1


def test_a_wrong_key_is_named_as_refused(tmp_path):
    wrong = tmp_path / "key"
    wrong.write_text("sk-not-the-servers\n")
    with OpenAIStandIn(api_key=KEY) as standin:
        proc, report = smoke(standin.url, "--api-key-file", wrong)
    assert "answered HTTP 401: the API key was refused" in one_line(proc, report)
    assert "sk-not-the-servers" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("how", ["env", "file"])
def test_the_key_is_sent_the_api_key_row_passes_and_the_key_is_never_printed(tmp_path, how):
    key_file = tmp_path / "api-key"
    key_file.write_text(KEY + "\n")
    args, env = (["--api-key-file", str(key_file)], None) if how == "file" else ([], {"OPENAI_API_KEY": KEY})
    with OpenAIStandIn(api_key=KEY) as standin:
        proc, report = smoke(standin.url, *args, env=env)
        table = subprocess.run([sys.executable, str(REPO / "build.py"), "smoke", standin.url, *args], cwd=REPO,
                               capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
        received = "\n".join(filter(None, standin.authorizations))
    assert proc.returncode == 0 and report["ok"], report
    row = {c["name"]: c for c in report["checks"]}["api-key"]
    assert row["status"] == "pass" and row["message"] == "HTTP 401 without the key, 200 with it"
    # the search finds the key where it went (the headers the stand-in received), so its absence
    # from everything the command printed means it was not printed
    assert f"Bearer {KEY}" in received and None in standin.authorizations   # the row's keyless request
    for text in (proc.stdout, proc.stderr, table.stdout, table.stderr):
        assert KEY not in text
    assert "api-key" in table.stdout


def test_without_a_key_the_api_key_row_is_skipped_naming_how_to_give_one():
    with OpenAIStandIn() as standin:
        proc, report = smoke(standin.url, "--only", "api-key")
    assert proc.returncode == 0
    [row] = report["checks"]
    assert row["status"] == "skip" and "OPENAI_API_KEY" in row["message"] and "--api-key-file" in row["message"]


def timed_smoke(url, *args):
    started = time.monotonic()
    proc, report = smoke(url, *args)
    return proc, report, time.monotonic() - started


def test_a_server_trickling_a_byte_a_second_ends_the_wait_at_its_timeout():
    with HostileServer(hostile.trickle(hostile.answer(b""), every_s=1.0)) as server:
        proc, report, elapsed = timed_smoke(server.url, "--timeout", "5")
    error = one_line(proc, report)
    assert error.startswith("not ready after 5 s (last answer: no complete answer within 5 s)"), error
    assert elapsed < 5 + SCHEDULING_SLACK_S    # the trickle lasts 89 s


def test_a_stream_that_never_ends_fails_its_row_at_the_request_timeout():
    with OpenAIStandIn() as standin:
        endless = StandInResponse(200, events=itertools.repeat(chat_chunk(standin.model, {"content": "1 "})))
        standin.route("POST", "/v1/chat/completions", lambda body: endless)
        proc, report, elapsed = timed_smoke(standin.url, "--only", "stream", "--request-timeout", "2")
    [row] = report["checks"]
    assert proc.returncode == 1 and row["status"] == "fail" and elapsed < 2 + SCHEDULING_SLACK_S
    assert row["message"] == "no complete reply within 2 s" and "--request-timeout" in row["fix"]


@pytest.mark.parametrize("models, line", [
    ({"data": 5}, "GET /v1/models: 'data' is a number, expected a list of models"),
    ({"data": [{"id": 7}]}, "GET /v1/models: data[0].id is a number, expected the model's name (a string)"),
])
def test_a_model_list_of_the_wrong_shape_stops_the_run_in_one_line(models, line):
    with OpenAIStandIn() as standin:
        standin.route("GET", "/v1/models", lambda body: StandInResponse(200, models))
        proc, report = smoke(standin.url)
    assert one_line(proc, report) == line


def test_an_empty_model_list_fails_the_models_row_with_the_fix():
    with OpenAIStandIn(broken={"models"}) as standin:
        proc, report = smoke(standin.url, "--only", "models")
    [row] = report["checks"]
    assert proc.returncode == 1 and row["status"] == "fail"
    assert row["message"] == f"GET /v1/models: the server lists no model; {replies.NO_MODEL_FIX}"
