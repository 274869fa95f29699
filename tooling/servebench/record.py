"""A benchmark record (one workload, one endpoint): its figures, their meaning, and the
Markdown of one record or several side by side (pure)."""
from __future__ import annotations

import dataclasses
import json

from door.problem import UsageError

from . import prom
from .resolution import resolved_tpot_ms
from .sweep_tables import table

FORMAT = 1
FROM_CLIENT = "vllm bench serve (client side)"
FROM_SERVER = "the server's /metrics counters and histograms (the client was stopped at the cap)"


@dataclasses.dataclass(frozen=True)
class Workload:
    """What was sent: two records compare only when this is equal."""
    dataset: str                  # "sharegpt" or "random"
    dataset_file: str | None      # basename of the ShareGPT JSON
    input_len: int | None         # random only
    output_len: int | None        # None: the dataset's own lengths
    concurrency: int
    num_prompts: int
    seed: int
    cap_s: float | None

    def describe(self) -> str:
        if self.dataset == "sharegpt":
            data = f"ShareGPT ({self.dataset_file})"
        else:
            data = f"random, {self.input_len} tokens in"
        out = "output lengths from the dataset" if self.output_len is None else f"{self.output_len} tokens out"
        cap = f", capped at {self.cap_s / 60:g} min" if self.cap_s else ""
        return f"{data}, {out}, concurrency {self.concurrency}, {self.num_prompts} prompts, seed {self.seed}{cap}"


@dataclasses.dataclass(frozen=True)
class Record:
    label: str
    model: str
    workload: Workload
    source: str                        # FROM_CLIENT or FROM_SERVER
    elapsed_s: float                   # the measured run's duration (stopped: from the first load to the cap)
    stopped_at_cap: bool
    completed: int
    failed: int | None                 # None: not known (the client was stopped)
    prefill_tok_s: float | None
    decode_tok_s: float | None
    request_throughput: float | None
    median_ttft_ms: float | None
    median_tpot_ms: float | None
    readiness_s: float | None          # None: the server was already running
    peak_memory_bytes: int | None
    memory_meaning: str
    server_mean_tpot_ms: float | None = None   # the server's own mean over the run (its TPOT histogram)

    def progress(self) -> str:
        if self.stopped_at_cap:
            return (f"stopped at the {self.workload.cap_s:.0f} s cap after {self.completed} of "
                    f"{self.workload.num_prompts} requests completed ({self.elapsed_s:.0f} s under load)")
        return f"complete in {self.elapsed_s:.0f} s"

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **dataclasses.asdict(self)}, indent=2)

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise UsageError(f"not a benchmark record of format {FORMAT}; point at a JSON written by bench/serve_sweep record")
        d = {k: v for k, v in d.items() if k != "format"}
        try:
            return cls(**{**d, "workload": Workload(**d["workload"])})
        except (TypeError, KeyError) as exc:
            raise UsageError(f"benchmark record with unexpected fields ({exc}); rewrite it with bench/serve_sweep record") from None


def from_bench_result(result: dict, *, label: str, model: str, workload: Workload, readiness_s: float | None,
                      peak_memory_bytes: int | None, memory_meaning: str,
                      server_mean_tpot_ms: float | None = None) -> Record:
    """A record from a finished `vllm bench serve --save-result` JSON. Prefill tok/s is
    prompt tokens over the run's duration, decode tok/s output tokens over it (vLLM's
    output_throughput): both are throughput over all streams, not one stream's speed. The client's
    median TPOT is kept only when it is a decode step, not a burst (depth.resolved_tpot_ms)."""
    duration = result["duration"]
    return Record(label, model, workload, FROM_CLIENT, duration, False, result["completed"], result["failed"],
                  result["total_input_tokens"] / duration if duration else None,
                  result["output_throughput"], result["request_throughput"],
                  result["median_ttft_ms"], resolved_tpot_ms(result["median_tpot_ms"]),
                  readiness_s, peak_memory_bytes, memory_meaning, server_mean_tpot_ms)


def from_server_counters(before: prom.Snapshot, after: prom.Snapshot, elapsed_s: float, *, label: str, model: str,
                         workload: Workload, readiness_s: float | None, peak_memory_bytes: int | None,
                         memory_meaning: str) -> Record:
    """A record of a run stopped at its cap: the client kept nothing, the server counted
    what it did in between. Medians come from histogram buckets (Prometheus'
    histogram_quantile), so they are as coarse as vLLM's bucket bounds."""
    def per_s(name):
        return (after.total(name) - before.total(name)) / elapsed_s if elapsed_s > 0 else None

    def median_ms(name):
        q = prom.quantile(0.5, prom.bucket_delta(after, before, name))
        return None if q is None else q * 1000
    completed = round(after.total(prom.REQUEST_SUCCESS) - before.total(prom.REQUEST_SUCCESS))
    return Record(label, model, workload, FROM_SERVER, elapsed_s, True, completed, None,
                  per_s(prom.PROMPT_TOKENS), per_s(prom.GENERATION_TOKENS),
                  completed / elapsed_s if elapsed_s > 0 else None,
                  median_ms(prom.TTFT), median_ms(prom.TPOT), readiness_s, peak_memory_bytes, memory_meaning,
                  server_mean_tpot_ms(after, before))


