"""Drain on stop, against the real vLLM server (CPU vehicle) behind the entrypoint and the shipped
compose.yaml: `docker compose stop` with 8 streams in flight lets every one of them finish to its
last token, and the container exits 0 within the units' grace. vLLM's default shutdown aborts them
(each client got an error event after a few chunks); the entrypoint now passes
--shutdown-timeout sized from STOP_GRACE_SECONDS.

The streams are sized from the server's measured speed so that they are still running when the
stop comes and end well inside the drain; the test waits on states (each stream's first chunks,
the container's exit), never on sleeps. A request sent during the drain gets a 503 with Retry-After
(entrypoint/stop_gate.py), where vLLM alone answered 500 "cannot schedule new futures after
shutdown"."""
import json
import os
import subprocess
import threading
import time
from typing import Mapping

import pytest
import requests
import yaml

from contract.layout import shutdown_timeout_s
from entrypoint.stop_gate import RETRY_AFTER_S
from tests.serving.conftest import FIGURES
from tests.support.deploy_units import seconds
from tooling import serving_stack

STREAMS = 8
SHIPPED = yaml.safe_load(serving_stack.COMPOSE_FILE.read_text())["services"][serving_stack.SERVICE]
GRACE_S = seconds(SHIPPED["stop_grace_period"])
DRAIN_S = shutdown_timeout_s(int(serving_stack.read_env_file()["STOP_GRACE_SECONDS"]))
CALIBRATION_TOKENS = 32
HEALTHY_WITHIN_S = 900


@pytest.fixture(scope="module")
def stack(vehicle, models_dir, tmp_path_factory):
    s = serving_stack.Stack(project=f"vllm-turing-drain-{os.getpid()}", image=vehicle, models_dir=models_dir,
                            workdir=tmp_path_factory.mktemp("drain"))
    try:
        s.up(HEALTHY_WITHIN_S)
        yield s
    finally:
        s.down()


def batch_seconds_per_token(url: str, model: str) -> float:
    """Seconds per generated token of one request among STREAMS running together."""
    def one():
        requests.post(f"{url}/v1/chat/completions", json=serving_stack.chat_body(model, CALIBRATION_TOKENS, False),
                      timeout=300).raise_for_status()

    workers = [threading.Thread(target=one) for _ in range(STREAMS)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    return (time.monotonic() - started) / CALIBRATION_TOKENS


def answers_until_refused(url: str, model: str) -> list[tuple[int, Mapping[str, str]]]:
    """(status, headers) of one-token requests sent one after another from the stop on, up to the
    first that is not a 200 (a request sent before the server took the signal is served)."""
    answers = []
    while not answers or answers[-1][0] == 200:
        reply = requests.post(f"{url}/v1/chat/completions", json=serving_stack.chat_body(model, 1, False),
                              timeout=60)
        answers.append((reply.status_code, reply.headers))  # requests' headers: any case
    return answers


def read_stream(url: str, model: str, tokens: int, record: dict, ready: threading.Event) -> None:
    serving_stack.stream_chat(url, serving_stack.chat_body(model, tokens, True), record, ready, ready_after=3)


def test_compose_stop_drains_every_stream_in_flight_to_its_last_token(stack):
    model = requests.get(f"{stack.url}/v1/models", timeout=10).json()["data"][0]["id"]
    per_token = batch_seconds_per_token(stack.url, model)
    # a third of the drain: running when the stop comes, finished long before the drain ends
    tokens = max(48, min(4000, int(DRAIN_S / 3 / per_token)))
    records = [{} for _ in range(STREAMS)]
    ready = [threading.Event() for _ in range(STREAMS)]
    clients = [threading.Thread(target=read_stream, args=(stack.url, model, tokens, records[i], ready[i]))
               for i in range(STREAMS)]
    for client in clients:
        client.start()
    assert all(event.wait(300) for event in ready), "a stream sent nothing"
    in_flight = sum(not r["lines"] or r["lines"][-1] != "data: [DONE]" for r in records)
    container = stack.container()
    stopping = threading.Thread(target=lambda: FIGURES.__setitem__("drain_stop_s", round(stack.stop(), 1)))
    stopping.start()
    late = answers_until_refused(stack.url, model)
    stopping.join(180)
    shutdown = FIGURES["drain_stop_s"]
    for client in clients:
        client.join(120)
    state = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                                      check=True).stdout)[0]["State"]
    FIGURES["drain_streams"] = f"{in_flight}/{STREAMS} in flight at the stop, {tokens} tokens each"
    logs = stack.logs()
    assert (state["Status"], state["ExitCode"], state["OOMKilled"]) == ("exited", 0, False), logs[-4000:]
    assert shutdown < GRACE_S, f"stop took {shutdown:.1f} s, the grace is {GRACE_S} s"
    assert in_flight >= 1, "every stream had finished before the stop: nothing was drained"
    assert f" --shutdown-timeout {DRAIN_S}" in logs  # the entrypoint's exec line
    # a request sent during the drain: a clean 503 saying when to retry (vLLM alone answered 500)
    assert late[-1][0] == 503 and late[-1][1].get("Retry-After") == str(RETRY_AFTER_S), late[-3:]
    assert {status for status, _ in late[:-1]} <= {200}, late
    for record in records:
        assert record.get("status") == 200 and record.get("ended") == "closed", record.get("ended")
        events = [line.removeprefix("data: ") for line in record["lines"]]
        assert events[-1] == "[DONE]", events[-3:]
        chunks = [json.loads(event) for event in events[:-1]]
        assert not any("error" in chunk for chunk in chunks), chunks[-1]
        finishes = [choice["finish_reason"] for chunk in chunks for choice in chunk.get("choices", [])
                    if choice.get("finish_reason")]
        assert finishes == ["length"], finishes
