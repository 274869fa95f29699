"""The seed study's tables from a sweep folder, or two side by side (pure, given the JSON)."""
from __future__ import annotations

import dataclasses
import pathlib
import statistics

from door.problem import UsageError

from . import results
from .resolution import resolved_tpot_ms
from .sweep_runs import Run, Sweep, runs


@dataclasses.dataclass(frozen=True)
class Spread:
    """A metric over the repeats of a cell: mean and the run-to-run range."""
    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> "Spread | None":
        return cls(statistics.fmean(values), min(values), max(values), len(values)) if values else None


@dataclasses.dataclass(frozen=True)
class Cell:
    concurrency: int
    input_len: int | None
    total_tok_s: Spread | None       # output tokens per second, all streams together
    stream_tok_s: Spread | None      # 1000 / median TPOT
    ttft_ms: Spread | None           # median TTFT
    failed: int
    requests: int
    runs_done: int
    runs_planned: int
    seeds: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Endpoint:
    label: str
    sweep: Sweep
    cells: list[Cell]

    def cell(self, concurrency, input_len) -> Cell | None:
        return next((c for c in self.cells if (c.concurrency, c.input_len) == (concurrency, input_len)), None)


def summarize(label: str, sweep: Sweep, loaded: dict[Run, dict | None]) -> Endpoint:
    """Per cell: the spread of each metric over its complete runs."""
    cells = []
    by_cell: dict[tuple, list[Run]] = {}
    for run in runs(sweep):
        by_cell.setdefault(run.cell, []).append(run)
    for (c, inp), cell_runs in by_cell.items():
        done = [loaded[r] for r in cell_runs if loaded.get(r) is not None]
        served = [d for d in done if d["completed"] > 0]
        cells.append(Cell(
            c, inp,
            Spread.of([d["output_throughput"] for d in served]),
            Spread.of([1000 / d["median_tpot_ms"] for d in served if resolved_tpot_ms(d["median_tpot_ms"])]),
            Spread.of([d["median_ttft_ms"] for d in served]),
            sum(d["failed"] for d in done), sum(d["completed"] + d["failed"] for d in done),
            len(done), len(cell_runs), tuple(r.seed for r in cell_runs)))
    return Endpoint(label, sweep, cells)


def load_endpoint(folder: pathlib.Path) -> Endpoint:
    stored = results.load_sweep(folder)
    if stored is None:
        raise UsageError(f"{folder}: no {results.SWEEP_FILE}; point at a folder written by bench/serve_sweep run")
    sweep, endpoint = stored
    loaded = {}
    for run in runs(sweep):
        data = results.load_json(results.run_path(folder, run))
        loaded[run] = data if results.incomplete_reason(data, run) is None else None
    return summarize(endpoint.get("label") or folder.name, sweep, loaded)


def fmt(s: Spread | None, digits: int) -> str:
    if s is None:
        return "—"
    if s.n == 1:
        return f"{s.mean:.{digits}f}"
    return f"{s.mean:.{digits}f} ({s.low:.{digits}f}–{s.high:.{digits}f})"


def input_label(n: int | None) -> str:
    return "ShareGPT" if n is None else str(n)


def failed_text(cell: Cell) -> str:
    text = f"{cell.failed}/{cell.requests}"
    if cell.runs_done < cell.runs_planned:
        text += f" ({cell.runs_planned - cell.runs_done} run(s) missing)"
    return text


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def single_tables(ep: Endpoint) -> list[str]:
    rows = [[str(c.concurrency), input_label(c.input_len), fmt(c.total_tok_s, 1), fmt(c.stream_tok_s, 1),
             fmt(c.ttft_ms, 0), failed_text(c)] for c in ep.cells]
    return table(["c", "input", "total tok/s", "per-stream tok/s", "TTFT ms", "failed"], rows)


def delta(a: Spread | None, b: Spread | None) -> str:
    if a is None or b is None or not a.mean:
        return "—"
    return f"{100 * (b.mean - a.mean) / a.mean:+.1f}%"


METRICS = (("total tok/s", "total_tok_s", 1), ("per-stream tok/s", "stream_tok_s", 1), ("TTFT ms", "ttft_ms", 0))


def ab_tables(a: Endpoint, b: Endpoint) -> list[str]:
    lines = []
    for title, attr, digits in METRICS:
        rows = []
        for ca in a.cells:
            cb = b.cell(ca.concurrency, ca.input_len)
            va, vb = getattr(ca, attr), getattr(cb, attr) if cb else None
            rows.append([str(ca.concurrency), input_label(ca.input_len), fmt(va, digits), fmt(vb, digits), delta(va, vb)])
        lines += [f"### {title}", "", *table(["c", "input", a.label, b.label, f"{b.label} vs {a.label}"], rows), ""]
    rows = [[str(ca.concurrency), input_label(ca.input_len), failed_text(ca),
             failed_text(b.cell(ca.concurrency, ca.input_len)) if b.cell(ca.concurrency, ca.input_len) else "—"]
            for ca in a.cells]
    lines += ["### failed requests", "", *table(["c", "input", a.label, b.label], rows)]
    return lines


def ceiling_table(endpoints: list[Endpoint], ceilings: list[float]) -> list[str]:
    """Per-stream tok/s at concurrency 1 as a share of each endpoint's decode ceiling."""
    rows = []
    for ep, ceiling in zip(endpoints, ceilings):
        for cell in ep.cells:
            if cell.concurrency != 1:
                continue
            s = cell.stream_tok_s
            share = f"{100 * s.mean / ceiling:.1f}%" if s else "—"
            rows.append([ep.label, input_label(cell.input_len), fmt(s, 1), f"{ceiling:.1f}", share])
    if not rows:
        return ["No cell at concurrency 1: the share of the ceiling needs one."]
    return table(["endpoint", "input", "per-stream tok/s at c=1", "ceiling tok/s", "of ceiling"], rows)


def render(endpoints: list[Endpoint], ceilings: list[float]) -> str:
    first = endpoints[0]
    sw = first.sweep
    out = [f"## Serving sweep: {' vs '.join(e.label for e in endpoints)}", "",
           f"Dataset {sw.dataset}{' (' + sw.dataset_file + ')' if sw.dataset_file else ''}, "
           f"output {sw.output_len if sw.output_len is not None else 'from the dataset'} tokens, "
           f"{sw.repeats} repeat(s) per cell, base seed {sw.base_seed}. "
           "Each figure: mean over repeats (lowest–highest run). total tok/s: output tokens per second "
           "over all streams; per-stream tok/s: 1000 / median TPOT (— where the median TPOT is below a "
           "millisecond: the tokens came back to back, a burst the client's clock cannot time); TTFT: median time to first token; "
           "failed: failed/sent requests over all repeats.", ""]
    if len(endpoints) == 1:
        out += single_tables(first)
    else:
        out += ab_tables(*endpoints)
    if ceilings:
        out += ["", "### share of the decode ceiling at c=1", "", *ceiling_table(endpoints, ceilings)]
    return "\n".join(out) + "\n"


def seed_mismatch(a: Endpoint, b: Endpoint) -> list[str]:
    """Sweep fields that differ: an A/B only compares like with like when there are none."""
    return a.sweep.differences(b.sweep)
