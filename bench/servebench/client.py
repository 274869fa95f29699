"""HTTP to a vLLM OpenAI server with the standard library: /health, /tokenize, /metrics and
streamed completions (the side effects of the record and depth probes)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from . import prom
from .depth import MetricPeaks, StreamTiming
from .driver import EndpointError
from .periodic import Periodic


def post_json(url: str, body: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        raise EndpointError(f"POST {url}: HTTP {exc.code} {exc.read()[:200].decode(errors='replace')}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise EndpointError(f"POST {url}: {getattr(exc, 'reason', exc)}; is the server up?") from None


def get_text(url: str, timeout: float = 30) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode()
    except urllib.error.HTTPError as exc:
        raise EndpointError(f"GET {url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise EndpointError(f"GET {url}: {getattr(exc, 'reason', exc)}; is the server up?") from None


def metrics(base_url: str) -> prom.Snapshot:
    return prom.Snapshot.of(get_text(f"{base_url}/metrics"))


def wait_healthy(base_url: str, timeout_s: float, poll_s: float = 1.0) -> float:
    """Seconds until GET /health answers 200 (vLLM answers 503 while the engine loads)."""
    start = time.monotonic()
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/health", timeout=10) as resp:
                if resp.status == 200:
                    return time.monotonic() - start
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() - start >= timeout_s:
            raise EndpointError(f"{base_url}/health: {last} after {timeout_s:g} s; "
                                "look at the server's log (or raise --ready-timeout)")
        time.sleep(poll_s)


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
    """One streamed /v1/completions request, greedy, exactly max_tokens long (ignore_eos)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "cache_salt": salt}
    req = urllib.request.Request(f"{base_url}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    sent = time.monotonic()
    first = last = None
    usage = {}
    try:
        with urllib.request.urlopen(req, timeout=3600) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("choices"):
                    now = time.monotonic() - sent
                    first = now if first is None else first
                    last = now
                usage = chunk.get("usage") or usage
    except urllib.error.HTTPError as exc:
        return StreamTiming(0, 0, None, None, sent - (clock0 or sent),
                            f"HTTP {exc.code} {exc.read()[:200].decode(errors='replace')}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return StreamTiming(0, 0, None, None, sent - (clock0 or sent), str(getattr(exc, "reason", exc)))
    return StreamTiming(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), first, last,
                        sent - (clock0 or sent))


class MetricsWatch(Periodic):
    """Scrapes /metrics every interval in a thread and keeps the peaks of the scheduler gauges."""

    def __init__(self, base_url: str, interval_s: float = 0.2):
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
        for name in self.peak:
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
