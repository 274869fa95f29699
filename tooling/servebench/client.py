"""HTTP to a vLLM OpenAI server through the endpoint client (buildtool/endpoint/client.py: a total
deadline per operation, byte caps, the API key carried and never shown): /health, /v1/models,
/tokenize, /metrics and streamed completions (the side effects of the sweep, record and depth
probes). A failure is one line naming the operation and its cause (DNS, refused, TLS, 401/403, not
ready, a deadline, a cap, a field of the wrong type); DNS, TLS and 401/403 end a wait at once, a
refused port after a short grace."""
from __future__ import annotations

import threading
import time

from buildtool import endpoint
from buildtool.endpoint import replies
from buildtool.endpoint.client import DEADLINE, EndpointClient, EndpointError
from door.problem import Problem

from . import prom
from .depth import MetricPeaks, StreamTiming, spaced_gaps
from .periodic import Periodic

# A refused port while waiting for a server: a container binding its port late gets this long.
REFUSED_GRACE_S = 5.0
# Each operation's whole deadline: a scrape or a probe of the server, one /tokenize of a prompt up
# to the longest context, one streamed completion (a long prefill, then the decode).
SCRAPE_S, POLL_S, TOKENIZE_S, STREAM_S = 30.0, 10.0, 600.0, 3600.0


_key: str | None = None
_local = threading.local()


def use_key(api_key: str | None) -> None:
    """The API key every later request carries (as `Authorization: Bearer`); None: none."""
    global _key
    _key = api_key
    _local.__dict__.clear()


def client_for(base_url: str) -> EndpointClient:
    """This thread's client of base_url (the sweep's threads each keep one; the key is shared)."""
    clients = _local.__dict__.setdefault("clients", {})
    key = (base_url, _key)
    if key not in clients:
        clients[key] = EndpointClient(base_url, _key)
    return clients[key]


def post_json(base_url: str, path: str, body: dict, deadline_s: float = TOKENIZE_S):
    client = client_for(base_url)
    return client.expect_ok(client.post(path, body, deadline_s=deadline_s))


def metrics(base_url: str) -> prom.Snapshot:
    client = client_for(base_url)
    return prom.Snapshot.of(client.expect_ok(client.get("/metrics", deadline_s=SCRAPE_S)).text())


def wait_for(base_url: str, path: str, timeout_s: float, poll_s: float, read=lambda answer: answer) -> tuple[object, float]:
    """(read(answer), seconds) once GET path answers 200 and read() accepts it, polling while the
    server loads (503, a dropped connection, a refused port within REFUSED_GRACE_S), each poll
    within what is left of timeout_s. DNS, TLS, 401/403, 404 and an answer of the wrong shape
    fail at once, each in one line."""
    client = client_for(base_url)
    start = time.monotonic()
    last = "no answer"
    while True:
        elapsed = time.monotonic() - start
        try:
            answer = client.get(path, deadline_s=max(min(POLL_S, timeout_s - elapsed), 0.5))
        except EndpointError as exc:
            if exc.final or exc.kind not in (endpoint.REFUSED, endpoint.DROPPED, endpoint.NO_ANSWER, DEADLINE) or (
                    exc.kind == endpoint.REFUSED and elapsed >= min(REFUSED_GRACE_S, timeout_s)):
                raise
            last = exc.message
        else:
            if answer.status in (401, 403, 404):
                client.expect_ok(answer)
            if answer.status == 200:
                return read(answer), time.monotonic() - start
            last = f"HTTP {answer.status}" + (" (the engine is loading)" if answer.status == 503 else "")
        elapsed = time.monotonic() - start
        if elapsed >= timeout_s:
            raise EndpointError(f"GET {path}", f"not ready after {timeout_s:g} s (last answer: {last})",
                            "look at the server's log, or raise --ready-timeout", kind=DEADLINE)
        time.sleep(min(poll_s, max(timeout_s - elapsed, 0)))


def wait_healthy(base_url: str, timeout_s: float, poll_s: float = 1.0) -> float:
    """Seconds until GET /health answers 200 (vLLM answers 503 while the engine loads)."""
    return wait_for(base_url, "/health", timeout_s, poll_s)[1]


def served_models(base_url: str, timeout_s: float, poll_s: float = 2.0) -> list[str]:
    """Model ids from GET /v1/models, waiting up to timeout_s while the server loads."""
    ids, _ = wait_for(base_url, "/v1/models", timeout_s, poll_s,
                      lambda answer: replies.served_ids(replies.model_cards(answer)))
    return ids


