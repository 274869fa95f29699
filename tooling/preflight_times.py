"""Median wall time of the entrypoint's `check`.

  bench/preflight --image REF [--runs 7] [--model DIR] [--env K=V ...]   in a container (docker run)
  bench/preflight --local [--runs 7] [--model DIR] [--env K=V ...]       this checkout, outside a container
  bench/preflight --fit-decision --table FIT_TABLE --config CONFIG_JSON [--cc CC --limit BYTES]
        the entrypoint's fit decision from the fit table's verdicts alone (no subprocess, no vLLM import); --cc and --limit default to Turing's

Prints the median of the whole run (process or container start included), of the checks as the
report times them, and of every check, slowest first; with --local also the interpreter's start and the
entrypoint's imports alone (`python3 -c pass` and `python3 -c "import entrypoint.start"`, same environment),
so that wall = start + imports + checks + the rest (report, exit). Targets: <= 1 s without GPU, <= 5 s with GPU, torch import included.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

from contract.devices import TURING
from contract.model_config import ConfigProblem, parse_config
from door import files
from door import children
from door.problem import Problem


def command(args) -> list[str]:
    env = [f"MODEL={'/models/bench' if args.model and args.image else args.model or 'google/gemma-4-E2B-it'}",
           *args.env]
    if args.local:
        return ["env", f"PYTHONPATH={REPO}", *env, sys.executable, "-m", "entrypoint", "check", "--json"]
    argv = ["docker", "run", "--rm"]
    for pair in env:
        argv += ["-e", pair]
    if args.model:
        argv += ["-v", f"{os.path.abspath(args.model)}:/models/bench:ro"]
    return argv + [*args.docker_arg, args.image, "check", "--json"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--image", help="image reference to run `check` in")
    where.add_argument("--local", action="store_true", help="run this checkout's entrypoint directly")
    where.add_argument("--fit-decision", action="store_true", help="time the fit table lookup alone")
    parser.add_argument("--table", help="fit table for --fit-decision (e.g. docker cp of /opt/vllm-turing/fit-table.json)")
    parser.add_argument("--config", help="model config.json for --fit-decision")
    parser.add_argument("--cc", type=int, default=TURING.cc, help="compute capability for --fit-decision")
    parser.add_argument("--limit", type=int, default=TURING.limit, help="shared-memory limit for --fit-decision")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--model", help="model directory (mounted at /models/bench in the container)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="extra environment")
    parser.add_argument("--docker-arg", action="append", default=[], help="extra `docker run` argument")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.fit_decision:
        if not (args.table and args.config):
            parser.error("--fit-decision needs --table and --config")
        try:
            return fit_decision(args)
        except Problem as problem:
            print(f"bench/preflight: {problem}; give a model's config.json", file=sys.stderr)
            return 2
    argv = command(args)
    walls, checks, timed = [], [], {}
    for _ in range(args.runs):
        started = time.perf_counter()
        done = children.run(argv, cwd=REPO)
        walls.append(time.perf_counter() - started)
        try:
            report = files.own_json(done.stdout)
        except json.JSONDecodeError:
            print(f"bench/preflight: `check` exited {done.returncode} without a report: "
                  f"{(done.stderr.strip().splitlines() or [''])[-1]}", file=sys.stderr)
            return 1
        checks.append(report["elapsed_s"])
        for check in report["checks"]:
            timed.setdefault(check["name"], []).append(check["elapsed_s"])
    baseline = None
    if args.image:  # what docker run + python3 startup costs without the entrypoint
        runs = []
        for _ in range(args.runs):
            started = time.perf_counter()
            children.run(["docker", "run", "--rm", "--entrypoint", "python3", args.image, "-c", "pass"], check=True, text=False)
            runs.append(time.perf_counter() - started)
        baseline = statistics.median(runs)
    start = imports = None
    if args.local:
        interpreter = argv[:argv.index(sys.executable) + 1]  # env PYTHONPATH=... MODEL=... python3
        start = median_wall([*interpreter, "-c", "pass"], args.runs)
        imports = median_wall([*interpreter, "-c", "import entrypoint.start"], args.runs)
    failed = [c["name"] for c in report["checks"] if c["status"] == "fail"]
    print(f"where:           {'local ' + sys.executable if args.local else 'container ' + args.image}")
    print(f"device:          {report['device'] or 'none (' + str(report['device_error']) + ')'}")
    print(f"runs:            {args.runs} (exit {done.returncode}; failed checks: {', '.join(failed) or 'none'})")
    print(f"median wall:     {statistics.median(walls):.3f} s  (min {min(walls):.3f}, max {max(walls):.3f})")
    if baseline is not None:
        print(f"median baseline: {baseline:.3f} s  (docker run of `python3 -c pass`: container start alone)")
    if start is not None:
        print(f"median start:    {start:.3f} s  (`python3 -c pass`, same environment)")
        print(f"median imports:  {imports - start:.3f} s  (`import entrypoint.start`, less the start)")
    print(f"median checks:   {statistics.median(checks):.3f} s  (as the report times them)")
    medians = {name: statistics.median(times) for name, times in timed.items()}
    for name in sorted(medians, key=medians.get, reverse=True):  # every check, slowest first
        last = next((c for c in report["checks"] if c["name"] == name), {"status": "absent", "message": ""})
        print(f"{name + ' check:':<20}{medians[name] * 1000:8.1f} ms median (last run {last['status']}: "
              f"{last['message'][:120]})")
    return 0


def median_wall(argv: list[str], runs: int) -> float:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        children.run(argv, check=True, cwd=REPO, text=False)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def fit_decision(args) -> int:
    """Median time of the lookup the entrypoint makes before it would start the full fit check."""
    from patches.fitcheck.lookup import lookup

    config = files.read_object(args.config, f"--config {args.config}")  # the model check reads it, not the lookup
    try:
        named = parse_config(config).names_a_model
    except ConfigProblem as problem:
        raise Problem(f"--config {args.config}: {problem}") from None
    if not named:
        raise Problem(f"--config {args.config} names neither architectures nor model_type")
    times = []
    for _ in range(args.runs):
        started = time.perf_counter()
        found = lookup(args.table, config, args.cc, args.limit, args.config)
        times.append(time.perf_counter() - started)
    outcome = (f"hit, {found.launches} launches, {'all fit' if found.all_fit else 'some do not fit'}"
               if found.hit else f"miss ({found.miss}): the full check would run")
    print(f"fit decision:    {statistics.median(times) * 1000:.2f} ms median of {args.runs} (cc {args.cc}, "
          f"limit {args.limit}): {outcome}")
    return 0

