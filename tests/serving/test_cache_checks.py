"""The preflight's cache check against the real vehicle, on caches a careless operator hands it: a
read-only cache volume and a cache root that is a FIFO are warnings in `check`, and nothing is
written to them, nothing hangs. (The cache a cold start fills and a warm start reuses is proven in
test_serving_path.py, on the shipped stack's own restart.)
"""
import json
import subprocess

import yaml

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
