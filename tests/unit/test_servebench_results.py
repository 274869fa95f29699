"""Resume decisions and the report, on result files in `vllm bench serve`'s saved format."""
import json
import subprocess
import sys

import pytest

from tooling.servebench import driver, results, sweep_tables
from door.problem import UsageError
from tooling.servebench.sweep_runs import Sweep, runs
from tests import REPO

SWEEP = Sweep(concurrencies=(1, 4), input_lens=(512,), output_len=128, repeats=2)


def vllm_result(run, *, tpot_ms=20.0, ttft_ms=100.0, out_tok_s=50.0, failed=0):
    """The fields of a `vllm bench serve --save-result` file the report reads, plus
    the --metadata bench/serve_sweep adds (values as strings, as vLLM stores them)."""
    return {"date": "20261130-000000", "backend": "openai", "model_id": "m", "num_prompts": run.num_prompts,
            "run": run.name, "seed": str(run.seed), "repeat": str(run.repeat), "max_concurrency": run.concurrency,
            "completed": run.num_prompts - failed, "failed": failed, "output_throughput": out_tok_s,
            "total_token_throughput": out_tok_s * 5, "median_ttft_ms": ttft_ms, "median_tpot_ms": tpot_ms,
            "mean_tpot_ms": tpot_ms}


def sweep_folder(tmp_path, name, sweep=SWEEP, label=None, values=None):
    folder = tmp_path / name
    driver.prepare_folder(folder, sweep, {"label": label or name})
    for run in runs(sweep):
        if values is None or run in values:
            kwargs = (values or {}).get(run, {})
            results.run_path(folder, run).write_text(json.dumps(vllm_result(run, **kwargs)))
    return folder


def test_fresh_folder_has_every_run_pending(tmp_path):
    driver.prepare_folder(tmp_path / "s", SWEEP, {})
    assert results.pending_runs(tmp_path / "s", runs(SWEEP)) == runs(SWEEP)


def test_complete_runs_are_skipped_and_damaged_ones_redone(tmp_path):
    folder = sweep_folder(tmp_path, "s")
    planned = runs(SWEEP)
    assert results.pending_runs(folder, planned) == []
    truncated, other_seed, short = planned[0], planned[1], planned[2]
    text = results.run_path(folder, truncated).read_text()
    results.run_path(folder, truncated).write_text(text[: len(text) // 2])
    results.run_path(folder, other_seed).write_text(json.dumps({**vllm_result(other_seed), "seed": "5"}))
    results.run_path(folder, short).write_text(json.dumps({**vllm_result(short), "completed": 1}))
    assert results.pending_runs(folder, planned) == [truncated, other_seed, short]
    assert "seed 5" in results.incomplete_reason(json.loads(results.run_path(folder, other_seed).read_text()), other_seed)


def test_resuming_with_another_definition_is_refused(tmp_path):
    folder = sweep_folder(tmp_path, "s")
    driver.prepare_folder(folder, SWEEP, {})  # same sweep: fine
    with pytest.raises(UsageError, match="differs in repeats, base_seed"):
        driver.prepare_folder(folder, Sweep(concurrencies=(1, 4), input_lens=(512,), repeats=3, base_seed=1), {})


def test_cell_spread_over_repeats(tmp_path):
    r = {run.name: run for run in runs(SWEEP)}
    values = {r["c1-in512-out128-r0"]: dict(tpot_ms=20.0, ttft_ms=100.0, out_tok_s=50.0),
              r["c1-in512-out128-r1"]: dict(tpot_ms=25.0, ttft_ms=120.0, out_tok_s=40.0),
              r["c4-in512-out128-r0"]: dict(tpot_ms=40.0, out_tok_s=100.0, failed=3)}
    ep = sweep_tables.load_endpoint(sweep_folder(tmp_path, "s", values=values))
    c1, c4 = ep.cell(1, 512), ep.cell(4, 512)
    # per-stream: 1000/20 = 50 and 1000/25 = 40 -> mean 45, range 40-50
    assert (c1.stream_tok_s.mean, c1.stream_tok_s.low, c1.stream_tok_s.high) == (45.0, 40.0, 50.0)
    assert (c1.ttft_ms.mean, c1.total_tok_s.mean) == (110.0, 45.0)
    assert (c4.failed, c4.requests, c4.runs_done, c4.runs_planned) == (3, 32, 1, 2)
    text = sweep_tables.render([ep], [148.8])
    assert "| 1 | 512 | 45.0 (40.0–50.0) | 45.0 (40.0–50.0) | 110 (100–120) | 0/16 |" in text
    assert "| 4 | 512 | 100.0 | 25.0 | 100 | 3/32 (1 run(s) missing) |" in text
    # 45 / 148.8 = 30.2 %
    assert "| s | 512 | 45.0 (40.0–50.0) | 148.8 | 30.2% |" in text


def test_a_b_side_by_side(tmp_path):
    a = sweep_folder(tmp_path, "a", label="QAT")
    slower = {run: dict(tpot_ms=40.0, out_tok_s=25.0) for run in runs(SWEEP)}
    b = sweep_folder(tmp_path, "b", label="bf16", values=slower)
    text = sweep_tables.render([sweep_tables.load_endpoint(a), sweep_tables.load_endpoint(b)], [148.8, 60.3])
    assert "| c | input | QAT | bf16 | bf16 vs QAT |" in text
    assert "| 1 | 512 | 50.0 (50.0–50.0) | 25.0 (25.0–25.0) | -50.0% |" in text
    assert "| bf16 | 512 | 25.0 (25.0–25.0) | 60.3 | 41.5% |" in text
    assert "### failed requests" in text


def serve_report(*args):
    return subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), "report", *map(str, args)],
                          capture_output=True, text=True)


