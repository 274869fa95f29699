"""Prometheus text exposition (format 0.0.4), as vLLM's /metrics serves it, read into samples with
prometheus_client's own parser (the library vLLM writes the text with). One reader for every
host-side tool: `build.py smoke`'s /metrics rows and `bench/serve_sweep`."""
from __future__ import annotations

import dataclasses

from prometheus_client.parser import text_string_to_metric_families

from door.problem import Problem


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str
    labels: dict
    value: float


def _samples(text: str) -> list[Sample]:
    return [Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples]


def parse(text: str, strict: bool = True) -> list[Sample]:
    """Every sample; comments skipped. Text the parser refuses raises a Problem naming the
    first line it refuses, or with strict=False that line is dropped and the rest read (a report
    that must say what it could read, not fail on one line)."""
    try:
        return _samples(text)
    except ValueError:
        pass
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            samples += _samples(line + "\n")
        except ValueError:
            if strict:
                raise Problem(f"line {number} is not a Prometheus sample: {line.strip()[:80]!r}") from None
    return samples
