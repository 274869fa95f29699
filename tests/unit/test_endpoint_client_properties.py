"""Generated server behaviours (status, framing, body as arbitrary JSON or bytes, pieces paced within
a small bound, then closed, held open in silence or the last piece repeated for ever) against every
operation smoke and bench run through the endpoint client. Invariants: the operation ends within its
deadline plus the scheduling slack (tests/support/slack.py: the held-open and repeated ones would
otherwise last HOLD_S, far more), and in a typed value or one EndpointError naming the operation, in
one line; never another exception. Each example can cost up to its deadline in wall time, so these
run fewer examples than the profile's budget."""
import json
import time

from hypothesis import example, given, settings, strategies as st

from tooling.servebench import client as bench_client, prom
from buildtool.smoke import metrics as smoke_metrics, runner
from buildtool.smoke.checks import CHECKS
from buildtool.smoke.inputs import Inputs
from contract.verdict import Status
from door.problem import Problem
from tests.support import hostile_server as hostile
from tests.support.hostile_server import HostileServer
from tests.support.slack import SCHEDULING_SLACK_S
from buildtool.endpoint import replies
from buildtool.endpoint.client import EndpointClient, EndpointError

DEADLINE_S = 1.0
EXAMPLES = 25

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 64, 2 ** 64) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["data", "id", "root", "max_model_len", "count", "choices", "usage", "delta", "content",
                         "reasoning", "text", "prompt_tokens", "completion_tokens", "error", "message"]),
        inner, max_size=5),
    max_leaves=12)
bodies = st.one_of(json_values.map(lambda value: json.dumps(value).encode()), st.binary(max_size=200))
event_lines = st.lists(st.one_of(json_values.map(json.dumps), st.just("[DONE]"), st.text(max_size=30)),
                       max_size=6).map(lambda items: b"".join(b"data: " + item.encode("utf-8", "replace") + b"\n\n"
                                                              for item in items))
STATUSES = [200, 200, 200, 204, 302, 400, 401, 404, 500, 503]
FRAMINGS = ["length", "short-length", "long-length", "huge-length", "chunked", "until-close", "gzip"]


def framed(status: int, framing: str, body: bytes) -> tuple[bytes, list[bytes]]:
    """The head, and the body's bytes as they go on the wire."""
    headers = {"Content-Type": "application/json"}
    if status == 302:
        headers["Location"] = "/v1/models"
    if framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
        return hostile.head(status, headers), ([hostile.chunk(body)] if body else []) + [b"0\r\n\r\n"]
    lengths = {"length": len(body), "short-length": max(len(body) - 3, 0), "long-length": len(body) + 50,
               "huge-length": 2 * hostile.GiB, "gzip": len(body)}
    if framing in lengths:
        headers["Content-Length"] = lengths[framing]
    if framing == "gzip":
        headers["Content-Encoding"] = "gzip"
    headers["Connection"] = "close"
    return hostile.head(status, headers), [body]


@st.composite
def behaviours(draw, payloads=bodies):
    status, framing, body = draw(st.sampled_from(STATUSES)), draw(st.sampled_from(FRAMINGS)), draw(payloads)
    head, wire = framed(status, framing, body)
    data = head + b"".join(wire)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    pieces = [piece for a, b in zip([0] + cuts, cuts + [len(data)]) if (piece := data[a:b])]
    delays = draw(st.lists(st.sampled_from([0.0, 0.0, 0.05, 0.3]), min_size=len(pieces), max_size=len(pieces)))
    then = draw(st.sampled_from([hostile.CLOSE, hostile.CLOSE, hostile.CLOSE, hostile.HANG, hostile.REPEAT]))
    if then == hostile.REPEAT:
        delays[-1] = max(delays[-1], 0.05)    # the repeated piece paced, not a busy loop
    return hostile.Behaviour(tuple(zip(delays, pieces)), then)


def models(client):
    return replies.served_ids(replies.model_cards(client.expect_ok(client.get("/v1/models", deadline_s=DEADLINE_S))))


def tokenize(client):
    return replies.token_count(client.expect_ok(client.post("/tokenize", {"prompt": "x"}, deadline_s=DEADLINE_S)))


def metrics(client):
    return client.expect_ok(client.get("/metrics", deadline_s=DEADLINE_S)).text()


