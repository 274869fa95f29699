"""The real vLLM server (the CPU vehicle) behind the entrypoint, run as a user would with `docker run`:
as an arbitrary uid in group 0 (as OpenShift assigns), with the API key in a file named by
API_KEY_FILE. The /v1 routes answer 401 without the key and 200 with it; the key is in the server's
environment and in no argv, log, `docker inspect` output or report."""
import json
import os
import subprocess
import time

import pytest
import requests

from contract.layout import API_KEY_PATH
from tests.support import serving_stack

KEY = "sk-serving-planted-5b2e90"
UID = "4242:0"
HEALTHY_WITHIN_S = 900  # a bound for a hang, not a speed target: a loaded 2-core host takes minutes


def docker(*args: str, check: bool = True) -> str:
    return serving_stack.run(["docker", *args], timeout=300, check=check).stdout


def readable_by_all(root) -> None:
    """pytest's folders are 0700 root: the arbitrary uid must be able to read the model, as a user's
    model folder must be (docs/deploy.md)."""
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else path.stat().st_mode | 0o444)


@pytest.fixture(scope="module")
def server(vehicle, models_dir, tmp_path_factory):
    readable_by_all(models_dir)
    secrets = tmp_path_factory.mktemp("secrets")
    key_file = secrets / "vllm-api-key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)  # readable by the container's uid, as a compose file secret must be
    port = serving_stack.free_port()
    name = f"vllm-turing-key-uid-{os.getpid()}"
    settings = {**serving_stack.CPU_SETTINGS, "API_KEY_FILE": API_KEY_PATH}
    argv = ["run", "-d", "--name", name, "--user", UID, "--shm-size", "1g",
            "--env-file", str(serving_stack.ENV_FILE), "-p", f"127.0.0.1:{port}:8000",
            "-v", f"{models_dir.resolve()}:/models:ro", "-v", f"{key_file}:{API_KEY_PATH}:ro"]
    for key, value in settings.items():
        argv += ["-e", f"{key}={value}"]
    docker(*argv, vehicle)
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while time.monotonic() - started < HEALTHY_WITHIN_S:
            state = json.loads(docker("inspect", name))[0]["State"]
            if state["Status"] != "running":
                pytest.fail(f"the server exited {state['ExitCode']}: {docker('logs', name)[-3000:]}")
            try:
                if requests.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        else:
            pytest.fail(f"not healthy within {HEALTHY_WITHIN_S} s: {docker('logs', name)[-3000:]}")
        yield name, url
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def proc_file(name: str, path: str) -> str:
    return docker("exec", name, "python3", "-c",
                  f"import sys; sys.stdout.write(open({path!r}, 'rb').read().replace(bytes(1), b' ').decode())")


def test_v1_answers_401_without_the_key_and_200_with_it(server):
    name, url = server
    assert requests.get(f"{url}/v1/models", timeout=30).status_code == 401
    assert requests.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 401
    answer = requests.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert answer.status_code == 200 and answer.json()["data"], answer.text


def test_the_key_is_in_the_servers_environment_and_nowhere_a_user_can_read_it(server):
    name, _ = server
    assert f"VLLM_API_KEY={KEY}" in proc_file(name, "/proc/1/environ")  # the search finds the key where it is
    places = {"/proc/1/cmdline": proc_file(name, "/proc/1/cmdline"), "docker inspect": docker("inspect", name),
              "docker logs": docker("logs", name) + subprocess.run(["docker", "logs", name], capture_output=True,
                                                                     text=True).stderr}
    for where, text in places.items():
        assert KEY not in text, where
    assert "vllm.entrypoints.openai.api_server" in places["/proc/1/cmdline"]  # PID 1 is the server


def test_the_server_runs_as_the_arbitrary_uid(server):
    name, _ = server
    status = proc_file(name, "/proc/1/status")
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    gid_line = next(line for line in status.splitlines() if line.startswith("Gid:"))
    assert uid_line.split()[1] == "4242" and gid_line.split()[1] == "0"


def test_check_as_the_arbitrary_uid_reports_the_key_requirement(vehicle, models_dir):
    readable_by_all(models_dir)
    done = subprocess.run(["docker", "run", "--rm", "--user", UID, "-v", f"{models_dir.resolve()}:/models:ro",
                           "-e", f"MODEL=/models/{serving_stack.MODEL_NAME}", "-e", "VLLM_API_KEY=" + KEY,
                           vehicle, "check"], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr and "PermissionError" not in done.stdout + done.stderr
    assert done.returncode == 1 and "PASS  model" in done.stdout, done.stdout + done.stderr  # only device lines fail
    assert "the /v1 routes require the API key (VLLM_API_KEY)" in done.stdout and KEY not in done.stdout
