"""The endpoint client against a hostile local server (tests/support/hostile_server.py): every
operation ends within its deadline however the server paces its bytes, no body or stream line is
read past its cap, a field of the wrong type is refused naming the operation and the field, and the
API key is in no error or repr. Bounds on time are generous upper bounds (deadline + the scheduling
slack of tests/support/slack.py, on servers silent or trickling far longer), the deadline itself is
the lower one: a test fails only if the client waits far too long."""
import socket
import ssl
import threading
import time

import pytest

from tests.support import hostile_server as hostile, wire_failures
from tests.support.hostile_server import HostileServer
from tests.support.slack import SCHEDULING_SLACK_S as SLACK_S
from buildtool import endpoint
from buildtool.endpoint import replies
from buildtool.endpoint.client import DEADLINE, SHAPE, TOO_LARGE, EndpointClient, EndpointError

DEADLINE_S = 1.5
KEY = "sk-hostile-test-4b7d21"
CARD = {"id": "m", "object": "model", "root": "m", "max_model_len": 4096}


def timed(call):
    started = time.monotonic()
    try:
        return call(), time.monotonic() - started
    except EndpointError as exc:
        return exc, time.monotonic() - started


def get(server, path="/v1/models", deadline_s=DEADLINE_S, **kwargs):
    with EndpointClient(server.url, KEY, **kwargs) as client:
        return timed(lambda: client.get(path, deadline_s=deadline_s))


def events(server, deadline_s=DEADLINE_S, **kwargs):
    with EndpointClient(server.url, KEY, **kwargs) as client:
        def read():
            with client.stream("POST", "/v1/completions", json_body={"stream": True}, deadline_s=deadline_s) as s:
                return [event.data for event in s.events()]
        return timed(read)


def one_line(error, operation) -> str:
    assert isinstance(error, EndpointError), error
    assert error.line().startswith(f"{operation}: ") and "\n" not in error.line() and KEY not in error.line()
    assert KEY not in repr(error)
    return error.line()


@pytest.mark.parametrize("behaviour", [
    hostile.trickle(hostile.ok_json({"data": [CARD]}), every_s=0.3),                       # headers and body
    hostile.Behaviour(((0.0, hostile.head(200, {"Content-Length": 100})), (0.3, b"{")), hostile.REPEAT),  # body
    hostile.Behaviour(((0.0, hostile.head(200, {"Content-Length": 100})),), hostile.HANG),   # silent mid-body
    hostile.Behaviour((), hostile.HANG),                                                     # silent from the start
], ids=["trickled-headers", "trickled-body", "silent-body", "silent"])
def test_a_whole_answer_ends_at_its_deadline_however_the_server_paces_it(behaviour):
    with HostileServer(behaviour) as server:
        error, elapsed = get(server)
    assert DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + SLACK_S
    assert error.kind == DEADLINE
    assert one_line(error, "GET /v1/models") == f"GET /v1/models: no complete answer within {DEADLINE_S:g} s"


def test_a_stream_that_never_ends_ends_at_its_deadline():
    with HostileServer(hostile.endless_events()) as server:
        error, elapsed = events(server)
    assert DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + SLACK_S and error.kind == DEADLINE
    one_line(error, "POST /v1/completions")


def test_a_declared_2_gib_body_is_refused_before_it_is_read():
    with HostileServer(hostile.declared_huge()) as server:
        error, elapsed = get(server, path="/metrics")
    assert error.kind == TOO_LARGE and elapsed < SLACK_S
    assert one_line(error, "GET /metrics") == (f"GET /metrics: HTTP 200 with a body of {2 * hostile.GiB} bytes, "
                                               f"over the cap of {32 * 1024 * 1024} bytes")


UNTIL_CLOSE = hostile.Behaviour(((0.0, hostile.head(200, {"Connection": "close"})), (0.0, b"x" * 65536)),
                               hostile.REPEAT)