def server_mean_tpot_ms(after: prom.Snapshot, before: prom.Snapshot) -> float | None:
    """The server's own mean time per output token over the requests finished in between."""
    _, mean = prom.histogram_mean(after, before, prom.TPOT)
    return None if mean is None else mean * 1000


def memory_meaning(kind: str | None, cache_config: dict, where: str = "") -> str:
    """What the peak memory figure is, in the words a reader needs to compare it."""
    util = cache_config.get("gpu_memory_utilization")
    if kind == "gpu":
        return (f"vLLM KV reservation at utilisation {util if util else 'unknown'}, not the checkpoint: "
                f"GPU memory in use at peak ({where or 'NVML'}, every process on the device), which is the "
                "weights plus activations plus the KV cache vLLM allocates up front")
    if kind == "container":
        return (f"container memory at peak ({where or 'docker stats'}): the weights held in host RAM plus "
                "vLLM's CPU KV cache (VLLM_CPU_KVCACHE_SPACE), not the checkpoint")
    return "not sampled: no GPU (NVML) on this host and no --container to watch"


def gib(n: int | None) -> str:
    return "—" if n is None else f"{n / 2**30:.2f} GiB"


def num(v: float | None, digits: int) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


ROWS = (  # (row title, attribute, digits): numeric rows that get a change column
    ("prefill tok/s", "prefill_tok_s", 1),
    ("decode tok/s", "decode_tok_s", 1),
    ("median TTFT ms", "median_ttft_ms", 0),
    ("median TPOT ms", "median_tpot_ms", 1),
    ("mean TPOT ms (server)", "server_mean_tpot_ms", 1),
    ("request throughput req/s", "request_throughput", 2),
)


def change(a: float | None, b: float | None) -> str:
    if a is None or b is None or not a:
        return "—"
    return f"{100 * (b - a) / a:+.1f}%"


def workload_mismatch(records: list[Record]) -> list[str]:
    first = records[0].workload
    return sorted({f.name for r in records[1:] for f in dataclasses.fields(first)
                   if getattr(r.workload, f.name) != getattr(first, f.name)})


def render(records: list[Record]) -> str:
    """One record, or several side by side (the last column: the second against the first)."""
    two = len(records) == 2
    header = ["", *(r.label for r in records)] + ([f"{records[1].label} vs {records[0].label}"] if two else [])
    rows = []
    for title, attr, digits in ROWS:
        values = [getattr(r, attr) for r in records]
        rows.append([title, *(num(v, digits) for v in values)] + ([change(*values)] if two else []))
    extra = [
        ("completed requests", lambda r: f"{r.completed}/{r.workload.num_prompts}"),
        ("failed requests", lambda r: "—" if r.failed is None else str(r.failed)),
        ("time to readiness s", lambda r: num(r.readiness_s, 0)),
        ("peak memory", lambda r: gib(r.peak_memory_bytes)),
        ("run", lambda r: r.progress()),
    ]
    for title, cell in extra:
        rows.append([title, *(cell(r) for r in records)] + (["" if title != "peak memory" else
                     change(records[0].peak_memory_bytes, records[1].peak_memory_bytes)] if two else []))
    out = [f"## Benchmark record: {' vs '.join(r.label for r in records)}", "",
           f"Workload: {records[0].workload.describe()}.", ""]
    out += table(header, rows)
    out += ["", "What the rows mean: prefill tok/s = prompt tokens processed per second and decode tok/s = "
            "output tokens per second, both over the whole run and all streams together; median TTFT = "
            "time to first token; median TPOT = time per output token after the first (1000 / TPOT is one "
            "stream's decode speed; — when below a millisecond, a burst the client's clock cannot time); "
            "mean TPOT (server) = the same from the server's own histogram on /metrics; time to readiness = container start until /health answers 200 "
            "(— when the server was already running); completed/failed = requests the client finished "
            "or got an error for.", ""]
    for r in records:
        out.append(f"- {r.label}: model {r.model}; peak memory: {r.memory_meaning}; figures from {r.source}.")
    return "\n".join(out) + "\n"
