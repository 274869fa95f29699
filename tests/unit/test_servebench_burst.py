"""`bench/serve_sweep depth` against STAND-IN streaming servers over real local HTTP: a stream delivered
in one burst (every SSE event in one write, as a server that coalesced its output) is reported as
"not measured", never as a fast decode; the server's own time-per-output-token histogram is used
when /metrics has it; a paced stream is timed by the client. Plus the wire's causes, in one line."""
import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from tooling.servebench import client as bench_client
from tests.support import hostile_server as hostile, wire_failures
from tests.support.hostile_server import HostileServer
from tests.support.openai_standin import StandInResponse
from tests.support.openai_standin_streaming import StreamingCompletionsStandIn
from tests.support.slack import SCHEDULING_SLACK_S
from buildtool.endpoint import replies
from tests import REPO

DECODE = 32
INTERVAL_S = 0.02


def depth(url, out, *extra, env=None):
    environ = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), "depth", "--base-url", url, "--out",
                           str(out), "--depths", "40", "--decode-tokens", str(DECODE), "--ready-timeout", "600",
                           *extra], capture_output=True, text=True, timeout=120, env={**environ, **(env or {})})
    data = json.loads((out / "depth.json").read_text()) if (out / "depth.json").exists() else None
    return proc, data


def test_a_burst_delivered_stream_is_not_reported_as_fast_decode(tmp_path):
    with StreamingCompletionsStandIn(burst=True, token_interval_s=INTERVAL_S) as standin:
        proc, data = depth(standin.url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    [row] = data["depths"]
    # the burst arrived: every token, in as many events, none spaced like a decode step
    assert (row["prompt_tokens"], row["completion_tokens"], row["events"]) == (40, DECODE, DECODE)
    assert row["spaced"] == 0
    assert row["decode_tok_s"] is None and row["client_decode_tok_s"] is None
    assert row["decode_source"] == "not measured"
    assert "| 40 | 40 |" in proc.stdout and "| not measured |" in proc.stdout


def test_the_servers_own_tpot_is_the_decode_rate_whatever_the_delivery(tmp_path):
    with StreamingCompletionsStandIn(burst=True, token_interval_s=INTERVAL_S, server_tpot_s=0.025) as standin:
        proc, data = depth(standin.url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    [row] = data["depths"]
    assert row["server_tpot_s"] == pytest.approx(0.025) and row["decode_tok_s"] == pytest.approx(40.0)
    assert row["decode_source"] == "server" and "40.0 (server)" in proc.stdout


def test_a_paced_stream_is_timed_by_the_client(tmp_path):
    with StreamingCompletionsStandIn(token_interval_s=INTERVAL_S) as standin:
        proc, data = depth(standin.url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    [row] = data["depths"]
    assert row["decode_source"] == "client" and row["spaced"] * 2 >= DECODE - 1
    # the stand-in sleeps INTERVAL_S between tokens: no reading can make it faster than that
    assert 0 < row["decode_tok_s"] <= 1 / INTERVAL_S * 1.001


def one_line(proc) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def test_an_unresolvable_name_fails_at_once_naming_dns(tmp_path):
    err = one_line(depth(wire_failures.UNRESOLVABLE_URL, tmp_path)[0])
    assert "cannot resolve the host name 'nonexistent.invalid' (DNS)" in err


def test_a_refused_port_fails_after_the_short_grace(tmp_path):
    url = wire_failures.refused_url()
    err = one_line(depth(url, tmp_path)[0])
    assert f"connection refused: nothing listens on {url.removeprefix('http://')}" in err


def test_a_self_signed_certificate_fails_naming_tls(tmp_path):
    with wire_failures.tls_server(tmp_path) as url:
        err = one_line(depth(url, tmp_path / "out")[0])
    assert "failed (certificate verify failed)" in err and "REQUESTS_CA_BUNDLE" in err


def test_401_names_the_key_and_a_given_key_is_sent_and_never_printed(tmp_path):
    with wire_failures.status_server(401) as url:
        err = one_line(depth(url, tmp_path)[0])
    assert "answered HTTP 401: the server wants an API key; set $OPENAI_API_KEY or pass --api-key-file" in err
    key_file = tmp_path / "key"
    key_file.write_text("sk-bench-1234\n")
    with StreamingCompletionsStandIn(api_key="sk-bench-1234") as standin:
        proc, data = depth(standin.url, tmp_path / "keyed", "--api-key-file", key_file)
        received = set(standin.authorizations)
    assert proc.returncode == 0, proc.stderr
    assert received == {"Bearer sk-bench-1234"}
    assert "sk-bench-1234" not in proc.stdout + proc.stderr + (tmp_path / "keyed" / "depth.md").read_text()
    with StreamingCompletionsStandIn(api_key="sk-other") as standin:
        err = one_line(depth(standin.url, tmp_path / "wrong", "--api-key-file", key_file)[0])
    assert "answered HTTP 401: the API key was refused" in err


def test_a_server_still_loading_is_not_ready_after_the_timeout(tmp_path):
    with wire_failures.status_server(503) as url:
        err = one_line(depth(url, tmp_path, "--ready-timeout", "0.5")[0])
    assert "not ready after 0.5 s (last answer: HTTP 503 (the engine is loading))" in err


def test_the_bench_containers_get_the_key_by_name_only(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("sk-bench-argv-77\n")
    environ = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), "run", "--out", str(tmp_path / "s"),
                           "--dry-run", "--concurrency", "1", "--input-len", "16", "--api-key-file", str(key_file)],
                          capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert "-e OPENAI_API_KEY " in proc.stdout            # the docker client passes the value from its env
    assert "sk-bench-argv-77" not in proc.stdout + proc.stderr


def test_a_server_trickling_a_byte_a_second_ends_the_wait_at_the_ready_timeout(tmp_path):
    with HostileServer(hostile.trickle(hostile.ok_json({"data": []}), every_s=1.0)) as server:
        started = time.monotonic()
        proc, _ = depth(server.url, tmp_path, "--ready-timeout", "5")
        elapsed = time.monotonic() - started
    err = one_line(proc)
    assert err.startswith("bench/serve_sweep: GET /v1/models: not ready after 5 s "
                          "(last answer: no complete answer within 5 s)"), err
    assert elapsed < 5 + SCHEDULING_SLACK_S    # the trickle lasts 102 s


@pytest.mark.parametrize("models, line", [
    ({"data": 5}, "GET /v1/models: 'data' is a number, expected a list of models"),
    ({"data": []}, f"GET /v1/models: the server lists no model; {replies.NO_MODEL_FIX}"),
])
def test_a_model_list_of_the_wrong_shape_or_none_is_one_line(tmp_path, models, line):
    with HostileServer(hostile.once(hostile.ok_json(models))) as server:
        err = one_line(depth(server.url, tmp_path)[0])
    assert err == f"bench/serve_sweep: {line}\n"


def test_a_probe_stream_that_never_ends_fails_at_its_deadline():
    with StreamingCompletionsStandIn() as standin:
        endless = StandInResponse(200, events=itertools.repeat({"choices": [{"text": " w"}]}))
        standin.route("POST", "/v1/completions", lambda body: endless)
        started = time.monotonic()
        timing = bench_client.stream_completion(standin.url, standin.model, "a b", 4, "salt", deadline_s=1.5)
    assert time.monotonic() - started < 1.5 + SCHEDULING_SLACK_S
    assert timing.error == f"{standin.url}: POST /v1/completions: no complete answer within 1.5 s"
