"""PNG plots beside the markdown: one image a person opens instead of reading the table.

- a sweep (bench/serve_sweep report): total throughput and median TTFT against concurrency, one line per
  input length, A and B side by side on shared axes (lowest-highest repeat as error bars);
- records (bench/serve_sweep record / compare): each figure of the records as bars, side by side;
- depth probes (bench/serve_sweep depth): TTFT and decode rate against depth;
- two servers on one host (bench/two_models): each figure as bars, grouped by model, one per condition.
matplotlib with the Agg backend: no display needed. The figures are the ones the markdown holds.
"""
from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .sweep_tables import Endpoint, Spread, input_label  # noqa: E402

DPI = 110


def _errorbar(ax, xs, spreads: list[Spread | None], label: str) -> None:
    pts = [(x, s) for x, s in zip(xs, spreads) if s is not None]
    if not pts:
        return
    x = [p[0] for p in pts]
    y = [p[1].mean for p in pts]
    err = [[p[1].mean - p[1].low for p in pts], [p[1].high - p[1].mean for p in pts]]
    ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)


def sweep_png(endpoints: list[Endpoint], path: pathlib.Path) -> pathlib.Path:
    """Rows: total tok/s, TTFT ms; columns: the endpoints (A, B), y axes shared per row."""
    fig, axes = plt.subplots(2, len(endpoints), figsize=(6 * len(endpoints), 7.5), squeeze=False,
                             sharey="row", sharex=True)
    for col, ep in enumerate(endpoints):
        for inp in dict.fromkeys(c.input_len for c in ep.cells):
            cells = sorted((c for c in ep.cells if c.input_len == inp), key=lambda c: c.concurrency)
            xs = [c.concurrency for c in cells]
            label = f"input {input_label(inp)}"
            _errorbar(axes[0][col], xs, [c.total_tok_s for c in cells], label)
            _errorbar(axes[1][col], xs, [c.ttft_ms for c in cells], label)
        axes[0][col].set_title(ep.label)
        axes[0][col].set_ylabel("total output tok/s (all streams)")
        axes[1][col].set_ylabel("median TTFT ms")
        axes[1][col].set_xlabel("concurrency (requests in flight)")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({c.concurrency for c in ep.cells}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.grid(True, alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize="small")
    sw = endpoints[0].sweep
    fig.suptitle(f"Serving sweep: {' vs '.join(e.label for e in endpoints)} "
                 f"(output {sw.output_len if sw.output_len is not None else 'from the dataset'} tokens, "
                 f"{sw.repeats} repeat(s): mean, bars lowest-highest)")
    return _save(fig, path)


RECORD_FIGURES = (  # (title, attribute, unit)
    ("prefill tok/s", "prefill_tok_s", "tok/s"),
    ("decode tok/s (all streams)", "decode_tok_s", "tok/s"),
    ("median TTFT", "median_ttft_ms", "ms"),
    ("mean TPOT (server)", "server_mean_tpot_ms", "ms"),
)


def records_png(records, path: pathlib.Path) -> pathlib.Path:
    """One panel per figure, one bar per record; a figure a record lacks is marked, not drawn."""
    fig, axes = plt.subplots(1, len(RECORD_FIGURES), figsize=(3.6 * len(RECORD_FIGURES), 4.2))
    labels = [r.label for r in records]
    for ax, (title, attr, unit) in zip(axes, RECORD_FIGURES):
        values = [getattr(r, attr) for r in records]
        bars = ax.bar(labels, [v or 0 for v in values], color=[f"C{i}" for i in range(len(records))])
        for bar, v in zip(bars, values):
            ax.annotate("not measured" if v is None else f"{v:.1f}", (bar.get_x() + bar.get_width() / 2,
                        bar.get_height()), ha="center", va="bottom", fontsize="small")
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Benchmark record: {records[0].workload.describe()}", fontsize="medium")
    return _save(fig, path)


def depth_png(label: str, rows, path: pathlib.Path) -> pathlib.Path:
    """TTFT and decode tok/s against prompt depth; a decode rate not measured is left out."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    depths = [r.depth for r in rows]
    left.plot(depths, [r.timing.ttft_s for r in rows], marker="o")
    left.set_ylabel("TTFT s")
    measured = [(r.depth, r.timing.decode_tok_s) for r in rows if r.timing.decode_tok_s is not None]
    right.plot([d for d, _ in measured], [v for _, v in measured], marker="o")
    right.set_ylabel("decode tok/s (one stream)")
    if len(measured) < len(rows):
        right.set_title(f"{len(rows) - len(measured)} depth(s) not measured", fontsize="small")
    for ax in (left, right):
        ax.set_xlabel("prompt depth (tokens)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"Depth probes: {label}")
    return _save(fig, path)


def pair_png(panels, title: str, path: pathlib.Path) -> pathlib.Path:
    """One panel per figure (pair.panels), a group of bars per model, a bar per condition; a figure
    not measured is marked, not drawn."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4.4))
    for ax, panel in zip(axes, panels):
        width = 0.8 / max(len(panel.series), 1)
        for i, (condition, values) in enumerate(panel.series):
            xs = [m + (i - (len(panel.series) - 1) / 2) * width for m in range(len(panel.models))]
            bars = ax.bar(xs, [v or 0 for v in values], width, label=condition, color=f"C{i}")
            for bar, v in zip(bars, values):
                ax.annotate("not measured" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}",
                            (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                            fontsize="x-small")
        ax.set_xticks(range(len(panel.models)), panel.models)
        ax.set_title(panel.title)
        ax.set_ylabel(panel.unit)
        ax.grid(True, axis="y", alpha=0.3)
        tallest = max((v for _, values in panel.series for v in values if v is not None), default=0)
        ax.set_ylim(0, 1.25 * tallest or 1)   # room for the legend's row above the bars
        ax.legend(fontsize="small", loc="upper center", ncol=len(panel.series))
    fig.suptitle(title, fontsize="medium")
    return _save(fig, path)

def _save(fig, path: pathlib.Path) -> pathlib.Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