@pytest.mark.parametrize("behaviour", [hostile.unbounded_body(), UNTIL_CLOSE], ids=["chunked", "until-close"])
def test_a_body_without_a_length_is_read_only_up_to_the_cap(behaviour):
    cap = 1024 * 1024
    with HostileServer(behaviour) as server:
        error, elapsed = get(server, deadline_s=30, body_cap=cap)
    assert error.kind == TOO_LARGE and elapsed < 30
    assert one_line(error, "GET /v1/models").endswith(f"a body over the cap of {cap} bytes")


def test_a_stream_line_without_end_is_refused_at_the_line_cap():
    with HostileServer(hostile.endless_line()) as server:
        error, elapsed = events(server, deadline_s=30, line_cap=256 * 1024)
    assert error.kind == TOO_LARGE and elapsed < 30
    assert one_line(error, "POST /v1/completions").endswith(f"a stream line longer than {256 * 1024} bytes")


def test_a_whole_stream_is_capped():
    with HostileServer(hostile.endless_events(b"data: {}\n\n" * 1000, every_s=0)) as server:
        error, _ = events(server, deadline_s=30, stream_cap=1024 * 1024)
    assert error.kind == TOO_LARGE and "the stream ran past 1048576 bytes" in one_line(error, "POST /v1/completions")


def test_a_body_cut_short_is_named_as_cut():
    with HostileServer(hostile.cut_body()) as server:
        error, _ = get(server)
    assert error.kind == endpoint.DROPPED and error.status == 200
    assert one_line(error, "GET /v1/models").startswith("GET /v1/models: the connection closed after HTTP 200, "
                                                        "before the whole body")


def test_invalid_utf8_is_refused_as_text_and_as_an_event():
    with HostileServer(hostile.once(hostile.answer(b"vllm:x 1\n\xff\xfe", content_type="text/plain"))) as server:
        answer, _ = get(server, path="/metrics")
        with pytest.raises(EndpointError, match=r"^GET /metrics: HTTP 200 with a body that is not UTF-8 text"):
            answer.text()
    stream = hostile.Behaviour(((0.0, hostile.head(200, {"Transfer-Encoding": "chunked"})
                                 + hostile.chunk(b"data: \xff\n\n") + b"0\r\n\r\n"),))
    with HostileServer(stream) as server:
        error, _ = events(server)
    assert error.kind == SHAPE and one_line(error, "POST /v1/completions").endswith("not UTF-8 text")


@pytest.mark.parametrize("body, line", [
    ({"data": 5}, "GET /v1/models: 'data' is a number, expected a list of models"),
    ({"data": "m"}, "GET /v1/models: 'data' is a string, expected a list of models"),
    ({}, "GET /v1/models: 'data' is null, expected a list of models"),
    ([CARD], "GET /v1/models: the body is a list, expected a JSON object"),
    ({"data": [5]}, "GET /v1/models: data[0] is a number, expected a model card (an object)"),
    ({"data": [{"id": 7}]}, "GET /v1/models: data[0].id is a number, expected the model's name (a string)"),
    ({"data": [{**CARD, "max_model_len": "4096"}]},
     "GET /v1/models: data[0].max_model_len is a string, expected a whole number of at least 1"),
    ({"data": [{**CARD, "max_model_len": True}]},
     "GET /v1/models: data[0].max_model_len is a boolean, expected a whole number of at least 1"),
    ({"data": []}, f"GET /v1/models: the server lists no model; {replies.NO_MODEL_FIX}"),
])
def test_a_model_list_of_the_wrong_shape_is_refused_naming_the_field(body, line):
    with HostileServer(hostile.once(hostile.ok_json(body))) as server:
        answer, _ = get(server)
    with pytest.raises(EndpointError) as refused:
        replies.served_ids(replies.model_cards(answer))
    assert one_line(refused.value, "GET /v1/models") == line


