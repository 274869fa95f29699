"""`bench/serve_sweep record` and `bench/serve_sweep depth`: the runs and their files (side effects)."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import secrets
import shlex
import subprocess
import time

from door.problem import Problem, UsageError

from . import client, depth, memory, plot, prom, record, results, vllm_bench_argv
from .driver import RUN_TIMEOUT_S, Driver, overran, served_models
from .sweep_runs import Sweep, runs
from door import children


@dataclasses.dataclass(frozen=True)
class RecordJob:
    base_url: str
    out: pathlib.Path
    label: str
    model: str | None
    target_image: str
    tokenizer: str | None
    hf_home: str | None
    sweep: Sweep
    dataset_path: pathlib.Path | None
    cap_s: float | None
    start: str | None            # a command that starts the server; readiness is timed from it
    container: str | None        # watched for memory when the host has no GPU
    ready_timeout: float
    run_timeout_s: float = RUN_TIMEOUT_S  # the run's deadline where no cap is given: past it, a failure


START_MIN_S = 60.0  # the start command's deadline when --ready-timeout is 0 (one try)


def start_deadline(job: RecordJob) -> float:
    return job.ready_timeout if job.ready_timeout > 0 else START_MIN_S


def start_server(job: RecordJob) -> float | None:
    """Run the start command; seconds from its launch to /health 200 (None: no command)."""
    if not job.start:
        return None
    began = time.monotonic()
    try:
        done = children.run(shlex.split(job.start), timeout_s=start_deadline(job))
    except subprocess.TimeoutExpired:
        raise Problem(f"--start {job.start!r} did not return within {start_deadline(job):g} s "
                            "and was stopped; give a command that starts the server and returns "
                            "(docker compose up -d), or raise --ready-timeout") from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Problem(f"--start {job.start!r} exited {done.returncode}: {last[0]}")
    client.wait_healthy(job.base_url, job.ready_timeout)
    return time.monotonic() - began


def run_record(job: RecordJob, say=print) -> tuple[record.Record, int]:
    (run,) = runs(job.sweep)
    for sub in (results.RUNS, results.PARTIAL, results.LOGS):
        (job.out / sub).mkdir(parents=True, exist_ok=True)
    with memory.sampler(job.container) as mem:
        readiness = start_server(job)
        served = served_models(job.base_url, job.ready_timeout)
        model = job.model or served[0]
        if model not in served:
            raise Problem(f"{job.base_url} serves {served}, not {model!r}; pass one of those as --model")
        target = vllm_bench_argv.Target(base_url=job.base_url, model=model, tokenizer=job.tokenizer or model,
                                image=job.target_image, hf_home=job.hf_home)
        drv = Driver(job.sweep, target, job.out, dataset_path=job.dataset_path)
        argv, name = drv.argv(run, results.partial_name(run), run.name)
        say(f"record {job.label}: {run.num_prompts} prompts at concurrency {run.concurrency}"
            + (f", cap {job.cap_s:g} s" if job.cap_s else ""))
        with client.LoadStart(job.base_url) as load:
            log = job.out / results.LOGS / f"{run.name}.log"
            rc = drv.execute(argv, name, log, cap_s=job.cap_s or job.run_timeout_s)
            if rc is None and not job.cap_s:
                raise overran("record", job.base_url, job.run_timeout_s, log)
            after, ended = client.metrics(job.base_url), time.monotonic()
    meaning = record.memory_meaning(mem.kind, after.labels(prom.CACHE_CONFIG), mem.where)
    workload = record.Workload(job.sweep.dataset, job.sweep.dataset_file, run.input_len, run.output_len,
                               run.concurrency, run.num_prompts, job.sweep.base_seed, job.cap_s)
    common = dict(label=job.label, model=model, workload=workload, readiness_s=readiness,
                  peak_memory_bytes=mem.peak, memory_meaning=meaning)
    partial = job.out / results.partial_name(run)
    if rc is None:
        rec = record.from_server_counters(load.before, after, ended - load.began, **common)
    else:
        result = results.load_json(partial)
        reason = results.incomplete_reason(result, run) if rc == 0 else f"vllm bench serve exited {rc}"
        if reason is not None:
            raise Problem(f"the run {reason}; see {job.out / results.LOGS / (run.name + '.log')}")
        os.replace(partial, results.run_path(job.out, run))
        rec = record.from_bench_result(result, **common,
                                       server_mean_tpot_ms=record.server_mean_tpot_ms(after, load.before))
    (job.out / "record.json").write_text(rec.to_json())
    (job.out / "record.md").write_text(record.render([rec]))
    plot.records_png([rec], job.out / "record.png")
    return rec, 1 if rec.failed else 0


def load_record(path: pathlib.Path) -> record.Record:
    if path.is_dir():
        path = path / "record.json"
    data = results.load_json(path)
    if data is None:
        raise UsageError(f"{path}: missing or not JSON; point at a record.json (or its folder) from bench/serve_sweep record")
    return record.Record.from_dict(data)


@dataclasses.dataclass(frozen=True)
class DepthJob:
    base_url: str
    out: pathlib.Path
    label: str
    model: str | None
    depths: tuple[int, ...]
    decode_tokens: int
    sessions: int                # 0: no capacity probe
    session_depth: int | None    # None: the full context, max_model_len - decode_tokens
    ready_timeout: float


def server_tpot(after: prom.Snapshot, before: prom.Snapshot, requests: int) -> float | None:
    """The mean time per output token the server itself measured for the `requests` that finished
    between two scrapes (engine-side step times, whatever the stream's delivery did); None when
    it counted another number of requests (other traffic) or exports no such histogram."""
    n, mean = prom.histogram_mean(after, before, prom.TPOT)
    return mean if n == requests else None


def probe(base_url: str, model: str, tok: client.Tokenizer, depth_tokens: int, decode_tokens: int,
          clock0: float | None = None) -> depth.StreamTiming:
    salt = secrets.token_hex(6)
    prompt, _ = depth.sized_prompt(tok.count, depth_tokens, salt)
    before = client.metrics(base_url)
    t = client.stream_completion(base_url, model, prompt, decode_tokens, salt, clock0)
    return dataclasses.replace(t, server_tpot_s=server_tpot(client.metrics(base_url), before, 1))


def checked(t: depth.StreamTiming, depth_tokens: int) -> depth.StreamTiming:
    if t.error:
        raise Problem(f"the {depth_tokens}-token probe failed: {t.error}")
    if t.prompt_tokens != depth_tokens:
        raise Problem(f"the server counted {t.prompt_tokens} prompt tokens for a {depth_tokens}-token probe; "
                            "its /tokenize and its completions disagree, report this with the model")
    return t


def run_depth(job: DepthJob, say=print) -> tuple[list[depth.DepthRow], depth.Capacity | None, str]:
    served = served_models(job.base_url, job.ready_timeout)
    model = job.model or served[0]
    tok = client.Tokenizer(job.base_url, model)
    limit = tok.max_model_len()
    too_deep = [d for d in job.depths if d + job.decode_tokens > limit]
    if too_deep:
        raise UsageError(f"depths {too_deep} plus {job.decode_tokens} decoded tokens exceed the server's "
                        f"max_model_len {limit}; ask for depths up to {limit - job.decode_tokens}")
    rows = []
    for d in job.depths:
        t = checked(probe(job.base_url, model, tok, d, job.decode_tokens), d)
        say(f"depth {d}: TTFT {t.ttft_s:.2f} s, prefill {t.prefill_tok_s:.1f} tok/s, "
            f"decode {depth.fmt_decode(t)} tok/s")
        rows.append(depth.DepthRow(d, t))
    capacity = None
    if job.sessions:
        full = job.session_depth or limit - job.decode_tokens
        solo = checked(probe(job.base_url, model, tok, full, job.decode_tokens), full)
        salts = [secrets.token_hex(6) for _ in range(job.sessions)]
        prompts = [depth.sized_prompt(tok.count, full, s)[0] for s in salts]   # sized before any is sent
        clock0 = time.monotonic()
        with client.MetricsWatch(job.base_url) as watch, \
                concurrent.futures.ThreadPoolExecutor(job.sessions) as pool:
            futures = [pool.submit(client.stream_completion, job.base_url, model, p, job.decode_tokens, s, clock0)
                       for p, s in zip(prompts, salts)]
            sessions = tuple(f.result() for f in futures)
        capacity = depth.Capacity(full, solo, sessions, watch.peaks(),
                                  server_tpot(watch.last, watch.first, job.sessions))
        say(f"{job.sessions} sessions of {full} tokens: {depth.count(capacity.parallel())} in parallel, "
            f"{depth.count(capacity.queued())} queued (the server's gauges)")
    job.out.mkdir(parents=True, exist_ok=True)
    (job.out / "depth.json").write_text(depth.to_json(job.label, model, job.decode_tokens, rows, capacity))
    text = depth.render(job.label, model, job.decode_tokens, rows, capacity)
    (job.out / "depth.md").write_text(text)
    plot.depth_png(job.label, rows, job.out / "depth.png")
    return rows, capacity, text
