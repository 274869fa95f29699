"""Figures of the serving tier, on the same path its tests take (tooling/serving_stack.py).

  bench/serving_tier [--no-cache] [--vehicle REF] [--json]

Prints: the CPU vehicle's build time (cold with --no-cache, warm otherwise, or not built with
--vehicle), time to healthy on the first and the second start (compose's own healthcheck, as
shipped: interval 30 s), smoke's wall time, and the shutdown time of `docker compose stop`.
Target for the tier in CI: at most 8 minutes added on a warm run, 15 on a cold one.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time


from contract import pins
from tooling import serving_stack
from door import children


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-cache", action="store_true", help="build the vehicle with no layer cache (cold)")
    parser.add_argument("--vehicle", help="use this vehicle image instead of building one")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = {}
    vehicle = args.vehicle or pins.CPU_VEHICLE_TAG
    if not args.vehicle:
        argv = [sys.executable, str(serving_stack.REPO / "build.py"), "vehicle", "--bootstrap", "--tag", vehicle]
        argv += ["--ca-cert", str(serving_stack.CA_BUNDLE)] if serving_stack.CA_BUNDLE.is_file() else []
        argv += ["--no-cache"] if args.no_cache else []
        started = time.monotonic()
        children.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=None, text=False)
        figures["vehicle_build_cold_s" if args.no_cache else "vehicle_build_warm_s"] = time.monotonic() - started
    with tempfile.TemporaryDirectory(prefix="vllm-turing-serving-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        started = time.monotonic()
        serving_stack.make_tiny_model(vehicle, tmp / "models")
        figures["tiny_model_s"] = time.monotonic() - started
        stack = serving_stack.Stack(project=f"vllm-turing-bench-{os.getpid()}", image=vehicle,
                                    models_dir=tmp / "models", workdir=tmp)
        try:
            figures["time_to_healthy_first_s"] = stack.up(timeout=600)
            _, report, figures["smoke_wall_s"] = serving_stack.smoke(stack.url, "--modalities", "text")
            figures["smoke_ok"] = bool(report and report.get("ok"))
            figures["shutdown_s"] = stack.stop()
            started = time.monotonic()
            stack.compose("start")
            stack.wait_healthy(600)
            figures["time_to_healthy_second_s"] = time.monotonic() - started
            figures["shutdown_second_s"] = stack.stop()
        finally:
            stack.down()
    if args.json:
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:28} {value:8.1f}" if isinstance(value, float) else f"{key:28} {value}")
    return 0

