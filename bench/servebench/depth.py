"""Long-context probes: prompts sized to an exact token depth with the served tokenizer,
their prefill and decode figures, and what N concurrent full-context sessions did (pure)."""
from __future__ import annotations

import dataclasses
import json
from typing import Callable

from .report import table

FORMAT = 1
# Varied sentences, numbered: a tokenizer's merges make a repeated paragraph cost fewer tokens
# per character than fresh text, so the filler is sized by encode(), never by its length.
SENTENCES = (
    "The harbour master logged {n} ships before the tide turned.",
    "A survey of {n} orchards found the late frost harmless.",
    "Section {n} of the manual describes the valve in detail.",
    "By noon {n} volunteers had repainted the station fence.",
    "Reading {n}: the pressure fell slowly through the night.",
    "Her notebook lists {n} birds seen along the canal path.",
)
QUESTION = "\nIn one sentence, what is the text above about?"
SEARCH_SLACK = 32   # characters tried around the binary search's answer when a step adds two tokens
PADS = ("", ".", " .", ",", "\n")   # then one of these before the question, for a cut the merges skip


class SizingError(ValueError):
    """No prompt of exactly the asked depth; the message says why."""


def filler(chars: int) -> str:
    parts, total, n = [], 0, 0
    while total < chars:
        s = SENTENCES[n % len(SENTENCES)].format(n=n) + " "
        parts.append(s)
        total += len(s)
        n += 1
    return "".join(parts)


def salt_head(salt: str) -> str:
    """The first tokens differ per probe, so no KV block of an earlier probe matches (the
    prefix cache keys every block by all tokens before it), with or without cache_salt."""
    return f"Probe {salt}.\n"


def sized_prompt(encode: Callable[[str], int], depth: int, salt: str, chars_per_token: float = 4.0) -> tuple[str, int]:
    """(prompt, its token count == depth): the salted head, then the longest filler prefix that
    keeps the count at depth (binary search over characters), then the question."""
    head = salt_head(salt)

    def count(k: int, body: str) -> int:
        return encode(head + body[:k] + QUESTION)

    fixed = encode(head + QUESTION)
    if fixed > depth:
        raise SizingError(f"depth {depth} is below the {fixed} tokens of the probe's salt and question; "
                          f"ask for at least {fixed}")
    body = filler(int(depth * chars_per_token) + 64)
    while count(len(body), body) < depth:
        body = filler(2 * len(body))
    lo, hi = 0, len(body)          # count(lo) <= depth <= count(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(mid, body) <= depth:
            lo = mid
        else:
            hi = mid
    window = sorted(range(max(0, lo - SEARCH_SLACK), min(len(body), lo + SEARCH_SLACK) + 1), key=lambda k: abs(k - lo))
    for pad in PADS:
        for k in window:
            prompt = head + body[:k] + pad + QUESTION
            got = encode(prompt)
            if got == depth:
                return prompt, got
    raise SizingError(f"no filler prefix gives exactly {depth} tokens (closest {count(lo, body)}); "
                      "the tokenizer merges across every cut tried, ask for a depth one token away")


@dataclasses.dataclass(frozen=True)
class StreamTiming:
    """One streamed completion, times in seconds from the moment it was sent."""
    prompt_tokens: int
    completion_tokens: int
    first_s: float | None        # first token
    last_s: float | None         # last token
    sent_s: float = 0.0          # when it was sent, on a clock shared by sessions of one probe
    error: str | None = None

    @property
    def ttft_s(self) -> float | None:
        return self.first_s

    @property
    def prefill_tok_s(self) -> float | None:
        return self.prompt_tokens / self.first_s if self.first_s else None

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first over the time after the first: one stream's decode speed."""
        if self.first_s is None or self.last_s is None or self.completion_tokens < 2 or self.last_s <= self.first_s:
            return None
        return (self.completion_tokens - 1) / (self.last_s - self.first_s)


@dataclasses.dataclass(frozen=True)
class DepthRow:
    depth: int
    timing: StreamTiming


@dataclasses.dataclass(frozen=True)
class MetricPeaks:
    """Highest values of /metrics gauges seen while the sessions ran, and preemptions among them."""
    running: float
    waiting: float
    kv_usage: float
    preemptions: float
    scrapes: int


