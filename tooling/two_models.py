"""Two models on one host, measured (bench/two_models): the units rendered from two env files as
docs/deploy.md ("Two models on one card") tells a user, run on the CPU vehicle with the tiny Gemma 4
as the serving tier runs them (serving_stack.RenderedServers), and each model's latency and
throughput alone, beside the other server idle, and while both serve at once, with bench/serve_sweep's own
streamed requests (tooling/servebench/client.py). The figures, the table and the plot's data are
tooling/servebench/pair.py's.

Order of the phases, so the servers start twice only: A up, A alone; B up, A beside B idle, B beside
A idle, both busy; A stopped, B alone.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time

from tooling.servebench import client, depth, pair, plot, probes
from tooling.servebench.serve_sweep import OneLineErrors
from buildtool.flags import bounded_int
from contract import pins
from tooling import serving_stack
from door.problem import Problem

PROG = "bench/two_models"
MODELS = ("model-a", "model-b")
MAX_MODEL_LEN = 1024
WARM_UP_TOKENS = 8
READY_TIMEOUT_S = 900  # two cold starts side by side on a loaded 2-core host


def parser() -> argparse.ArgumentParser:
    p = OneLineErrors(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=pathlib.Path, help="folder for two_models.md, .json and .png")
    p.add_argument("--vehicle", help=f"the CPU vehicle image to run (default: build {pins.CPU_VEHICLE_TAG})")
    p.add_argument("--requests", type=bounded_int(1, 1000, "a number of requests"), default=12,
                   help="requests per model and phase (default %(default)s)")
    p.add_argument("--concurrency", type=bounded_int(1, 64, "a number of requests in flight"), default=4,
                   help="requests in flight per model; each server's MAX_NUM_SEQS (default %(default)s)")
    p.add_argument("--prompt-tokens", type=bounded_int(16, MAX_MODEL_LEN - 1, "a number of tokens"), default=128,
                   help="prompt length (default %(default)s)")
    p.add_argument("--output-tokens", type=bounded_int(2, MAX_MODEL_LEN - 16, "a number of tokens"), default=64,
                   help="completion length (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    return p


def server_settings(workload: pair.Workload) -> dict[str, str]:
    return {"MAX_MODEL_LEN": str(MAX_MODEL_LEN), "MAX_NUM_SEQS": str(workload.concurrency)}


def warm_up(url: str, model: str) -> None:
    timing = client.stream_completion(url, model, "Warm up.", WARM_UP_TOKENS, secrets.token_hex(6))
    if timing.error:
        raise Problem(f"{model}: the warm-up request failed: {timing.error}")


def sized_prompts(url: str, model: str, workload: pair.Workload) -> list[tuple[str, str]]:
    """(prompt, salt) per request, each exactly prompt_tokens long, sized before any is timed."""
    tok = client.Tokenizer(url, model)
    prompts = []
    for _ in range(workload.requests):
        salt = secrets.token_hex(6)
        prompts.append((depth.sized_prompt(tok.count, workload.prompt_tokens, salt)[0], salt))
    return prompts


def timed_phase(url: str, model: str, condition: str, prompts: list[tuple[str, str]],
                workload: pair.Workload) -> pair.Phase:
    before = client.metrics(url)
    clock0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(workload.concurrency) as pool:
        timings = tuple(pool.map(lambda p: client.stream_completion(url, model, p[0], workload.output_tokens, p[1], clock0),
                                 prompts))
    return pair.Phase(model, condition, timings, probes.server_tpot(client.metrics(url), before, len(prompts)))


def phase(servers: serving_stack.RenderedServers, model: str, condition: str, workload: pair.Workload) -> pair.Phase:
    url = servers.url(model)
    return timed_phase(url, model, condition, sized_prompts(url, model, workload), workload)


def both_busy(servers: serving_stack.RenderedServers, workload: pair.Workload) -> list[pair.Phase]:
    prompts = {m: sized_prompts(servers.url(m), m, workload) for m in MODELS}
    with concurrent.futures.ThreadPoolExecutor(len(MODELS)) as pool:
        futures = [pool.submit(timed_phase, servers.url(m), m, pair.BOTH_BUSY, prompts[m], workload) for m in MODELS]
        return [f.result() for f in futures]


def start(servers: serving_stack.RenderedServers, model: str, say) -> None:
    servers.up(model)
    seconds = servers.wait_healthy(model, READY_TIMEOUT_S)
    warm_up(servers.url(model), model)
    say(f"{model} healthy after {seconds:.0f} s")


def measure(servers: serving_stack.RenderedServers, workload: pair.Workload, say=print) -> list[pair.Phase]:
    a, b = MODELS
    start(servers, a, say)
    phases = [phase(servers, a, pair.ALONE, workload)]
    start(servers, b, say)
    phases += [phase(servers, a, pair.OTHER_IDLE, workload), phase(servers, b, pair.OTHER_IDLE, workload)]
    phases += both_busy(servers, workload)
    servers.stop(a)
    phases.append(phase(servers, b, pair.ALONE, workload))
    for p in phases:
        say(f"{p.model} {p.condition}: {len(p.timings)} requests")
    return phases


def where(vehicle: str, load: tuple[float, float, float]) -> str:
    """When and where, with the host's load average over the last 5 and 15 minutes as the run ended
    (what else ran on the host's cores shows there)."""
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return (f"Measured {today} on a {os.cpu_count()}-core host (load average {load[1]:.1f} over the last 5 minutes, "
            f"{load[2]:.1f} over 15, as the run ended), CPU vehicle {vehicle}, both servers the tiny Gemma 4 "
            "(tests/serving/tiny_gemma4.py) with ENFORCE_EAGER.")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.prompt_tokens + args.output_tokens > MAX_MODEL_LEN:
        parser().error(f"--prompt-tokens {args.prompt_tokens} + --output-tokens {args.output_tokens} exceed the "
                       f"servers' MAX_MODEL_LEN {MAX_MODEL_LEN}; ask for at most {MAX_MODEL_LEN} together")
    workload = pair.Workload(args.requests, args.concurrency, args.prompt_tokens, args.output_tokens)
    vehicle = args.vehicle or pins.CPU_VEHICLE_TAG
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"{PROG}: --out {args.out}: {error.strerror}; give a folder you can write", file=sys.stderr)
        return 2
    try:
        if not args.vehicle:
            serving_stack.build_vehicle(vehicle)
        with tempfile.TemporaryDirectory(prefix="vllm-turing-two-models-") as tmp:
            tmp = pathlib.Path(tmp)
            serving_stack.make_tiny_model(vehicle, tmp / "models")
            servers = serving_stack.RenderedServers(
                project=f"vllm-turing-two-models-{os.getpid()}", image=vehicle, models_dir=tmp / "models",
                workdir=tmp, servers={m: server_settings(workload) for m in MODELS})
            try:
                phases = measure(servers, workload, say)
            finally:
                servers.down()
    except (OSError, RuntimeError, subprocess.SubprocessError, Problem) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    rows = [pair.summarize(p) for p in phases]
    place = where(vehicle, os.getloadavg())
    text = pair.render(rows, workload, place)
    (args.out / "two_models.md").write_text(text)
    (args.out / "two_models.json").write_text(pair.to_json(rows, workload, place))
    plot.pair_png(pair.panels(rows), f"Two models on one host: {workload.describe()}", args.out / "two_models.png")
    print(pair.to_json(rows, workload, place) if args.json else text)
    return 1 if any(r.failed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
