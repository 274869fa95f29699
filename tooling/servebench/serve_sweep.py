"""bench/serve_sweep: `run` a sweep against an endpoint, `report` one sweep folder or two (A/B);
`record` one workload as a benchmark record, `compare` records side by side; `depth` probes."""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import pathlib
import shlex
import shutil
import sys

from contract import pins
from buildtool import endpoint
from buildtool.endpoint.client import MAX_DEADLINE_S, valid_deadline
from door.problem import Problem, UsageError

from . import client, driver, plot, probes, record, sweep_tables, vllm_bench_argv
from .sweep_runs import Sweep, runs

PROG = "bench/serve_sweep"


def int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers, e.g. 1,4,8,16") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def wait_seconds(text: str) -> float:
    """Seconds to wait: 0 (one try) up to a week."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value == 0 or valid_deadline(value)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds from 0 (one try) to {MAX_DEADLINE_S:g} (a week)")
    return value


def run_seconds(text: str) -> float:
    """A run's deadline: more than 0 seconds, up to a week."""
    value = wait_seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds above 0, up to {MAX_DEADLINE_S:g} (a week)")
    return value


def add_run_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(driver.RUN_TIMEOUT_FLAG, type=run_seconds, default=driver.RUN_TIMEOUT_S, metavar="SECONDS",
                   help="stop a `vllm bench serve` run not finished after this long and fail naming the endpoint "
                        "(its own limit is 6 h per request; default %(default)g)")


def output_len(text: str) -> int | None:
    if text == "dataset":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a token count or 'dataset'") from None


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    d = Sweep()
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="endpoint (default %(default)s)")
    p.add_argument("--out", required=True, type=pathlib.Path, help="sweep folder: raw JSON per run; rerun to resume")
    p.add_argument("--label", help="endpoint name in reports (default: the folder name)")
    p.add_argument("--model", help="served model name (default: the first of GET /v1/models)")
    p.add_argument("--tokenizer", help="tokenizer folder (mounted read-only) or Hugging Face id (default: the model)")
    p.add_argument("--image", default=pins.IMAGE_TAG, help="image whose `vllm bench serve` runs (default %(default)s)")
    p.add_argument("--hf-home", help="host folder mounted as HF_HOME for tokenizer downloads")
    p.add_argument("--endpoint", default="/v1/completions", help="API path (default %(default)s)")
    p.add_argument("--concurrency", type=int_list, default=d.concurrencies, metavar="1,4,8,16")
    p.add_argument("--input-len", type=int_list, default=d.input_lens, metavar="512,4096",
                   help="prompt lengths in tokens of the model's tokenizer (random dataset)")
    p.add_argument("--output-len", type=output_len, default=d.output_len, metavar="N|dataset")
    p.add_argument("--repeats", type=int, default=d.repeats)
    p.add_argument("--dataset", choices=("random", "sharegpt"), default=d.dataset)
    p.add_argument("--dataset-file", type=pathlib.Path, help="ShareGPT JSON file (with --dataset sharegpt)")
    p.add_argument("--prompts-per-stream", type=int, default=d.prompts_per_stream,
                   help="requests per run = this x concurrency (default %(default)s)")
    p.add_argument("--num-prompts", type=int, help="fixed requests per run (overrides --prompts-per-stream)")
    p.add_argument("--seed", type=int, default=d.base_seed, help="base seed; each run's seed derives from it")
    p.add_argument("--warmup-prompts", type=int, help="warm-up requests before the first run (default: the largest concurrency; 0: none)")
    p.add_argument("--ready-timeout", type=wait_seconds, default=600, help="seconds to wait for /v1/models (default %(default)s)")
    add_run_timeout(p)
    p.add_argument("--dry-run", action="store_true", help="print the runs and their commands, run nothing")
    endpoint.add_key_argument(p)


def sweep_of(args) -> Sweep:
    if args.dataset_file is not None and not args.dataset_file.is_file():
        raise UsageError(f"--dataset-file {args.dataset_file}: no such file; give the ShareGPT JSON's path")
    return Sweep(concurrencies=args.concurrency, input_lens=args.input_len, output_len=args.output_len,
                 repeats=args.repeats, dataset=args.dataset,
                 dataset_file=args.dataset_file.name if args.dataset_file else None,
                 prompts_per_stream=args.prompts_per_stream, num_prompts=args.num_prompts, base_seed=args.seed)


