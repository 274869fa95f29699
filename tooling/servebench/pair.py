"""Two servers on one host (bench/two_models): each model's latency and throughput alone, beside the
other server loaded but idle, and while both serve at once (pure: the figures, the table, the plot's
data, the JSON).

Every figure comes from the client's token times of bench/serve_sweep's own streamed requests
(client.stream_completion), except `server TPOT`, the server's own time-per-output-token histogram
over the phase."""
from __future__ import annotations

import dataclasses
import json
import statistics

from .depth import StreamTiming
from .sweep_tables import table

FORMAT = 1
ALONE, OTHER_IDLE, BOTH_BUSY = "alone", "other idle", "both busy"
CONDITIONS = (ALONE, OTHER_IDLE, BOTH_BUSY)
CONDITION_MEANING = {
    ALONE: "the other server stopped",
    OTHER_IDLE: "the other server up (its model loaded), sent nothing",
    BOTH_BUSY: "the other server sent the same load at the same time",
}


@dataclasses.dataclass(frozen=True)
class Workload:
    requests: int        # per model and phase
    concurrency: int     # requests in flight per model
    prompt_tokens: int   # every prompt exactly this long under the served tokenizer
    output_tokens: int   # every completion exactly this long (ignore_eos)

    def describe(self) -> str:
        return (f"{self.requests} requests per model and phase, {self.concurrency} in flight, "
                f"{self.prompt_tokens} prompt tokens, {self.output_tokens} output tokens, greedy, each prompt salted")


@dataclasses.dataclass(frozen=True)
class Phase:
    """One model's requests under one condition."""
    model: str
    condition: str
    timings: tuple[StreamTiming, ...]
    server_tpot_s: float | None = None   # the server's mean over exactly these requests, else None


@dataclasses.dataclass(frozen=True)
class Row:
    model: str
    condition: str
    requests: int
    failed: int
    ttft_ms_median: float | None
    ttft_ms_p90: float | None
    tpot_ms_median: float | None     # per request: time after the first token / tokens after it
    itl_ms_median: float | None      # per request: mean gap between its streamed token events
    server_tpot_ms: float | None
    output_tok_s: float | None       # all the phase's output tokens / its span (first sent to last token)
    requests_s: float | None


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def p90(values: list[float]) -> float | None:
    """The 90th percentile, linear between closest ranks (one value: that value)."""
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def tpot_s(t: StreamTiming) -> float | None:
    """Seconds per output token after the first, when the client's clock resolved the decode (a
    stream that came in a burst has no decode time to show)."""
    rate = t.client_decode_tok_s
    return 1 / rate if rate else None


def itl_s(t: StreamTiming) -> float | None:
    """Mean gap between the request's token events (an event may carry several tokens)."""
    if not t.client_resolved or t.events < 2:
        return None
    return (t.last_s - t.first_s) / (t.events - 1)


def ms(value: float | None) -> float | None:
    return None if value is None else 1000 * value


def summarize(phase: Phase) -> Row:
    done = [t for t in phase.timings if t.error is None and t.first_s is not None and t.last_s is not None]
    span = (max(t.sent_s + t.last_s for t in done) - min(t.sent_s for t in done)) if done else 0.0
    ttfts = [1000 * t.ttft_s for t in done]
    return Row(
        model=phase.model, condition=phase.condition, requests=len(phase.timings),
        failed=len(phase.timings) - len(done),
        ttft_ms_median=median(ttfts), ttft_ms_p90=p90(ttfts),
        tpot_ms_median=ms(median([v for t in done if (v := tpot_s(t)) is not None])),
        itl_ms_median=ms(median([v for t in done if (v := itl_s(t)) is not None])),
        server_tpot_ms=ms(phase.server_tpot_s),
        output_tok_s=sum(t.completion_tokens for t in done) / span if span > 0 else None,
        requests_s=len(done) / span if span > 0 else None)


def ordered(rows: list[Row]) -> list[Row]:
    """By model as first seen, then by condition in CONDITIONS' order."""
    models = list(dict.fromkeys(r.model for r in rows))
    return sorted(rows, key=lambda r: (models.index(r.model), CONDITIONS.index(r.condition)))


def fmt(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def render(rows: list[Row], workload: Workload, where: str) -> str:
    out = [f"Workload: {workload.describe()}. {where}", ""]
    out += table(["model", "condition", "TTFT ms median", "TTFT ms p90", "TPOT ms median", "ITL ms median",
                  "server TPOT ms", "output tok/s", "requests/s", "failed"],
                 [[r.model, r.condition, fmt(r.ttft_ms_median, 0), fmt(r.ttft_ms_p90, 0), fmt(r.tpot_ms_median, 1),
                   fmt(r.itl_ms_median, 1), fmt(r.server_tpot_ms, 1), fmt(r.output_tok_s, 1), fmt(r.requests_s, 2),
                   f"{r.failed}/{r.requests}"] for r in ordered(rows)])
    out += ["", "Conditions: " + "; ".join(f"{c}: {m}" for c, m in CONDITION_MEANING.items()) + ".",
            "TPOT: a request's time after its first token over the tokens after it; ITL: the mean gap between its "
            "streamed token events; both the median over the phase's requests, from the client's clock (— where every "
            "stream came in a burst). server TPOT: the server's own histogram, mean over the phase. output tok/s: "
            "the phase's output tokens over its span, first request sent to last token."]
    return "\n".join(out) + "\n"


@dataclasses.dataclass(frozen=True)
class Panel:
    """One panel of the plot: a bar per (model, condition); None where the figure was not measured."""
    title: str
    unit: str
    models: tuple[str, ...]
    series: tuple[tuple[str, tuple[float | None, ...]], ...]   # (condition, one value per model)


PANELS = (  # (title, Row attribute, unit)
    ("median TTFT", "ttft_ms_median", "ms"),
    ("median TPOT", "tpot_ms_median", "ms"),
    ("output throughput", "output_tok_s", "tok/s"),
)


def panels(rows: list[Row]) -> tuple[Panel, ...]:
    """The plot's data: the table's figures, grouped by model, a series per condition measured."""
    rows = ordered(rows)
    models = tuple(dict.fromkeys(r.model for r in rows))
    by_key = {(r.model, r.condition): r for r in rows}
    conditions = [c for c in CONDITIONS if any(r.condition == c for r in rows)]
    return tuple(Panel(title, unit, models, tuple(
        (c, tuple(getattr(by_key[(m, c)], attr) if (m, c) in by_key else None for m in models)) for c in conditions))
        for title, attr, unit in PANELS)


def to_json(rows: list[Row], workload: Workload, where: str) -> str:
    return json.dumps({"format": FORMAT, "workload": dataclasses.asdict(workload), "where": where,
                       "rows": [dataclasses.asdict(r) for r in ordered(rows)]}, indent=2)