def test_report_cli_refuses_sweeps_that_did_not_share_seeds(tmp_path):
    a = sweep_folder(tmp_path, "a")
    b = sweep_folder(tmp_path, "b", sweep=Sweep(concurrencies=(1, 4), input_lens=(512,), repeats=2, base_seed=9))
    done = serve_report(a, b)
    assert done.returncode == 2 and "base_seed" in done.stderr and "Traceback" not in done.stderr


def test_report_cli_needs_one_ceiling_per_folder(tmp_path):
    a, b = sweep_folder(tmp_path, "a"), sweep_folder(tmp_path, "b")
    assert serve_report(a, b, "--ceiling", "148.8").returncode == 2
    done = serve_report(a, b, "--ceiling", "148.8", "--ceiling", "60.3", "--output", tmp_path / "r.md")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.md").read_text() == done.stdout


PLOT_SWEEP = Sweep(concurrencies=(1, 2, 4, 8), input_lens=(512, 4096), output_len=128, repeats=2)


def plot_folder(tmp_path, name, scale):
    values = {run: {"out_tok_s": scale * 40 * run.concurrency ** 0.8 * (1 if run.input_len == 512 else 0.6)
                            * (1 + 0.05 * run.repeat),
                    "ttft_ms": 80 * run.concurrency * (1 if run.input_len == 512 else 5) / scale}
              for run in runs(PLOT_SWEEP)}
    return sweep_folder(tmp_path, name, PLOT_SWEEP, values=values)


def test_report_writes_the_ab_plot_beside_the_markdown(tmp_path):
    a, b = plot_folder(tmp_path, "qat", 1.0), plot_folder(tmp_path, "bf16", 0.7)
    out = tmp_path / "ab.md"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), "report", str(a), str(b), "--output", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    png = tmp_path / "ab.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot written to {png}" in run.stderr
    single = subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), "report", str(a)],
                            capture_output=True, text=True, timeout=120)
    assert single.returncode == 0 and (a / "report.png").read_bytes()[:4] == b"\x89PNG"


def test_a_burst_tpot_gives_no_per_stream_rate(tmp_path):
    one = Sweep(concurrencies=(1,), input_lens=(512,), output_len=128, repeats=1)
    folder = sweep_folder(tmp_path, "burst", one, values={r: {"tpot_ms": 0.004} for r in runs(one)})
    ep = sweep_tables.load_endpoint(folder)
    assert ep.cells[0].stream_tok_s is None and ep.cells[0].total_tok_s.mean == 50.0
    assert "| 1 | 512 | 50.0 | — | 100 | 0/" in sweep_tables.render([ep], [])