def cmd_run(args) -> int:
    sweep = sweep_of(args)
    if shutil.which("docker") is None:
        raise UsageError("no docker command on PATH; bench/serve_sweep runs `vllm bench serve` from an image")
    base_url = args.base_url.rstrip("/")
    model = args.model
    if model is None and not args.dry_run:
        model = driver.served_models(base_url, args.ready_timeout)[0]
    elif not args.dry_run:
        served = driver.served_models(base_url, args.ready_timeout)
        if model not in served:
            raise Problem(f"{base_url} serves {served}, not {model!r}; pass one of those as --model")
    model = model or "MODEL"
    target = vllm_bench_argv.Target(base_url=base_url, model=model, tokenizer=args.tokenizer or model,
                            image=args.image, hf_home=args.hf_home, endpoint=args.endpoint)
    folder = args.out
    drv = driver.Driver(sweep, target, folder, dataset_path=args.dataset_file, run_timeout_s=args.run_timeout)
    if args.dry_run:
        for run in runs(sweep):
            argv, _ = drv.argv(run, "DRY-RUN.json", run.name)
            print(f"{run.name} seed {run.seed}: {shlex.join(argv)}")
        return 0
    driver.prepare_folder(folder, sweep, {"label": args.label or folder.name, "base_url": base_url,
                                          "model": model, "image": args.image})
    warmup = max(sweep.concurrencies) if args.warmup_prompts is None else args.warmup_prompts
    driver.sigterm_as_interrupt()
    try:
        return drv.run_all(warmup)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; completed runs are kept in {folder / 'runs'}, run the same command to resume",
              file=sys.stderr)
        return driver.INTERRUPTED


def cmd_report(args) -> int:
    folders = [args.folder] + ([args.folder_b] if args.folder_b else [])
    if args.ceiling and len(args.ceiling) != len(folders):
        raise UsageError(f"{len(args.ceiling)} --ceiling value(s) for {len(folders)} sweep folder(s); "
                        "give one per folder, in the same order")
    endpoints = [sweep_tables.load_endpoint(f) for f in folders]
    if len(endpoints) == 2:
        differs = sweep_tables.seed_mismatch(*endpoints)
        if differs:
            raise UsageError(f"{folders[0]} and {folders[1]} ran different sweeps (differ in {', '.join(differs)}), "
                            "so their prompts and seeds differ; rerun one with the other's options")
    text = sweep_tables.render(endpoints, args.ceiling or [])
    if args.output:
        args.output.write_text(text)
    png = args.output.with_suffix(".png") if args.output else folders[0] / (
        "report.png" if len(folders) == 1 else f"report-vs-{endpoints[1].label}.png")
    plot.sweep_png(endpoints, png)
    print(text, end="")
    print(f"{PROG}: plot written to {png}", file=sys.stderr)
    return 0


def add_endpoint_arguments(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="endpoint (default %(default)s)")
    p.add_argument("--out", required=True, type=pathlib.Path, help=f"folder for {what}")
    p.add_argument("--label", help="endpoint name in the output (default: the folder name)")
    p.add_argument("--model", help="served model name (default: the first of GET /v1/models)")
    p.add_argument("--ready-timeout", type=wait_seconds, default=600, help="seconds to wait for the server (default %(default)s)")
    endpoint.add_key_argument(p)


def add_record_arguments(p: argparse.ArgumentParser) -> None:
    add_endpoint_arguments(p, "record.md, record.json, the raw run JSON and its log")
    image = next(f.default for f in dataclasses.fields(vllm_bench_argv.Target) if f.name == "image")
    p.add_argument("--image", default=image, help="image whose `vllm bench serve` runs (default %(default)s)")
    p.add_argument("--tokenizer", help="tokenizer folder (mounted read-only) or Hugging Face id (default: the model)")
    p.add_argument("--hf-home", help="host folder mounted as HF_HOME for tokenizer downloads")
    p.add_argument("--dataset", choices=("random", "sharegpt"), default="random")
    p.add_argument("--dataset-file", type=pathlib.Path, help="local ShareGPT JSON (with --dataset sharegpt); nothing is downloaded")
    p.add_argument("--input-len", type=int, default=512, help="random dataset prompt length in tokens (default %(default)s)")
    p.add_argument("--output-len", type=output_len, default=128, metavar="N|dataset",
                   help="output tokens (default %(default)s; 'dataset': ShareGPT's own lengths)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight (default %(default)s)")
    p.add_argument("--num-prompts", type=int, default=1000, help="requests in the run (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cap-minutes", type=float, help="stop the run after this long and record how far it got")
    add_run_timeout(p)
    p.add_argument("--start", metavar="CMD", help="command that starts the server (e.g. 'docker compose up -d'); "
                   "the time from it to /health 200 is the readiness time")
    p.add_argument("--container", help="server container whose memory is sampled when the host has no GPU")


