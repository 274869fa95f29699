"""Prometheus text exposition (format 0.0.4), as vLLM's /metrics serves it, read into samples.
One parser for every host-side reader: `build.py smoke`'s /metrics rows and `bench/serve`."""
from __future__ import annotations

import dataclasses
import re

_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class MetricsError(ValueError):
    """Text that is not Prometheus exposition, or lacks what a reader needs."""


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str
    labels: dict
    value: float


def parse(text: str, strict: bool = True) -> list[Sample]:
    """Every sample; comments skipped. A line that is not a sample raises MetricsError, or with
    strict=False is dropped (a report that must say what it could read, not fail on one line)."""
    samples = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        value = None
        if match:
            try:
                value = float(match.group("value"))
            except ValueError:
                value = None
        if value is None:
            if strict:
                raise MetricsError(f"line {number} is not a Prometheus sample: {line[:80]!r}")
            continue
        labels = {key: re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], found)
                  for key, found in _LABEL.findall(match.group("labels") or "")}
        samples.append(Sample(match.group("name"), labels, value))
    return samples
