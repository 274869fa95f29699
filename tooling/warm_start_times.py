"""Cold and warm starts of the real CPU server with compilation on (no --enforce-eager), on the
path the serving tier takes (tooling/warm_start.py): the shipped compose.yaml, the shipped
env file, the tiny Gemma 4.

  bench/warm_start [--vehicle REF] [--no-control] [--json]

Prints time to healthy (`docker compose up -d` to the first 200 from /health) for
  cold      fresh volumes: vLLM compiles and saves the compiled model under VLLM_CACHE_ROOT
  warm      after `docker compose down` (container gone, named volumes kept), same settings
  control   after the VLLM_CACHE_ROOT volume alone was removed (page cache and the other volumes
            as warm had them): what the compile cache itself saves (--no-control skips it)
with warm/cold and warm/control, how many files the cold start left in inductor's cache on the
VLLM_CACHE_ROOT volume and how many the warm one wrote (0: every compile reused; the vehicle compiles
without vLLM's AOT artefact, base/cpu/Dockerfile says why), and each start's report line
(entrypoint/start_report.py).
Target (issue 29): warm at most 60 % of cold.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile


from contract import pins
from tooling import serving_stack, warm_start

TIMEOUT_S = 1800


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vehicle", help="use this vehicle image instead of building one")
    parser.add_argument("--no-control", action="store_true", help="skip the start without the compile cache")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    vehicle = args.vehicle or pins.CPU_VEHICLE_TAG
    if not args.vehicle:
        serving_stack.build_vehicle(vehicle)
    figures, reports = {}, {}
    with tempfile.TemporaryDirectory(prefix="vllm-turing-warm-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        serving_stack.make_tiny_model(vehicle, tmp / "models")
        stack = warm_start.compile_stack(vehicle, tmp / "models", tmp, f"vllm-turing-warm-bench-{os.getpid()}")
        try:
            starts = {"cold": warm_start.timed_start(stack, TIMEOUT_S)}
            starts["warm"] = warm_start.restart_on_kept_volumes(stack, TIMEOUT_S)
            if not args.no_control:
                warm_start.drop_cache_volume(stack)
                starts["control"] = warm_start.timed_start(stack, TIMEOUT_S)
        except (RuntimeError, subprocess.SubprocessError) as error:
            print(f"bench/warm_start: {error}", file=sys.stderr)
            return 1
        finally:
            stack.down()
    for name, start in starts.items():
        figures[f"{name}_s"] = round(start.seconds, 1)
        match = warm_start.REPORT.search(start.logs)
        reports[name] = match.group(0) if match else None
    figures["warm_over_cold"] = round(starts["warm"].seconds / starts["cold"].seconds, 2)
    if "control" in starts:
        figures["warm_over_control"] = round(starts["warm"].seconds / starts["control"].seconds, 2)
    figures["cold_left_inductor_files"] = len(starts["cold"].inductor_files)
    figures["warm_wrote_inductor_files"] = len(warm_start.written_by(starts["cold"].inductor_files, starts["warm"]))
    if args.json:
        print(json.dumps({**figures, "reports": reports}, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:30} {value:8.2f}" if isinstance(value, float) else f"{key:30} {value}")
        for name, line in reports.items():
            print(f"{name:8} {line or '(no start report in the log)'}")
    return 0

