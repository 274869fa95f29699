"""A sweep's folder: where each run's raw JSON lives, and which runs are complete."""
from __future__ import annotations

import json
import pathlib

from door.problem import UsageError

from .sweep_runs import FORMAT, Run, Sweep
from door import files

SWEEP_FILE = "sweep.json"
RUNS = "runs"          # complete raw `vllm bench serve` JSON, one per run
PARTIAL = ".partial"   # where a run writes before it is checked and moved into runs/
ERRORS = "errors"      # runs whose `vllm bench serve` exited non-zero
LOGS = "logs"          # each run's console output

# Keys of a saved `vllm bench serve` result that the report reads.
REQUIRED_KEYS = ("completed", "failed", "num_prompts", "max_concurrency", "output_throughput",
                 "total_token_throughput", "median_ttft_ms", "median_tpot_ms", "seed")


def run_path(folder: pathlib.Path, run: Run) -> pathlib.Path:
    return folder / RUNS / f"{run.name}.json"


def error_path(folder: pathlib.Path, run: Run) -> pathlib.Path:
    return folder / ERRORS / f"{run.name}.json"


def partial_name(run: Run) -> str:
    return f"{PARTIAL}/{run.name}.json"


def load_json(path: pathlib.Path):
    try:
        return files.own_json(files.read_own(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def incomplete_reason(result, run: Run) -> str | None:
    """Why a saved result is not a finished run of `run` (None: it is)."""
    if not isinstance(result, dict):
        return "missing or not JSON"
    missing = [k for k in REQUIRED_KEYS if k not in result]
    if missing:
        return f"lacks {', '.join(missing)}"
    if str(result["seed"]) != str(run.seed) or result["max_concurrency"] != run.concurrency:
        return (f"is seed {result['seed']} at concurrency {result['max_concurrency']}, "
                f"expected seed {run.seed} at concurrency {run.concurrency}")
    if result["completed"] + result["failed"] != run.num_prompts:
        return f"accounts for {result['completed'] + result['failed']} of {run.num_prompts} requests"
    return None


def pending_runs(folder: pathlib.Path, planned: list[Run]) -> list[Run]:
    """The runs an (interrupted) sweep still has to do: those without a complete result."""
    return [r for r in planned if incomplete_reason(load_json(run_path(folder, r)), r) is not None]


def load_sweep(folder: pathlib.Path) -> tuple[Sweep, dict] | None:
    """(definition, endpoint record) stored in a sweep folder, None when there is none."""
    data = load_json(folder / SWEEP_FILE)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "sweep" not in data:
        raise UsageError(f"{folder / SWEEP_FILE}: not a sweep record of format {FORMAT}; "
                        "point at a folder written by bench/serve_sweep run")
    return Sweep.from_dict(data["sweep"]), data.get("endpoint", {})


def sweep_record(sweep: Sweep, endpoint: dict) -> str:
    return json.dumps({"format": FORMAT, "sweep": sweep.to_dict(), "endpoint": endpoint}, indent=2)
