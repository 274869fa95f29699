"""IDLE_AFTER on the real CPU server, as docs/deploy.md ("Idle") tells a compose user: `build.py units` with
IDLE_AFTER in the env file, and the rendered systemd units around `docker compose` run by their own
commands: Debian's systemd-socket-proxyd between the held port and the server, `docker compose up --wait`
and `docker compose stop` as the compose unit says. systemd as PID 1 is not here; what it does (hold the
socket, start the required unit first, stop it when unneeded) is tests/support/systemd_standin.py.

One server's life, in order: nothing runs until a request; requests that arrive during the start all wait
and are answered; a request in flight when IDLE_AFTER passes (its body sent slowly) is answered; with nobody asking the
server stops; the next request is answered after one more start."""
from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests
import yaml

from tests.serving.conftest import FIGURES
from tests.support.systemd_standin import SocketActivationStandin
from tooling import serving_stack

IDLE_AFTER_S = 5
START_WITHIN_S = 900  # a cold start beside the image tier's build on a loaded 2-core host
STOP_WITHIN_S = 300   # IDLE_AFTER, then `docker compose stop` draining the server
CONCURRENT = 3
TRICKLE_S = 3 * IDLE_AFTER_S  # a request whose body arrives over this long is in flight past IDLE_AFTER
SERVER_UNIT = "vllm-turing-compose"


def free_port_pair() -> int:
    """A free loopback port whose IDLE_AFTER backend (+10000) is free too."""
    while True:
        port = serving_stack.free_port()
        if port + 10000 <= 65535:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 10000))
                    return port
                except OSError:
                    continue


def chat(url: str, tokens: int = 8) -> tuple[int, str, float]:
    body = serving_stack.chat_body(serving_stack.MODEL_NAME, tokens, stream=False)
    started = time.monotonic()
    reply = requests.post(f"{url}/v1/chat/completions", json=body, timeout=(30, START_WITHIN_S))
    content = reply.json()["choices"][0]["message"]["content"] if reply.ok else reply.text
    return reply.status_code, content, time.monotonic() - started


class Idle:
    def __init__(self, workdir, vehicle, models_dir):
        self.port = free_port_pair()
        self.url = f"http://127.0.0.1:{self.port}"
        self.project = f"idle-{uuid.uuid4().hex[:8]}"
        env_file = serving_stack.write_env_file(workdir / "idle.env", {"MODEL": f"/models/{serving_stack.MODEL_NAME}",
                                                                       "SERVED_MODEL_NAME": serving_stack.MODEL_NAME,
                                                                       "IDLE_AFTER": f"{IDLE_AFTER_S}s"})
        serving_stack.run([sys.executable, str(serving_stack.REPO / "build.py"), "units", "--defaults", "--image", vehicle,
                           "--model-dir", str(models_dir), "--env-file", str(env_file), "--port", str(self.port),
                           "--out", str(workdir)], timeout=300)
        spec = yaml.safe_load((workdir / "compose.yaml").read_text())
        (workdir / "override.yaml").write_text(serving_stack.override_text(spec, serving_stack.CPU_SETTINGS))
        # what the user's environment (or the folder's .env) gives the compose unit: here the test override too
        self.env = {**os.environ, "COMPOSE_FILE": "compose.yaml:override.yaml", "COMPOSE_PROJECT_NAME": self.project}
        self.workdir = workdir
        self.standin = SocketActivationStandin(workdir / "systemd", SERVER_UNIT, self.env)

    def compose(self, *words: str) -> subprocess.CompletedProcess:
        return serving_stack.run(["docker", "compose", *words], env=self.env, timeout=300, check=False)

    def state(self) -> dict | None:
        ids = subprocess.run(["docker", "compose", "ps", "-a", "-q", "vllm"], cwd=self.workdir, env=self.env,
                             capture_output=True, text=True, timeout=60).stdout.split()
        if not ids:
            return None
        return json.loads(serving_stack.run(["docker", "inspect", ids[0]]).stdout)[0]["State"]

    def metrics(self) -> str:
        return requests.get(f"{self.url}/metrics", timeout=(30, START_WITHIN_S)).text

    def close(self) -> None:
        self.standin.close()
        subprocess.run(["docker", "compose", "down", "-v", "--remove-orphans"], cwd=self.workdir, env=self.env,
                       capture_output=True, timeout=300)


