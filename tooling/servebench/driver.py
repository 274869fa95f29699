"""Runs a sweep: one `docker run ... vllm bench serve` per pending run (the side effects)."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import time

from door.problem import Problem, UsageError

from . import results, vllm_bench_argv
from .client import served_models  # noqa: F401  (the probes' name)
from .resolution import resolved_tpot_ms
from .sweep_runs import Run, Sweep, runs, warmup_seed
from door import children
from door import files

INTERRUPTED = 130
# A run's whole deadline: `vllm bench serve` gives each request 6 hours (vLLM 0.33.0,
# benchmarks/lib/endpoint_request_func.py AIOHTTP_TIMEOUT, not configurable), so a server whose
# stream never ends would hold a run for hours per request; past this the container is stopped.
RUN_TIMEOUT_S = 7200.0
RUN_TIMEOUT_FLAG = "--run-timeout"


def overran(what: str, base_url: str, seconds: float, log: pathlib.Path) -> Problem:
    """The one line for a `vllm bench serve` run stopped at its deadline."""
    return Problem(f"{what}: `vllm bench serve` against {base_url} did not finish within {seconds:g} s and was "
                         f"stopped (a stream that never ends, or a run far longer than planned); raise "
                         f"{RUN_TIMEOUT_FLAG} if the run needs longer, else check the server; its output is in {log}")


def prepare_folder(folder: pathlib.Path, sweep: Sweep, endpoint: dict) -> None:
    """Create the sweep folder, or check that an existing one holds the same sweep."""
    stored = results.load_sweep(folder)
    if stored is not None:
        differs = stored[0].differences(sweep)
        if differs:
            raise UsageError(f"{folder} holds a sweep that differs in {', '.join(differs)}; "
                            "resume with the same options or choose another --out folder")
    for sub in (results.RUNS, results.PARTIAL, results.ERRORS, results.LOGS):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    if stored is None:
        (folder / results.SWEEP_FILE).write_text(results.sweep_record(sweep, endpoint))


@dataclasses.dataclass
class Driver:
    sweep: Sweep
    target: vllm_bench_argv.Target
    folder: pathlib.Path
    dataset_path: pathlib.Path | None = None
    session: str = dataclasses.field(default_factory=lambda: secrets.token_hex(4))
    user: str | None = dataclasses.field(default_factory=lambda: f"{os.getuid()}:{os.getgid()}")
    run_timeout_s: float = RUN_TIMEOUT_S
    out = sys.stdout

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def argv(self, run: Run, partial: str | None, label: str) -> tuple[list[str], str]:
        name = f"vllm-bench-{self.session}-{label}"
        argv = vllm_bench_argv.docker_argv(
            sweep=self.sweep, run=run, target=self.target, results_dir=self.folder,
            partial_name=partial, salt=vllm_bench_argv.cache_salt(self.session, label),
            container_name=name, env=dict(os.environ), user=self.user, dataset_path=self.dataset_path)
        return argv, name

    def execute(self, argv: list[str], container: str, log: pathlib.Path, cap_s: float | None = None) -> int | None:
        """Run one container; on interruption kill it (the docker client alone would leave it).
        None: it was still running at cap_s seconds and was stopped."""
        with log.open("w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
            try:
                return proc.wait(timeout=cap_s)
            except subprocess.TimeoutExpired:
                children.run(["docker", "kill", container], text=False)
                proc.terminate()
                proc.wait()
                return None
            except KeyboardInterrupt:
                stop_container(proc, lambda: children.run(["docker", "kill", container], text=False))
                raise

    def warm_up(self, prompts: int) -> None:
        """Requests with their own seed and salt, so the first measured run does not pay
        for the server's first-request costs (CUDA graph capture, allocator growth)."""
        smallest = min(self.sweep.cell_input_lens, key=lambda n: n or 0)
        run = Run(max(self.sweep.concurrencies), smallest, self.sweep.output_len, 0, prompts,
                  warmup_seed(self.sweep))
        argv, name = self.argv(run, None, "warmup")
        log = self.folder / results.LOGS / "warmup.log"
        self.say(f"warm-up: {prompts} request(s)")
        rc = self.execute(argv, name, log, self.run_timeout_s)
        if rc is None:
            raise overran("warm-up", self.target.base_url, self.run_timeout_s, log)
        if rc != 0:
            raise Problem(f"warm-up `vllm bench serve` exited {rc}: {tail(log, 1)}; "
                                f"full output in {log}")

    def one(self, run: Run) -> bool:
        """Do one run; True when it completed without failed requests."""
        partial = self.folder / results.partial_name(run)
        partial.unlink(missing_ok=True)
        argv, name = self.argv(run, results.partial_name(run), run.name)
        log = self.folder / results.LOGS / f"{run.name}.log"
        started = time.monotonic()
        rc = self.execute(argv, name, log, self.run_timeout_s)
        if rc is None:  # the endpoint misbehaves: every later run would wait as long
            partial.unlink(missing_ok=True)
            raise overran(run.name, self.target.base_url, self.run_timeout_s, log)
        result = results.load_json(partial)
        reason = results.incomplete_reason(result, run) if rc == 0 else f"vllm bench serve exited {rc}"
        if reason is not None:
            results.error_path(self.folder, run).write_text(json.dumps(
                {"run": run.name, "returncode": rc, "reason": reason, "log_tail": tail(log, 20)}, indent=2))
            partial.unlink(missing_ok=True)
            self.say(f"{run.name}: ERROR {reason}; see {log}")
            return False
        os.replace(partial, results.run_path(self.folder, run))
        results.error_path(self.folder, run).unlink(missing_ok=True)
        tpot = resolved_tpot_ms(result["median_tpot_ms"])
        self.say(f"{run.name}: {result['completed']}/{run.num_prompts} ok, failed {result['failed']}, "
                 f"{result['output_throughput']:.1f} out tok/s, "
                 + (f"{1000 / tpot:.1f} tok/s per stream" if tpot else "per-stream tok/s not measured (burst)")
                 + f", TTFT {result['median_ttft_ms']:.0f} ms "
                 f"({time.monotonic() - started:.0f} s)")
        return result["failed"] == 0

    def run_all(self, warmup_prompts: int) -> int:
        planned = runs(self.sweep)
        pending = results.pending_runs(self.folder, planned)
        self.say(f"sweep {self.folder}: {len(planned)} runs, {len(planned) - len(pending)} done, "
                 f"{len(pending)} to go (session {self.session})")
        clean = True
        for run in results_complete_failures(self.folder, planned, pending):
            self.say(f"{run.name}: kept, it had failed requests")
            clean = False
        if pending and warmup_prompts:
            self.warm_up(warmup_prompts)
        for run in pending:
            clean = self.one(run) and clean
        return 0 if clean else 1


def results_complete_failures(folder: pathlib.Path, planned: list[Run], pending: list[Run]) -> list[Run]:
    """Complete runs kept from an earlier invocation that had failed requests."""
    done = [r for r in planned if r not in pending]
    return [r for r in done if results.load_json(results.run_path(folder, r))["failed"]]


def tail(path: pathlib.Path, lines: int) -> str:
    try:
        text = files.read_own_bytes(path).decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def stop_container(proc, kill, tries: int = 120) -> None:
    """Kills the run's container until its `docker run` client exits. An interrupt can come while
    the client is still creating the container: a kill then finds nothing, and the container would
    start and run on (its requests held by nothing the sweep still waits for), so it is retried
    each second; after `tries` the client itself is killed."""
    for _ in range(tries):
        kill()
        try:
            proc.wait(timeout=1)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    proc.wait()


def sigterm_as_interrupt() -> None:
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