def test_json_nested_past_the_parsers_recursion_is_refused_as_not_json():
    nesting = 100_000     # json.loads raises RecursionError, not ValueError, for this
    with HostileServer(hostile.once(hostile.answer(b"[" * nesting + b"]" * nesting))) as server:
        answer, _ = get(server)
    with pytest.raises(EndpointError, match=r"^GET /v1/models: HTTP 200 with a body that is not JSON"):
        answer.json()
    with pytest.raises(EndpointError, match=r"^POST /v1/completions: event 0 is not JSON"):
        replies.completion_chunk("POST /v1/completions", "[" * nesting, 0)


def test_a_well_formed_model_list_is_typed():
    with HostileServer(hostile.once(hostile.ok_json({"object": "list", "data": [CARD]}))) as server:
        answer, _ = get(server)
    assert replies.model_cards(answer) == (replies.ModelCard("m", "m", 4096),)


@pytest.mark.parametrize("data, line", [
    ('{"choices": "x"}', "POST /v1/completions: event 0: 'choices' is a string, expected a list"),
    ('[1]', "POST /v1/completions: event 0 is a list, expected a JSON object"),
    ('{"choices": [], "usage": {"prompt_tokens": -1, "completion_tokens": 2}}',
     "POST /v1/completions: event 0: usage.prompt_tokens is -1, expected a whole number of at least 0"),
    ("not json", "POST /v1/completions: event 0 is not JSON ('not json')"),
])
def test_a_completion_event_of_the_wrong_shape_is_refused_naming_the_field(data, line):
    with pytest.raises(EndpointError) as refused:
        replies.completion_chunk("POST /v1/completions", data, 0)
    assert refused.value.line() == line


def test_the_key_is_sent_but_never_shown():
    with HostileServer(hostile.once(hostile.ok_json({"error": "Unauthorized"}, status=401))) as server:
        with EndpointClient(server.url, KEY) as client:
            answer = client.get("/v1/models", deadline_s=DEADLINE_S)
            with pytest.raises(EndpointError) as refused:
                client.expect_ok(answer)
            shown = repr(client) + repr(answer) + str(refused.value) + repr(refused.value)
    assert f"authorization: bearer {KEY}".encode() in server.requests[0].lower()
    assert KEY not in shown and "the API key was refused" in str(refused.value)


def test_a_client_whose_operation_ran_out_serves_the_next_one():
    with HostileServer(hostile.Behaviour((), hostile.HANG)) as server:
        with EndpointClient(server.url) as client:
            with pytest.raises(EndpointError):
                client.get("/health", deadline_s=0.5)
            server.behaviour = hostile.once(hostile.answer(b"", status=200))
            assert client.get("/health", deadline_s=DEADLINE_S).status == 200