def health(client):
    return client.get("/health", deadline_s=DEADLINE_S).status


def completion_events(client):
    with client.stream("POST", "/v1/completions", json_body={"stream": True}, deadline_s=DEADLINE_S) as stream:
        if not stream.ok:
            client.expect_ok(stream.answer())
        return [replies.completion_chunk(stream.operation, e.data, i) for i, e in enumerate(stream.events())]


def chat_events(client):
    with client.stream("POST", "/v1/chat/completions", json_body={"stream": True}, deadline_s=DEADLINE_S) as stream:
        if not stream.ok:
            client.expect_ok(stream.answer())
        return [replies.chat_chunk(stream.operation, e.data, i) for i, e in enumerate(stream.events())]


WHOLE = {"GET /v1/models": models, "POST /tokenize": tokenize, "GET /metrics": metrics, "GET /health": health}
STREAMED = {"POST /v1/completions": completion_events, "POST /v1/chat/completions": chat_events}


def ends_in_time_as_a_value_or_one_line(behaviour, operation, call):
    with HostileServer(behaviour) as server, EndpointClient(server.url, "sk-prop-key") as client:
        started = time.monotonic()
        try:
            call(client)
        except EndpointError as exc:
            assert exc.line().startswith(f"{operation}: ") and "\n" not in exc.line(), exc.line()
            assert "sk-prop-key" not in exc.line()
        assert time.monotonic() - started < DEADLINE_S + SCHEDULING_SLACK_S


@settings(max_examples=EXAMPLES)
@given(behaviours(), st.sampled_from(sorted(WHOLE)))
@example(hostile.once(hostile.ok_json({"data": 5})), "GET /v1/models")
@example(hostile.once(hostile.ok_json({"data": []})), "GET /v1/models")
@example(hostile.Behaviour(((0.0, b"HTTP/1.1 200 OK\r\nCo"), (0.05, b"ntent-Type: application/json\r\nContent-Length: 87\r\n"
                                                                b"Connection: close\r\n\r\n[[343], null, {\"prompt_tokens\": "
                                                                b"{\"reasoning\": 343, \"usage\": 158015}, \"error\": "
                                                                b"[null]}, {}]"))),
         "POST /tokenize").via("the landing CI of December 2026: 6.8 s on a loaded host, past a 3 s margin")
def test_a_whole_answer_ends_in_time_as_a_typed_value_or_one_line(behaviour, operation):
    ends_in_time_as_a_value_or_one_line(behaviour, operation, WHOLE[operation])


@settings(max_examples=EXAMPLES)
@given(behaviours(event_lines), st.sampled_from(sorted(STREAMED)))
@example(hostile.Behaviour(((0.3, hostile.head(302, {"Location": "/v1/models", "Content-Length": 0,   # followed
                                                      "Connection": "close"})),)),   # 30 times: 9 s
         "POST /v1/chat/completions")
def test_a_stream_ends_in_time_as_typed_events_or_one_line(behaviour, operation):
    ends_in_time_as_a_value_or_one_line(behaviour, operation, STREAMED[operation])


STREAM_CHECK = next(check for check in CHECKS if check.stream)
CALLER_DEADLINE_S = 0.5


@settings(max_examples=15)
@given(behaviours(event_lines | bodies))
def test_smoke_and_bench_end_in_time_with_a_row_or_one_line(behaviour):
    """The callers as they run: smoke's check of a stream (a row, whatever came back) and bench's
    wait for the model list and its streamed probe (a value, a timing with its error, or one line)."""
    with HostileServer(behaviour) as server, EndpointClient(server.url) as client:
        started = time.monotonic()
        row = runner.run_check(client, STREAM_CHECK, "m", None, CALLER_DEADLINE_S)
        assert row.status in (Status.PASS, Status.FAIL, Status.SKIP) and "\n" not in row.verdict.message
        timing = bench_client.stream_completion(server.url, "m", "a b c", 4, "salt", deadline_s=CALLER_DEADLINE_S)
        assert timing.error is None or "\n" not in timing.error
        try:
            bench_client.served_models(server.url, CALLER_DEADLINE_S, poll_s=0.2)
        except bench_client.EndpointError as exc:
            assert exc.line().startswith("GET /v1/models: ") and "\n" not in exc.line()
        assert time.monotonic() - started < 3 * CALLER_DEADLINE_S + SCHEDULING_SLACK_S


