"""The stop gate (entrypoint/stop_gate.py): once AsyncLLM.shutdown begins, a new HTTP request gets a
503 with Retry-After and `Connection: close` (vLLM answered 500 "cannot schedule new futures after
shutdown"), /metrics and non-HTTP scopes pass, and the entrypoint hands the gate to vLLM's
--middleware by an import path that resolves. Driven as ASGI, as uvicorn drives it."""
import asyncio
import importlib
import json
import types

import pytest
from hypothesis import given, strategies as st

from entrypoint import graceful_stop, stop_gate
from entrypoint.server_command import server_argv
from entrypoint.settings import parse_settings


@pytest.fixture
def stopping():
    stop_gate.STOPPING.set()
    yield
    stop_gate.STOPPING.clear()


def call(scope: dict, answer=None) -> tuple[list[dict], list[dict]]:
    """(what the gate sent, the scopes the app behind it saw); the app sends `answer`'s messages."""
    seen, sent = [], []

    async def app(scope, receive, send):
        seen.append(scope)
        for message in answer() if answer else ():
            await send(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(stop_gate.RefuseWhileStopping(app)(scope, receive, send))
    return sent, seen


def http(path: str) -> dict:
    return {"type": "http", "method": "POST", "path": path, "headers": []}


def test_before_the_stop_every_request_reaches_the_server():
    assert not stop_gate.STOPPING.is_set()
    sent, seen = call(http("/v1/chat/completions"))
    assert sent == [] and [s["path"] for s in seen] == ["/v1/chat/completions"]


def test_a_request_during_the_stop_gets_a_503_that_says_retry_elsewhere(stopping):
    sent, seen = call(http("/v1/chat/completions"))
    assert seen == []
    start, body = sent
    headers = dict(start["headers"])
    assert (start["type"], start["status"]) == ("http.response.start", 503)
    assert headers[b"retry-after"] == str(stop_gate.RETRY_AFTER_S).encode() and headers[b"connection"] == b"close"
    assert int(headers[b"content-length"]) == len(body["body"])
    error = json.loads(body["body"])["error"]
    assert error["code"] == 503 and "stopping" in error["message"]


@pytest.mark.parametrize("scope", [http("/metrics"), {"type": "lifespan"}, {"type": "websocket", "path": "/v1/realtime"}])
def test_during_the_stop_metrics_and_other_scopes_pass(stopping, scope):
    sent, seen = call(scope)
    assert sent == [] and seen == [scope]


@given(st.text(max_size=40))
def test_only_http_requests_other_than_metrics_are_gated(path):
    assert stop_gate.gated(http(path)) == (path != "/metrics")
    assert not stop_gate.gated({"type": "lifespan", "path": path})


def answered(status: int, *chunks: bytes, stop_after_start: bool = False):
    def messages():
        yield {"type": "http.response.start", "status": status, "headers": []}
        if stop_after_start:
            stop_gate.STOPPING.set()
        for i, chunk in enumerate(chunks):
            yield {"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1}
    return messages


def test_a_request_that_passed_the_gate_and_failed_inside_vllm_once_the_stop_began_gets_the_503_instead():
    def failed_after_the_stop_began():
        stop_gate.STOPPING.set()  # the stop came while the request was on its way to the engine
        yield from answered(500, b'{"error": {"message": "cannot schedule new futures after shutdown"}}')()

    try:
        sent, _ = call(http("/v1/chat/completions"), failed_after_the_stop_began)
    finally:
        stop_gate.STOPPING.clear()
    assert [m.get("status") for m in sent] == [503, None] and sent[1]["body"] == stop_gate.BODY


def test_a_500_without_a_stop_and_a_stream_the_stop_finds_running_pass_as_they_are():
    sent, _ = call(http("/v1/chat/completions"), answered(500, b"boom"))
    assert [m.get("status") for m in sent] == [500, None] and sent[1]["body"] == b"boom"
    try:
        sent, _ = call(http("/v1/chat/completions"), answered(200, b"data: 1", b"data: [DONE]", stop_after_start=True))
    finally:
        stop_gate.STOPPING.clear()
    assert [m.get("status") for m in sent] == [200, None, None] and sent[-1]["body"] == b"data: [DONE]"


def test_the_engine_clients_shutdown_closes_the_gate_before_it_stops_anything():
    seen_by_shutdown = []

    class StandinAsyncLLM:
        def shutdown(self, timeout=None):
            seen_by_shutdown.append(stop_gate.STOPPING.is_set())

    module = types.SimpleNamespace(AsyncLLM=StandinAsyncLLM, EngineDeadError=RuntimeError)
    graceful_stop.patch_async_llm(module)
    try:
        StandinAsyncLLM().shutdown(timeout=3)
        assert seen_by_shutdown == [True]
    finally:
        stop_gate.STOPPING.clear()


def test_the_server_argv_names_the_gate_by_an_import_path_that_resolves():
    argv = server_argv(parse_settings({"MODEL": "/models/m", "VLLM_EXTRA_ARGS": "--middleware my.Other"}), None)
    paths = [argv[i + 1] for i, word in enumerate(argv) if word == "--middleware"]
    assert paths == [stop_gate.MIDDLEWARE, "my.Other"]  # vLLM appends: the user's middleware stays
    module, name = stop_gate.MIDDLEWARE.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is stop_gate.RefuseWhileStopping


def raising(stop_first: bool):
    def messages():
        if stop_first:
            stop_gate.STOPPING.set()
        raise RuntimeError("cannot schedule new futures after shutdown")
        yield  # a generator: the app raises where it would have answered
    return messages


def test_an_error_raised_inside_vllm_once_the_stop_began_becomes_the_503_and_otherwise_goes_on_to_vllm():
    # vLLM turns an unexpected error into its 500 outside every middleware: the gate sees the error itself
    try:
        sent, _ = call(http("/v1/chat/completions"), raising(stop_first=True))
    finally:
        stop_gate.STOPPING.clear()
    assert [m.get("status") for m in sent] == [503, None]
    with pytest.raises(RuntimeError, match="cannot schedule"):
        call(http("/v1/chat/completions"), raising(stop_first=False))
