"""The preflight's cache check against the real vehicle, on caches a careless operator hands it: a
read-only cache volume and a cache root that is a FIFO are warnings in `check`, and nothing is
written to them, nothing hangs. The shipped compose service with its compile cache on a tmpfs that
Docker mounts noexec, or on one too small, is refused by the preflight before vLLM is started (no
model load: each case costs seconds). (The cache a cold start fills and a warm start reuses is
proven in test_serving_path.py, on the shipped stack's own restart.)
"""
import json
import os
import subprocess
import time

import pytest
import yaml

from entrypoint.checks import cache
from tests.serving.conftest import FIGURES
from tooling import serving_stack

CACHE_ROOT = yaml.safe_load(serving_stack.COMPOSE_FILE.read_text())["services"][serving_stack.SERVICE]["environment"][
    "VLLM_CACHE_ROOT"]


def check_json(vehicle: str, models_dir, *docker_args: str, shell: str | None = None) -> dict:
    """The vehicle's `check --json` (or `shell`, a sh -c line that ends in it), checks by name."""
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{models_dir.resolve()}:/models:ro",
            "-e", f"MODEL=/models/{serving_stack.MODEL_NAME}", "-e", "SKIP_CHECKS=devices,driver,torch,clamp,fit",
            *docker_args]
    argv += [vehicle, "check", "--json"] if shell is None else ["--entrypoint", "sh", vehicle, "-c", shell]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return {check["name"]: check for check in json.loads(done.stdout)["checks"]}


def test_a_read_only_cache_volume_fails_both_checks_and_stays_untouched(vehicle, models_dir, tmp_path):
    empty = tmp_path / "ro-cache"
    empty.mkdir()
    checks = check_json(vehicle, models_dir, "-v", f"{empty}:{CACHE_ROOT}:ro", "-e", f"VLLM_CACHE_ROOT={CACHE_ROOT}")
    # vLLM's compile makes its folder there and would die after the load: both checks say so
    assert checks["cache"]["status"] == "fail", checks["cache"]
    assert "not writable (read-only filesystem)" in checks["cache"]["message"]
    assert list(empty.iterdir()) == []
    assert checks["disk"]["status"] == "fail" and "read-only" in checks["disk"]["message"]


def test_a_cache_root_that_is_a_fifo_is_a_warning_and_check_does_not_hang(vehicle, models_dir):
    checks = check_json(vehicle, models_dir, "-e", "VLLM_CACHE_ROOT=/tmp/fifo",
                        shell="mkfifo /tmp/fifo && exec python3 -m entrypoint check --json")
    assert checks["cache"]["status"] == "warn", checks["cache"]
    assert "is a named pipe (FIFO), not a directory" in checks["cache"]["message"]


# The compile cache's volume replaced by a tmpfs (the service's `tmpfs:` key: Docker's --tmpfs, noexec
# unless `exec` is given). The preflight's one line for each: the check that fails, what it names, its fix.
CACHE_TMPFS = {
    "noexec": (f"{CACHE_ROOT}:size=8g,mode=1777", "cache",
               f"VLLM_CACHE_ROOT {CACHE_ROOT} is on {CACHE_ROOT} (tmpfs), mounted noexec", cache.NOEXEC_FIX),
    "too small": (f"{CACHE_ROOT}:exec,size=64m,mode=1777", "disk",
                  f"vLLM cache {CACHE_ROOT}: 0.06 GiB free on that filesystem, need 2.00 GiB",
                  "free space there or point VLLM_CACHE_ROOT at a larger volume"),
}


@pytest.mark.parametrize("case", list(CACHE_TMPFS))
def test_a_cache_mount_noexec_or_too_small_is_refused_before_the_load(vehicle, models_dir, tmp_path, case):
    mount, check, says, fix = CACHE_TMPFS[case]
    stack = serving_stack.Stack(project=f"vllm-turing-cache-mount-{case.replace(' ', '-')}-{os.getpid()}", image=vehicle,
                                models_dir=models_dir, workdir=tmp_path, unmounted=(CACHE_ROOT,),
                                service_lines=(f"tmpfs: {json.dumps([mount])}",))
    started = time.monotonic()
    try:
        run = stack.compose("run", "--rm", "--no-deps", serving_stack.SERVICE, timeout=300, check=False)
    finally:
        stack.down()
    FIGURES[f"cache_mount_{case.replace(' ', '_')}_refused_s"] = round(time.monotonic() - started, 1)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    [line] = [line for line in out.splitlines() if line.startswith("FAIL")]  # the one check that failed
    assert line.split()[1] == check and says in line and f"-> fix: {fix}" in line, line
    # refused before vLLM was started: no exec, no model load
    assert "vllm-turing: exec" not in out and "Starting to load model" not in out, out[-3000:]