@dataclasses.dataclass(frozen=True)
class Capacity:
    depth: int
    solo: StreamTiming
    sessions: tuple[StreamTiming, ...]
    peaks: MetricPeaks | None

    def absolute(self, t: StreamTiming, field: str) -> float | None:
        v = getattr(t, field)
        return None if v is None else t.sent_s + v

    def queued(self) -> list[int]:
        """Sessions whose first token came only after another session had finished: they
        waited for KV blocks that only a finished session gave back."""
        out = []
        for i, t in enumerate(self.sessions):
            first = self.absolute(t, "first_s")
            ends = [self.absolute(o, "last_s") for j, o in enumerate(self.sessions) if j != i]
            if first is not None and any(e is not None and e <= first for e in ends):
                out.append(i)
        return out

    def parallel(self) -> int:
        """Most sessions decoding at one moment (their first-to-last token spans overlap)."""
        spans = [(self.absolute(t, "first_s"), self.absolute(t, "last_s")) for t in self.sessions]
        spans = [(a, b) for a, b in spans if a is not None and b is not None]
        return max((sum(1 for a, b in spans if a <= start <= b) for start, _ in spans), default=0)

    def slowdown(self, t: StreamTiming) -> float | None:
        """Solo decode speed over this stream's: 2.0 means each token took twice as long."""
        solo, now = self.solo.decode_tok_s, t.decode_tok_s
        return solo / now if solo and now else None


def fmt(v: float | None, digits: int) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def render(label: str, model: str, decode_tokens: int, rows: list[DepthRow], capacity: Capacity | None) -> str:
    out = [f"## Depth probes: {label}", "", f"Model {model}; every probe salted, {decode_tokens} tokens decoded.", ""]
    out += table(["depth tokens", "prompt tokens served", "TTFT s", "prefill tok/s", "decode tok/s"],
                 [[str(r.depth), str(r.timing.prompt_tokens), fmt(r.timing.ttft_s, 2),
                   fmt(r.timing.prefill_tok_s, 1), fmt(r.timing.decode_tok_s, 1)] for r in rows])
    out += ["", "TTFT: time to the first streamed token; prefill tok/s: prompt tokens / TTFT; "
            "decode tok/s: tokens after the first / time after the first (one stream)."]
    if capacity is not None:
        c, queued = capacity, capacity.queued()
        n = len(c.sessions)
        out += ["", f"### {n} full-context sessions at once ({c.depth} tokens each)", "",
                f"{c.parallel()} ran in parallel, {len(queued)} queued "
                f"(first token only after another session finished)."]
        if c.peaks is not None:
            p = c.peaks
            out += [f"/metrics over {p.scrapes} scrapes: peak vllm:num_requests_running {p.running:g}, "
                    f"peak vllm:num_requests_waiting {p.waiting:g}, peak KV cache usage {100 * p.kv_usage:.0f}%, "
                    f"{p.preemptions:g} preemption(s)."]
        out += [""]
        rows = [["solo", fmt(c.solo.ttft_s, 2), fmt(c.solo.decode_tok_s, 1), "1.00", ""]]
        for i, t in enumerate(c.sessions):
            rows.append([f"session {i + 1}", fmt(t.ttft_s, 2), fmt(t.decode_tok_s, 1), fmt(c.slowdown(t), 2),
                         "queued" if i in queued else ("error: " + t.error if t.error else "ran")])
        out += table(["stream", "TTFT s", "decode tok/s", "slowdown", "state"], rows)
        out += ["", "slowdown: the solo stream's decode tok/s over this stream's at the same depth."]
    return "\n".join(out) + "\n"


def to_json(label: str, model: str, decode_tokens: int, rows: list[DepthRow], capacity: Capacity | None) -> str:
    def timing(t: StreamTiming) -> dict:
        return {**dataclasses.asdict(t), "prefill_tok_s": t.prefill_tok_s, "decode_tok_s": t.decode_tok_s}
    cap = None
    if capacity is not None:
        cap = {"depth": capacity.depth, "solo": timing(capacity.solo),
               "sessions": [timing(t) for t in capacity.sessions],
               "parallel": capacity.parallel(), "queued": capacity.queued(),
               "slowdown": [capacity.slowdown(t) for t in capacity.sessions],
               "metric_peaks": dataclasses.asdict(capacity.peaks) if capacity.peaks else None}
    return json.dumps({"format": FORMAT, "label": label, "model": model, "decode_tokens": decode_tokens,
                       "depths": [{"depth": r.depth, **timing(r.timing)} for r in rows], "capacity": cap}, indent=2)