def metric(text: str, name: str) -> float:
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
                or line.startswith(name + "{"))


@pytest.fixture(scope="module")
def idle(vehicle, models_dir, tmp_path_factory):
    chain = Idle(tmp_path_factory.mktemp("idle"), vehicle, models_dir)
    try:
        yield chain
    finally:
        chain.close()


@pytest.fixture(scope="module")
def first_start(idle):
    """Nothing runs before the first request; CONCURRENT requests sent at once then start it; right after
    them (well within IDLE_AFTER, so the same start serves it) a stream of STREAM_TOKENS."""
    before = idle.state()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
        answers = list(pool.map(lambda _: chat(idle.url), range(CONCURRENT)))
    metrics = idle.metrics()
    started = time.monotonic()
    slow = trickled_chat(idle.port)
    took = time.monotonic() - started
    FIGURES["idle_first_request_wait_s"] = round(max(wait for _, _, wait in answers), 1)
    return before, answers, metrics, (slow, took, idle.standin.activations, idle.standin.stops)


def trickled_chat(port: int) -> tuple[int, dict]:
    """A chat completion whose body the client sends a piece a second for TRICKLE_S: a request in flight,
    through the proxy, for longer than IDLE_AFTER whatever the server's speed. (status, JSON answer)."""
    body = json.dumps(serving_stack.chat_body(serving_stack.MODEL_NAME, 8, stream=False)).encode()
    pieces = [body[i * len(body) // TRICKLE_S:(i + 1) * len(body) // TRICKLE_S] for i in range(TRICKLE_S)]
    with socket.create_connection(("127.0.0.1", port), timeout=START_WITHIN_S) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        for piece in pieces:
            time.sleep(1)
            conn.sendall(piece)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def test_nothing_runs_until_a_request_arrives(first_start):
    before = first_start[0]
    assert before is None, f"a container existed before any request: {before}"


def test_requests_that_arrive_during_the_start_all_wait_and_are_answered(idle, first_start):
    _, answers, metrics, _ = first_start
    assert [status for status, _, _ in answers] == [200] * CONCURRENT, answers
    assert all(content for _, content, _ in answers), answers
    assert (idle.standin.activations, idle.standin.errors) == (1, [])
    assert 0 < metric(metrics, "vllm_turing_start_seconds") < START_WITHIN_S, "the start's wait is on /metrics"


def test_a_request_in_flight_when_idle_after_passes_is_answered(first_start):
    (status, answer), took, activations, stops = first_start[3]
    assert status == 200 and answer["choices"][0]["message"]["content"], answer
    assert took >= TRICKLE_S > 2 * IDLE_AFTER_S
    assert (activations, stops) == (1, 0), "the server ran through the request"


def test_with_nobody_asking_the_server_stops(idle, first_start):
    started = time.monotonic()
    while time.monotonic() - started < STOP_WITHIN_S and idle.standin.stops < 1:
        time.sleep(0.5)
    assert idle.standin.stops == 1 and idle.standin.errors == []
    state = idle.state()
    assert state is not None and not state["Running"] and state["Pid"] == 0, state
    FIGURES["idle_stop_after_last_request_s"] = round(time.monotonic() - started, 1)


def test_the_next_request_is_answered_after_one_more_start(idle, first_start):
    assert idle.standin.stops == 1, "runs after the server stopped"
    first_metrics = first_start[2]
    status, content, wait = chat(idle.url)
    assert (status, bool(content)) == (200, True)
    assert (idle.standin.activations, idle.standin.errors) == (2, [])
    metrics = idle.metrics()
    assert metric(metrics, "process_start_time_seconds") > metric(first_metrics, "process_start_time_seconds")
    FIGURES["idle_warm_start_request_wait_s"] = round(wait, 1)
    FIGURES["idle_warm_start_s"] = metric(metrics, "vllm_turing_start_seconds")
