"""HTTP to a vLLM OpenAI server through `requests` (tooling/endpoint.py's session, carrying the
API key): /health, /v1/models, /tokenize, /metrics and streamed completions (the side effects of
the sweep, record and depth probes). A failure is one line naming its cause (DNS, refused, TLS,
401/403, not ready); DNS, TLS and 401/403 end a wait at once, a refused port after a short grace."""
from __future__ import annotations

import json
import threading
import time

import requests

from tooling import endpoint

from . import prom
from .depth import MetricPeaks, StreamTiming, spaced_gaps
from .periodic import Periodic

# A refused port while waiting for a server: a container binding its port late gets this long.
REFUSED_GRACE_S = 5.0


class EndpointError(RuntimeError):
    """The endpoint does not answer as an OpenAI server; the message says what to check."""


_key: str | None = None
_local = threading.local()


def use_key(api_key: str | None) -> None:
    """The API key every later request carries (as `Authorization: Bearer`); None: none."""
    global _key
    _key = api_key
    _local.__dict__.clear()


def session() -> requests.Session:
    """This thread's session (the sweep's threads each keep one; the key is shared)."""
    s = getattr(_local, "session", None)
    if s is None or getattr(_local, "key", None) != _key:
        s = _local.session = endpoint.session(_key)
        _local.key = _key
    return s


def _send(method: str, url: str, timeout: float, **kwargs) -> requests.Response:
    try:
        resp = session().request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        raise EndpointError(f"{method} {url}: {endpoint.wire_failure(exc, url, timeout).line}") from None
    if resp.status_code >= 400:
        cause = endpoint.status_cause(resp.status_code, url, _key is not None)
        raise EndpointError(cause or f"{method} {url}: HTTP {resp.status_code} {resp.text[:200]}")
    return resp


def post_json(url: str, body: dict, timeout: float = 600) -> dict:
    try:
        return _send("POST", url, timeout, json=body).json()
    except ValueError:
        raise EndpointError(f"POST {url}: the answer is not JSON; is this a vLLM OpenAI server?") from None


def get_text(url: str, timeout: float = 30) -> str:
    return _send("GET", url, timeout).text


def metrics(base_url: str) -> prom.Snapshot:
    return prom.Snapshot.of(get_text(f"{base_url}/metrics"))


def wait_for(url: str, timeout_s: float, poll_s: float, read=lambda resp: resp) -> tuple[object, float]:
    """(read(response), seconds) once GET url answers 200 and read() accepts it, polling while
    the server loads (503, a dropped connection, a refused port within REFUSED_GRACE_S).
    DNS, TLS, 401/403 and 404 fail at once, each in one line."""
    start = time.monotonic()
    last = "no answer"
    while True:
        elapsed = time.monotonic() - start
        try:
            resp = session().get(url, timeout=10)
        except requests.RequestException as exc:
            failure = endpoint.wire_failure(exc, url, 10)
            if failure.final or (failure.kind == endpoint.REFUSED and elapsed >= min(REFUSED_GRACE_S, timeout_s)):
                raise EndpointError(f"{url}: {failure.line}") from None
            last = failure.message
        else:
            cause = endpoint.status_cause(resp.status_code, url, _key is not None)
            if resp.status_code in (401, 403, 404):
                raise EndpointError(cause)
            if resp.status_code == 200:
                try:
                    return read(resp), time.monotonic() - start
                except (ValueError, KeyError, TypeError):
                    raise EndpointError(f"{url} answered 200 but not as a vLLM OpenAI server does; "
                                        "check the URL") from None
            last = f"HTTP {resp.status_code}" + (" (the engine is loading)" if resp.status_code == 503 else "")
        if elapsed >= timeout_s:
            raise EndpointError(f"{url}: not ready after {timeout_s:g} s (last answer: {last}); "
                                "look at the server's log, or raise --ready-timeout")
        time.sleep(poll_s)


def wait_healthy(base_url: str, timeout_s: float, poll_s: float = 1.0) -> float:
    """Seconds until GET /health answers 200 (vLLM answers 503 while the engine loads)."""
    return wait_for(f"{base_url}/health", timeout_s, poll_s)[1]


def served_models(base_url: str, timeout_s: float, poll_s: float = 2.0) -> list[str]:
    """Model ids from GET /v1/models, waiting up to timeout_s while the server loads."""
    ids, _ = wait_for(f"{base_url}/v1/models", timeout_s, poll_s,
                      lambda resp: [m["id"] for m in resp.json()["data"]])
    return ids


class Tokenizer:
    """The served model's tokenizer through vLLM's POST /tokenize: the exact tokenizer and
    special-token handling the server applies to a completion prompt, with nothing on the host."""

    def __init__(self, base_url: str, model: str):
        self.url, self.model = f"{base_url}/tokenize", model
        self.calls = 0

    def info(self, text: str) -> dict:
        self.calls += 1
        return post_json(self.url, {"model": self.model, "prompt": text, "add_special_tokens": True})

    def count(self, text: str) -> int:
        return self.info(text)["count"]

    def max_model_len(self) -> int:
        return self.info("x")["max_model_len"]


def stream_completion(base_url: str, model: str, prompt: str, max_tokens: int, salt: str,
                      clock0: float | None = None) -> StreamTiming:
    """One streamed /v1/completions request, greedy, exactly max_tokens long (ignore_eos). Each
    event carrying text is timed as it is read, so a burst (events already waiting in the buffer)
    shows as gaps too short to be decode steps."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "cache_salt": salt}
    url = f"{base_url}/v1/completions"
    sent = time.monotonic()
    arrivals: list[float] = []
    usage = {}
    offset = sent - (clock0 or sent)
    try:
        with session().post(url, json=body, stream=True, timeout=3600) as resp:
            if resp.status_code >= 400:
                cause = endpoint.status_cause(resp.status_code, url, _key is not None)
                return StreamTiming(0, 0, None, None, offset, cause or f"HTTP {resp.status_code} {resp.text[:200]}")
            for line in resp.iter_lines():
                line = line.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("choices"):
                    arrivals.append(time.monotonic() - sent)
                usage = chunk.get("usage") or usage
    except requests.RequestException as exc:
        return StreamTiming(0, 0, None, None, offset, endpoint.wire_failure(exc, url).line)
    except ValueError as exc:
        return StreamTiming(0, 0, None, None, offset, f"an event that is not JSON: {exc}")
    return StreamTiming(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
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
        except EndpointError:
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
        except EndpointError:
            pass