chat_like = st.fixed_dictionaries({}, optional={
    "choices": st.one_of(json_values, st.lists(st.fixed_dictionaries({}, optional={
        "finish_reason": json_values,
        "message": st.one_of(json_values, st.fixed_dictionaries({}, optional={
            "content": json_values, "reasoning": json_values, "reasoning_content": json_values,
            "tool_calls": st.one_of(json_values, st.lists(st.fixed_dictionaries({}, optional={
                "type": json_values, "function": st.one_of(json_values, st.fixed_dictionaries(
                    {}, optional={"name": json_values, "arguments": json_values}))}), max_size=2))})),
        "logprobs": st.one_of(json_values, st.fixed_dictionaries({}, optional={
            "content": st.one_of(json_values, st.lists(st.fixed_dictionaries({}, optional={
                "token": st.one_of(json_values, st.sampled_from(["token_id:0", "token_id:7"])),
                "logprob": st.one_of(json_values, st.sampled_from([float("nan"), float("-inf"), -0.5])),
                "top_logprobs": st.one_of(json_values, st.lists(st.fixed_dictionaries({}, optional={
                    "logprob": json_values}), max_size=2))}), max_size=3))}))}),
        max_size=2)),
    "error": json_values})


@given(st.sampled_from([check for check in CHECKS if not check.stream]), st.one_of(chat_like, json_values),
       st.sampled_from([200, 400, 401, 500]), st.booleans())
@example(next(c for c in CHECKS if c.name == "tool-calls"),
         {"choices": [{"message": {"content": None, "tool_calls": "call"}}]}, 200, True)
@example(next(c for c in CHECKS if c.name == "reasoning"), {"choices": [{"message": {"content": 5, "reasoning": None}}]},
         200, True)
def test_every_check_judges_any_body_as_a_row_in_one_line(check, body, status, judge_answers):
    """Smoke's judgement of a whole reply, typed: whatever JSON comes back, a row, never a traceback."""
    reply = runner.Reply(status=status, body=body, text=json.dumps(body))
    row = runner.verdict(check, reply, "m", Inputs(None, "asked", takes_audio=True), judge_answers=judge_answers)
    assert row.status in (Status.PASS, Status.FAIL, Status.SKIP, Status.NOT_JUDGED)
    assert "\n" not in row.verdict.message


METRIC_NAMES = [prom.RUNNING, prom.TPOT + "_bucket", prom.TPOT + "_count", prom.TPOT + "_sum", prom.CACHE_CONFIG,
                smoke_metrics.DRAFTS, smoke_metrics.ACCEPTED]
metric_lines = st.builds(
    lambda name, labels, value: name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                                        if labels else "") + " " + value,
    st.sampled_from(METRIC_NAMES),
    st.dictionaries(st.sampled_from(["le", "engine", "kv_cache_size_tokens", "kv_cache_max_concurrency",
                                     "num_gpu_blocks", "block_size"]), st.text(max_size=8), max_size=3),
    st.sampled_from(["1", "0", "-1", "NaN", "+Inf", "1e308", "abc", ""]))
metric_texts = st.one_of(st.text(max_size=200), st.lists(metric_lines, max_size=8).map("\n".join))


@given(metric_texts, metric_texts)
@example("", f"{prom.TPOT}_bucket 1")    # a bucket without `le`: a KeyError in bench/serve_sweep once
def test_the_metrics_readers_take_any_text_to_rows_or_one_metrics_error(before, after):
    """/metrics as smoke and bench read it: smoke's rows whatever the text; bench's figures, or
    one Problem (bench/serve_sweep turns it into one line, exit 1)."""
    for result in smoke_metrics.metric_rows(after, "", 4096, True):
        assert "\n" not in result.message
    try:
        first, last = prom.Snapshot.of(before), prom.Snapshot.of(after)
        prom.histogram_mean(last, first, prom.TPOT)
        prom.quantile(0.5, prom.bucket_delta(last, first, prom.TPOT))
        last.total(prom.RUNNING)
    except Problem as exc:
        assert "\n" not in str(exc)