class Tokenizer:
    """The served model's tokenizer through vLLM's POST /tokenize: the exact tokenizer and
    special-token handling the server applies to a completion prompt, with nothing on the host."""

    def __init__(self, base_url: str, model: str):
        self.base_url, self.model = base_url, model
        self.calls = 0

    def info(self, text: str):
        self.calls += 1
        return post_json(self.base_url, "/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": True})

    def count(self, text: str) -> int:
        return replies.token_count(self.info(text))

    def max_model_len(self) -> int:
        return replies.context_limit(self.info("x"))


def stream_completion(base_url: str, model: str, prompt: str, max_tokens: int, salt: str,
                      clock0: float | None = None, deadline_s: float = STREAM_S) -> StreamTiming:
    """One streamed /v1/completions request, greedy, exactly max_tokens long (ignore_eos). Each
    event carrying text is timed as it is read, so a burst (events already waiting in the buffer)
    shows as gaps too short to be decode steps."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "cache_salt": salt}
    sent = time.monotonic()
    arrivals: list[float] = []
    usage = replies.Usage(0, 0)
    offset = sent - (clock0 or sent)
    try:
        client = client_for(base_url)
        with client.stream("POST", "/v1/completions", json_body=body, deadline_s=deadline_s) as stream:
            if not stream.ok:
                client.expect_ok(stream.answer())
            for index, event in enumerate(stream.events()):
                chunk = replies.completion_chunk(stream.operation, event.data, index)
                if chunk.choices:
                    arrivals.append(event.arrived - sent)
                usage = chunk.usage or usage
    except EndpointError as exc:  # named with the endpoint: the line ends a probe or a phase as it is
        return StreamTiming(0, 0, None, None, offset, f"{base_url}: {exc.line()}")
    return StreamTiming(usage.prompt_tokens, usage.completion_tokens,
                        arrivals[0] if arrivals else None, arrivals[-1] if arrivals else None, offset,
                        events=len(arrivals), spaced=spaced_gaps(arrivals))


class MetricsWatch(Periodic):
    """Scrapes /metrics every interval in a thread and keeps the peaks of the scheduler gauges."""

    def __init__(self, base_url: str, interval_s: float = 0.1):
        self.base_url, self.interval_s = base_url, interval_s
        self.first: prom.Snapshot | None = None
        self.last: prom.Snapshot | None = None
        self.peak = {prom.RUNNING: 0.0, prom.WAITING: 0.0, prom.KV_USAGE: 0.0}
        self.scrapes = 0

    def sample(self) -> None:
        snap = metrics(self.base_url)
        self.first = self.first or snap
        self.last = snap
        self.scrapes += 1
        running = snap.total(prom.RUNNING)
        for name in self.peak:
            # waiting counts only while a session runs: waiting for KV blocks another one holds, not
            # for the scheduler's first step (a scrape before it sees every session waiting)
            if name != prom.WAITING or running > 0:
                self.peak[name] = max(self.peak[name], snap.total(name))

    def tick(self) -> None:
        try:
            self.sample()
        except Problem:
            pass   # a missed scrape under load; the first and last ones are taken in the caller's thread

    def peaks(self) -> MetricPeaks:
        return MetricPeaks(self.peak[prom.RUNNING], self.peak[prom.WAITING], self.peak[prom.KV_USAGE],
                           self.last.total(prom.PREEMPTIONS) - self.first.total(prom.PREEMPTIONS), self.scrapes)


class LoadStart(Periodic):
    """Scrapes /metrics every interval until the server counts prompt tokens: the last scrape
    before that marks where the load began (within one interval), so a capped run's rates leave
    out the client container's start-up and its dataset generation."""

    def __init__(self, base_url: str, interval_s: float = 1.0):
        self.base_url, self.interval_s = base_url, interval_s
        self.before: prom.Snapshot | None = None
        self.began: float | None = None
        self.started = False

    def sample(self) -> None:
        if self.started:
            return
        snap, now = metrics(self.base_url), time.monotonic()
        if self.before is not None and snap.total(prom.PROMPT_TOKENS) > self.before.total(prom.PROMPT_TOKENS):
            self.started = True
        else:
            self.before, self.began = snap, now

    def tick(self) -> None:
        try:
            self.sample()
        except Problem:
            pass
