"""Two models on one host, as docs/deploy.md ("Two models on one card", "Watching the box") tells a
user: `build.py units` with two env files and --monitoring, both servers up behind the rendered
compose.yaml (less device nodes, driver libraries and memlock, as tests/serving does), each on its
own port, served name, volumes and memory fraction; the real `prometheus` binary scrapes both and
evaluates monitoring/rules.yml, and the recorded queue of the chat server fills when a test sends
more requests than its MAX_NUM_SEQS. The alert itself waits 5 minutes (`for: 5m`): promtool's unit
tests prove it fires on such a queue (tests/unit/test_monitoring.py).
"""
import contextlib
import shutil
import subprocess
import time
import uuid

import pytest
import requests
import yaml

from tooling import serving_stack

# The chat server runs one request at a time, so a burst waits in its queue: 12 streams of 1000
# tokens keep it above 0 for minutes even at an idle host's speed (80 tokens/s), so the scrapes,
# which a loaded host can make late, have many chances to see it.
ENV_FILES = {"chat": {"MAX_NUM_SEQS": "1", "MAX_MODEL_LEN": "1024"}, "embed": {"MAX_MODEL_LEN": "512"}}
HEALTHY_WITHIN_S = 900  # two cold starts side by side on a loaded 2-core host
BURST = 12
BURST_TOKENS = 1000
SCRAPE = "5s"   # its timeout too: a 1 s scrape of /metrics times out while the host is loaded


def wait(check, timeout: float, what: str):
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if value := check():
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} not seen within {timeout:.0f} s")


@pytest.fixture(scope="module")
def two_servers(vehicle, models_dir, tmp_path_factory):
    servers = serving_stack.RenderedServers(project=f"two-{uuid.uuid4().hex[:8]}", image=vehicle, models_dir=models_dir,
                                            workdir=tmp_path_factory.mktemp("two"), servers=ENV_FILES,
                                            units_args=("--monitoring",))
    servers.up(*ENV_FILES)
    try:
        for name in ENV_FILES:
            try:
                servers.wait_healthy(name, HEALTHY_WITHIN_S)
            except RuntimeError as error:
                pytest.fail(str(error), pytrace=False)
        yield servers.workdir, servers.compose_spec, servers.ports
    finally:
        servers.down()


def test_both_servers_answer_on_their_own_port_and_name(two_servers):
    _, compose, ports = two_servers
    for name, port in ports.items():
        served = [model["id"] for model in requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]]
        assert served == [name]
    shares = [float(compose["services"][name]["environment"]["GPU_MEMORY_UTILIZATION"]) for name in ports]
    assert sum(shares) <= 0.95
    volumes = [{v for v in compose["services"][name]["volumes"] if isinstance(v, str)} for name in ports]
    assert not volumes[0] & volumes[1]


@pytest.fixture(scope="module")
def prometheus(two_servers, tmp_path_factory):
    """The real prometheus (Debian's) on the rendered config and rules, its targets the published
    ports (the rendered ones are the services' names on the project's network), scraping each second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("no prometheus on PATH: run scripts/install-test-host.sh", pytrace=False)
    work, _, ports = two_servers
    config = yaml.safe_load((work / "monitoring" / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE, "evaluation_interval": SCRAPE}
    config["rule_files"] = [str(work / "monitoring" / "rules.yml")]
    config["scrape_configs"][0]["static_configs"] = [{"targets": [f"127.0.0.1:{port}" for port in ports.values()]}]
    data = tmp_path_factory.mktemp("prometheus")
    (data / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = serving_stack.free_port()
    process = subprocess.Popen([binary, f"--config.file={data / 'prometheus.yml'}", f"--storage.tsdb.path={data / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=(data / "log").open("w"))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


def query(prometheus: str, expr: str) -> list:
    try:
        answer = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=5).json()
    except (requests.RequestException, ValueError):
        return []
    return answer.get("data", {}).get("result", [])


def test_prometheus_scrapes_both_servers(prometheus):
    up = wait(lambda: len(r := query(prometheus, 'up{job="vllm-turing"} == 1')) == 2 and r, 120, "both targets up")
    assert len(up) == 2
    models = wait(lambda: {s["metric"].get("model_name") for s in query(prometheus, "vllm:num_requests_running")}
                  >= {"chat", "embed"}, 120, "both servers' vLLM metrics")
    assert models


def test_the_recorded_queue_fills_when_a_burst_outruns_max_num_seqs(two_servers, prometheus):
    """The burst's streams are open (their headers come back at once, queued or not) until the queue
    is seen, then closed: vLLM aborts a request whose client went away."""
    _, _, ports = two_servers
    url = f"http://127.0.0.1:{ports['chat']}/v1/completions"
    body = {"model": "chat", "prompt": "Count slowly:", "max_tokens": BURST_TOKENS, "ignore_eos": True, "stream": True}
    with contextlib.ExitStack() as streams:
        for _ in range(BURST):
            stream = streams.enter_context(requests.post(url, json=body, stream=True, timeout=600))
            assert stream.status_code == 200, stream.text
        waiting = wait(lambda: query(prometheus, 'vllm_turing:requests_waiting:sum{model_name="chat"} > 0'),
                       300, "the chat server's recorded queue above 0")
    assert float(waiting[0]["value"][1]) >= 1