def record_job(args) -> probes.RecordJob:
    if args.dataset_file is not None and not args.dataset_file.is_file():
        raise UsageError(f"--dataset-file {args.dataset_file}: no such file; give the ShareGPT JSON's local path")
    if args.cap_minutes is not None and args.cap_minutes <= 0:
        raise UsageError(f"--cap-minutes {args.cap_minutes:g}: expected a positive number of minutes")
    sweep = Sweep(concurrencies=(args.concurrency,), input_lens=(args.input_len,), output_len=args.output_len,
                  repeats=1, dataset=args.dataset, dataset_file=args.dataset_file.name if args.dataset_file else None,
                  num_prompts=args.num_prompts, base_seed=args.seed)
    return probes.RecordJob(base_url=args.base_url.rstrip("/"), out=args.out, label=args.label or args.out.name,
                            model=args.model, target_image=args.image, tokenizer=args.tokenizer,
                            hf_home=args.hf_home, sweep=sweep, dataset_path=args.dataset_file,
                            cap_s=args.cap_minutes * 60 if args.cap_minutes else None, start=args.start,
                            container=args.container, ready_timeout=args.ready_timeout,
                            run_timeout_s=args.run_timeout)


def cmd_record(args) -> int:
    job = record_job(args)
    if shutil.which("docker") is None:
        raise UsageError("no docker command on PATH; bench/serve_sweep runs `vllm bench serve` from an image")
    rec, rc = probes.run_record(job)
    print(record.render([rec]), end="")
    return rc


def cmd_compare(args) -> int:
    records = [probes.load_record(p) for p in args.records]
    differs = record.workload_mismatch(records)
    if differs:
        raise UsageError(f"the records ran different workloads (differ in {', '.join(differs)}); "
                        "record both with the same options")
    text = record.render(records)
    if args.output:
        args.output.write_text(text)
    first = args.records[0] if args.records[0].is_dir() else args.records[0].parent
    png = args.output.with_suffix(".png") if args.output else first / "compare.png"
    plot.records_png(records, png)
    print(text, end="")
    print(f"{PROG}: plot written to {png}", file=sys.stderr)
    return 0


def add_depth_arguments(p: argparse.ArgumentParser) -> None:
    add_endpoint_arguments(p, "depth.md and depth.json")
    p.add_argument("--depths", type=int_list, required=True, metavar="12700,67000,213000",
                   help="prompt depths in tokens of the served model's tokenizer")
    p.add_argument("--decode-tokens", type=int, default=128, help="tokens generated per probe (default %(default)s)")
    p.add_argument("--sessions", type=int, default=0, metavar="N",
                   help="capacity probe: N full-context sessions at once (default: none)")
    p.add_argument("--session-depth", type=int, help="tokens per session (default: max_model_len - decode tokens)")


def cmd_depth(args) -> int:
    if min(args.depths) < 1 or args.decode_tokens < 2 or args.sessions < 0:
        raise UsageError("depths must be positive, --decode-tokens at least 2 (decode speed needs two tokens), "
                        "--sessions zero or more")
    job = probes.DepthJob(base_url=args.base_url.rstrip("/"), out=args.out, label=args.label or args.out.name,
                          model=args.model, depths=args.depths, decode_tokens=args.decode_tokens,
                          sessions=args.sessions, session_depth=args.session_depth, ready_timeout=args.ready_timeout)
    _, _, text = probes.run_depth(job)
    print(text, end="")
    return 0


class OneLineErrors(argparse.ArgumentParser):
    """Usage errors in one line (what was wrong, where to look), exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = OneLineErrors(prog=PROG, description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)
    add_run_arguments(sub.add_parser("run", help="run (or resume) a sweep against an endpoint"))
    r = sub.add_parser("report", help="markdown tables of one sweep folder, or two side by side")
    r.add_argument("folder", type=pathlib.Path)
    r.add_argument("folder_b", type=pathlib.Path, nargs="?")
    r.add_argument("--ceiling", type=float, action="append", metavar="TOK_S",
                   help="decode ceiling (bench/ceiling) per folder, in order; adds the %% of ceiling at c=1")
    r.add_argument("--output", type=pathlib.Path, help="also write the markdown here")
    add_record_arguments(sub.add_parser("record", help="one workload as a benchmark record (markdown + JSON)"))
    c = sub.add_parser("compare", help="benchmark records side by side")
    c.add_argument("records", type=pathlib.Path, nargs="+", help="record.json files or their folders")
    c.add_argument("--output", type=pathlib.Path, help="also write the markdown here")
    add_depth_arguments(sub.add_parser("depth", help="prefill/decode at token depths, and a capacity probe"))
    return p


COMMANDS = {"run": cmd_run, "report": cmd_report, "record": cmd_record, "compare": cmd_compare, "depth": cmd_depth}


def use_key(args) -> None:
    """The API key for this run's own requests and for the `vllm bench serve` containers, which
    read OPENAI_API_KEY (passed by name, so the key is in no argv)."""
    if not hasattr(args, "api_key_file"):
        return
    key = endpoint.read_api_key(args.api_key_file)
    client.use_key(key)
    if key is not None:
        os.environ[endpoint.KEY_ENV] = key


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        use_key(args)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except Problem as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
