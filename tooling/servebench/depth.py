"""Long-context probes: prompts sized to an exact token depth with the served tokenizer,
their prefill and decode figures, and what N concurrent full-context sessions did (pure)."""
from __future__ import annotations

import dataclasses
import json
from typing import Callable

from door.problem import UsageError

from .sweep_tables import table

FORMAT = 2   # 2: parallel and queued are counts from the server gauges; decode_source per stream
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
        raise UsageError(f"depth {depth} is below the {fixed} tokens of the probe's salt and question; "
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
    raise UsageError(f"no filler prefix gives exactly {depth} tokens (closest {count(lo, body)}); "
                      "the tokenizer merges across every cut tried, ask for a depth one token away")


from .resolution import BURST_GAP_S, NOT_MEASURED, resolved_tpot_ms, spaced_gaps  # noqa: E402,F401


@dataclasses.dataclass(frozen=True)
class StreamTiming:
    """One streamed completion, times in seconds from the moment it was sent."""
    prompt_tokens: int
    completion_tokens: int
    first_s: float | None        # first token
    last_s: float | None         # last token
    sent_s: float = 0.0          # when it was sent, on a clock shared by sessions of one probe
    error: str | None = None
    events: int = 0              # events that carried text
    spaced: int = 0              # gaps between them of at least BURST_GAP_S (decode steps, not a burst)
    server_tpot_s: float | None = None   # this request's time per output token, from the server's histogram

    @property
    def ttft_s(self) -> float | None:
        return self.first_s

    @property
    def prefill_tok_s(self) -> float | None:
        return self.prompt_tokens / self.first_s if self.first_s else None

    @property
    def client_resolved(self) -> bool:
        """The client's clock timed the decode: at least half the tokens after the first came
        with a gap of their own (a token merged into another's event counts as back to back)."""
        steps = self.completion_tokens - 1
        return (steps >= 1 and self.first_s is not None and self.last_s is not None
                and self.last_s > self.first_s and 2 * self.spaced >= steps)

    @property
    def client_decode_tok_s(self) -> float | None:
        """Tokens after the first over the time after the first, when the clock resolved it."""
        if not self.client_resolved:
            return None
        return (self.completion_tokens - 1) / (self.last_s - self.first_s)

    @property
    def decode_tok_s(self) -> float | None:
        """One stream's decode speed: the server's own time per output token when it gave one,
        else the client's span when its clock resolved the decode, else None (not measured)."""
        if self.server_tpot_s:
            return 1 / self.server_tpot_s
        return self.client_decode_tok_s

    @property
    def decode_source(self) -> str:
        if self.server_tpot_s:
            return "server"
        return "client" if self.client_resolved else NOT_MEASURED


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
    server_tpot_s: float | None = None    # the sessions' mean time per output token, from the server

    def observed(self) -> bool:
        """A scrape saw a session running. When none did, they ran between scrapes and the gauges
        say nothing of parallel or queued: not measured, never "0 in parallel"."""
        return self.peaks is not None and self.peaks.running > 0

    def parallel(self) -> int | None:
        """Most sessions the server ran at once: the peak of vllm:num_requests_running over the
        scrapes (None: not observed). The client's token times cannot tell: a stream delivered
        in a burst has no span to overlap another's."""
        return min(round(self.peaks.running), len(self.sessions)) if self.observed() else None

    def queued(self) -> int | None:
        """Most sessions waiting at once for KV blocks: the peak of vllm:num_requests_waiting over
        the scrapes that saw a session running (client.MetricsWatch)."""
        return min(round(self.peaks.waiting), len(self.sessions)) if self.observed() else None

    def slowdown(self, t: StreamTiming) -> float | None:
        """Solo decode speed over this stream's: 2.0 means each token took twice as long."""
        solo, now = self.solo.decode_tok_s, t.decode_tok_s
        return solo / now if solo and now else None

    def mean_slowdown(self) -> float | None:
        """The sessions' mean server TPOT over the solo stream's (both the server's own figures)."""
        if self.server_tpot_s and self.solo.server_tpot_s:
            return self.server_tpot_s / self.solo.server_tpot_s
        return None


def fmt(v: float | None, digits: int) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def fmt_decode(t: StreamTiming) -> str:
    return NOT_MEASURED if t.decode_tok_s is None else f"{t.decode_tok_s:.1f} ({t.decode_source})"


def count(v: int | None) -> str:
    return NOT_MEASURED if v is None else str(v)


DECODE_NOTE = ("decode tok/s: one stream's tokens after the first per second: from the server's own "
               "time-per-output-token histogram on /metrics (server), else from the client's token times when "
               "its clock resolved them (client), else not measured (the stream came in a burst).")


def render(label: str, model: str, decode_tokens: int, rows: list[DepthRow], capacity: Capacity | None) -> str:
    out = [f"## Depth probes: {label}", "", f"Model {model}; every probe salted, {decode_tokens} tokens decoded.", ""]
    out += table(["depth tokens", "prompt tokens served", "TTFT s", "prefill tok/s", "decode tok/s"],
                 [[str(r.depth), str(r.timing.prompt_tokens), fmt(r.timing.ttft_s, 2),
                   fmt(r.timing.prefill_tok_s, 1), fmt_decode(r.timing)] for r in rows])
    out += ["", "TTFT: time to the first streamed token; prefill tok/s: prompt tokens / TTFT; " + DECODE_NOTE]
    if capacity is not None:
        c = capacity
        n = len(c.sessions)
        out += ["", f"### {n} full-context sessions at once ({c.depth} tokens each)", ""]
        if c.peaks is None:
            out += ["Parallel and queued sessions: not measured (no /metrics)."]
        elif not c.observed():
            out += [f"Parallel and queued sessions: not measured (none of {c.peaks.scrapes} scrapes of /metrics "
                    "saw a session running: they ran between scrapes)."]
        else:
            p = c.peaks
            out += [f"{count(c.parallel())} ran in parallel, {count(c.queued())} queued, as the server's own gauges "
                    f"showed them: over {p.scrapes} scrapes of /metrics, peak vllm:num_requests_running "
                    f"{p.running:g}, peak vllm:num_requests_waiting while one ran {p.waiting:g}, peak KV cache usage "
                    f"{100 * p.kv_usage:.0f}%, {p.preemptions:g} preemption(s)."]
        if c.server_tpot_s:
            out += [f"Server time per output token: {1000 * c.server_tpot_s:.1f} ms mean over the sessions"
                    + (f", {fmt(c.mean_slowdown(), 2)}x the solo stream's." if c.mean_slowdown() else ".")]
        out += [""]
        rows = [["solo", fmt(c.solo.ttft_s, 2), fmt_decode(c.solo), "1.00", ""]]
        for i, t in enumerate(c.sessions):
            rows.append([f"session {i + 1}", fmt(t.ttft_s, 2), fmt_decode(t), fmt(c.slowdown(t), 2),
                         "error: " + t.error if t.error else "done"])
        out += table(["stream", "TTFT s", "decode tok/s", "slowdown", "state"], rows)
        out += ["", "slowdown: the solo stream's decode tok/s over this stream's at the same depth "
                "(— where either was not measured). A queued session shows as a longer TTFT."]
    return "\n".join(out) + "\n"


def to_json(label: str, model: str, decode_tokens: int, rows: list[DepthRow], capacity: Capacity | None) -> str:
    def timing(t: StreamTiming) -> dict:
        return {**dataclasses.asdict(t), "prefill_tok_s": t.prefill_tok_s, "decode_tok_s": t.decode_tok_s,
                "decode_source": t.decode_source, "client_decode_tok_s": t.client_decode_tok_s}
    cap = None
    if capacity is not None:
        cap = {"depth": capacity.depth, "solo": timing(capacity.solo),
               "sessions": [timing(t) for t in capacity.sessions],
               "parallel": capacity.parallel(), "queued": capacity.queued(), "judged_from": "server gauges",
               "server_tpot_s": capacity.server_tpot_s, "mean_slowdown": capacity.mean_slowdown(),
               "slowdown": [capacity.slowdown(t) for t in capacity.sessions],
               "metric_peaks": dataclasses.asdict(capacity.peaks) if capacity.peaks else None}
    return json.dumps({"format": FORMAT, "label": label, "model": model, "decode_tokens": decode_tokens,
                       "depths": [{"depth": r.depth, **timing(r.timing)} for r in rows], "capacity": cap}, indent=2)
