"""vLLM's /metrics (Prometheus text exposition) read into values (pure)."""
from __future__ import annotations

import dataclasses
import math

from door.problem import Problem

# vLLM 0.33.0 names (vllm/v1/metrics/loggers.py); counters carry prometheus_client's `_total`.
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"            # 1 means 100 percent
PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"   # one series per finished_reason
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
CACHE_CONFIG = "vllm:cache_config_info"          # a gauge set to 1; the CacheConfig in its labels

from buildtool.endpoint.prometheus import Sample, parse  # noqa: F401  (this module's readers use them)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One scrape of /metrics. Values of a name are summed over its series (engines, reasons)."""
    samples: tuple[Sample, ...]

    @classmethod
    def of(cls, text: str) -> "Snapshot":
        return cls(tuple(parse(text)))

    def has(self, name: str) -> bool:
        return any(s.name == name for s in self.samples)

    def total(self, name: str) -> float:
        found = [s.value for s in self.samples if s.name == name]
        if not found:
            raise Problem(f"/metrics has no {name}; expected a vLLM OpenAI server's metrics")
        return sum(found)

    def labels(self, name: str) -> dict:
        """Labels of an info-style metric's first series ({} when absent)."""
        return next((s.labels for s in self.samples if s.name == name), {})

    def buckets(self, name: str) -> list[tuple[float, float]]:
        """Cumulative (upper bound, count) of a histogram, summed over its series."""
        counts: dict[float, float] = {}
        for s in self.samples:
            if s.name == f"{name}_bucket":
                le = bucket_bound(name, s.labels.get("le"))
                counts[le] = counts.get(le, 0.0) + s.value
        return sorted(counts.items())


def bucket_bound(name: str, le) -> float:
    """A histogram bucket's upper bound, from its `le` label."""
    if le in ("+Inf", "Inf"):
        return math.inf
    try:
        return float(le)
    except (TypeError, ValueError):
        raise Problem(f"/metrics: a {name}_bucket sample has le={le!r}, expected a number or +Inf; "
                           "expected a vLLM OpenAI server's metrics") from None


def histogram_mean(after: Snapshot, before: Snapshot, name: str) -> tuple[float, float | None]:
    """(observations, their mean) of a histogram between two scrapes; mean None when none, or
    when the server does not export it."""
    if not (after.has(f"{name}_count") and before.has(f"{name}_count")):
        return 0.0, None
    n = after.total(f"{name}_count") - before.total(f"{name}_count")
    total = after.total(f"{name}_sum") - before.total(f"{name}_sum")
    return n, (total / n if n > 0 else None)


def bucket_delta(after: Snapshot, before: Snapshot, name: str) -> list[tuple[float, float]]:
    prior = dict(before.buckets(name))
    return [(le, n - prior.get(le, 0.0)) for le, n in after.buckets(name)]


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket that holds rank q*count.
    None when the histogram saw nothing; the highest finite bound when the rank is in +Inf."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower_bound
            if count == lower_count:
                return le
            return lower_bound + (le - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = le, count
    return lower_bound
