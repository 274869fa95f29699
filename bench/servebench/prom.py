"""vLLM's /metrics (Prometheus text exposition) read into values (pure)."""
from __future__ import annotations

import dataclasses
import math
import re

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

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')


class MetricsError(ValueError):
    """Text that is not Prometheus exposition, or lacks what a probe needs."""


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str
    labels: dict
    value: float


def _unescape(text: str) -> str:
    return text.replace(r"\"", '"').replace(r"\n", "\n").replace("\\\\", "\\")


def parse(text: str) -> list[Sample]:
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise MetricsError(f"line {number} is not a Prometheus sample: {line[:80]!r}")
        labels = {k: _unescape(v) for k, v in _LABEL.findall(m.group(3) or "")}
        try:
            value = float(m.group(4))
        except ValueError:
            raise MetricsError(f"line {number}: value {m.group(4)!r} is not a number") from None
        samples.append(Sample(m.group(1), labels, value))
    return samples


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
            raise MetricsError(f"/metrics has no {name}; expected a vLLM OpenAI server's metrics")
        return sum(found)

    def labels(self, name: str) -> dict:
        """Labels of an info-style metric's first series ({} when absent)."""
        return next((s.labels for s in self.samples if s.name == name), {})

    def buckets(self, name: str) -> list[tuple[float, float]]:
        """Cumulative (upper bound, count) of a histogram, summed over its series."""
        counts: dict[float, float] = {}
        for s in self.samples:
            if s.name == f"{name}_bucket":
                le = math.inf if s.labels.get("le") in ("+Inf", "Inf") else float(s.labels["le"])
                counts[le] = counts.get(le, 0.0) + s.value
        return sorted(counts.items())


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