def test_over_tls_a_trickled_answer_ends_at_its_deadline_too(tmp_path, monkeypatch):
    """The watchdog shuts the socket under the TLS layer: a read blocked in the SSL socket ends too."""
    cert, key = wire_failures.self_signed_cert(tmp_path, alt_names="DNS:localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))     # the client trusts this server's certificate
    trickled = hostile.trickle(hostile.ok_json({"data": [CARD]}), every_s=0.3)
    with HostileServer(trickled, tls=context) as server:
        error, elapsed = get(server)
        server.behaviour = hostile.once(hostile.ok_json({"data": [CARD]}))
        answer, _ = get(server)
    assert error.kind == DEADLINE and DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + SLACK_S
    assert replies.model_cards(answer) == (replies.ModelCard("m", "m", 4096),)    # the TLS itself works


def test_a_silence_shorter_than_the_deadline_is_waited_through():
    """A long prefill is silence before the first byte: the deadline is total, never per read."""
    answer = hostile.ok_json({"data": [CARD]})
    with HostileServer(hostile.Behaviour(((1.0, answer[:20]), (1.0, answer[20:])))) as server:
        answer, elapsed = get(server, deadline_s=2 + SLACK_S + 10)
    assert elapsed >= 2 and replies.model_cards(answer) == (replies.ModelCard("m", "m", 4096),)


def test_a_compressed_body_is_refused_though_identity_was_asked():
    gzipped = hostile.answer(b"\x1f\x8b" + b"\0" * 20, **{"Content-Encoding": "gzip"})
    with HostileServer(hostile.once(gzipped)) as server:
        error, _ = get(server)
    assert b"accept-encoding: identity" in server.requests[0].lower()
    assert one_line(error, "GET /v1/models") == ("GET /v1/models: answered with Content-Encoding 'gzip', "
                                                 "though only identity was accepted")


class StandinResolver:
    """socket.getaddrinfo for the client's lookups: `hanging` names block until released (a resolver
    that never answers), `local` names resolve to 127.0.0.1, every other name as the system does."""

    def __init__(self, hanging=(), local=()):
        self.hanging, self.local = set(hanging), set(local)
        self.release = threading.Event()
        self.blocked = threading.Event()
        self._system = socket.getaddrinfo

    def __call__(self, host, port, *args, **kwargs):
        if host in self.hanging:
            self.blocked.set()
            self.release.wait()
            raise socket.gaierror(socket.EAI_AGAIN, "released by the test")
        return self._system("127.0.0.1" if host in self.local else host, port, *args, **kwargs)


def test_a_name_lookup_that_hangs_ends_at_the_deadline(monkeypatch):
    resolver = StandinResolver(hanging={"hangs.standin.invalid"})
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    try:
        with EndpointClient("http://hangs.standin.invalid:8000", KEY) as client:
            error, elapsed = timed(lambda: client.get("/v1/models", deadline_s=DEADLINE_S))
        assert resolver.blocked.is_set()  # the lookup was under way, and still is: nothing else ended it
        assert DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + SLACK_S
        line = one_line(error, "GET /v1/models")
        assert error.kind == endpoint.NO_ANSWER and "within 1.5 s" in line and "lookup (DNS) may hang" in line, line
    finally:
        resolver.release.set()


def test_a_name_that_resolves_in_time_is_connected_to_and_answers(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", StandinResolver(local={"answers.standin.invalid"}))
    with HostileServer(hostile.once(hostile.ok_json({"data": [CARD]}))) as server:
        with EndpointClient(f"http://answers.standin.invalid:{server.port}", KEY) as client:
            answer = client.get("/v1/models", deadline_s=DEADLINE_S)
    assert answer.status == 200 and answer.json() == {"data": [CARD]}


def test_a_connection_made_after_its_deadline_is_closed_not_leaked():
    from buildtool.endpoint.client import _within

    release, closed = threading.Event(), threading.Event()

    class Late:
        def close(self):
            closed.set()

    def work():
        release.wait()
        return Late()
    assert _within(work, 0.05, lambda late: late.close()) is None
    release.set()
    assert closed.wait(SLACK_S)


def test_the_serving_stacks_health_poll_ends_within_its_deadline_against_a_trickling_server():
    """bench/two_models waits for its servers through RenderedServers.healthy: an answer trickled a
    byte a second (requests' per-read timeout never fires) counts as not healthy within the poll's deadline."""
    from tooling import serving_stack

    servers = serving_stack.RenderedServers.__new__(serving_stack.RenderedServers)  # no units rendered
    with HostileServer(hostile.trickle(hostile.ok_json({"status": "ok"}), every_s=1.0)) as server:
        servers.ports = {"a": server.port}
        began = time.monotonic()
        assert servers.healthy("a") is False
        assert time.monotonic() - began < serving_stack.HEALTH_POLL_S + SLACK_S
        server.behaviour = hostile.once(hostile.ok_json({}))
        assert servers.healthy("a") is True


def test_the_serving_stacks_streamed_chat_hangs_up_on_a_stream_that_never_ends():
    from tooling import serving_stack

    record, ready = {}, threading.Event()
    with HostileServer(hostile.endless_events()) as server:
        began = time.monotonic()
        serving_stack.stream_chat(server.url, {}, record, ready, deadline_s=1.0)
        assert time.monotonic() - began < 1.0 + SLACK_S
    assert record["ended"].startswith("deadline: still streaming after 1 s") and record["lines"] and ready.is_set()
