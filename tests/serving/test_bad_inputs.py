"""Bad inputs against the real vehicle: the preflight refuses before vLLM is ever started."""
import shutil
import subprocess

import pytest

from tooling import serving_stack


def _settings_argv(models: str) -> list[str]:
    """The shipped env file plus the CPU settings, as `docker run` flags."""
    argv = ["--env-file", str(serving_stack.ENV_FILE), "-v", f"{models}:/models:ro"]
    for key, value in serving_stack.CPU_SETTINGS.items():
        argv += ["-e", f"{key}={value}"]
    return argv


def test_a_truncated_safetensors_file_fails_the_preflight_and_the_server_never_starts(vehicle, models_dir, fetched,
                                                                                     tmp_path):
    """The session's model is fetched (conftest.py): the model check finds the shard short of the size its
    fetch manifest records and names the file, the repository and the commit."""
    broken = tmp_path / "models"
    shutil.copytree(models_dir, broken)
    weights = broken / serving_stack.MODEL_NAME / "model.safetensors"
    whole = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[: whole // 2])
    stack = serving_stack.Stack(project=f"vllm-turing-serving-bad-{tmp_path.name[-12:].lower()}", image=vehicle,
                                models_dir=broken, workdir=tmp_path)
    try:
        run = stack.compose("run", "--rm", "--no-deps", serving_stack.SERVICE, timeout=300, check=False)
    finally:
        stack.down()
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    assert f"is not the {fetched.repo}@{fetched.commit[:12]} (fetched " in out, out[-3000:]
    assert f"its fetch manifest lists: model.safetensors is {whole // 2} bytes, the Hub's is {whole}" in out, out[-3000:]
    assert "vllm-turing: exec" not in out, out[-3000:]


@pytest.fixture
def port_holder(vehicle):
    """A container whose network namespace has port 8000 taken, as another server would."""
    name = f"vllm-turing-serving-port-{serving_stack.free_port()}"
    serving_stack.run(["docker", "run", "-d", "--rm", "--name", name, "--entrypoint", "python3", vehicle, "-c",
                       "import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 8000)); s.listen(); "
                       "print('bound', flush=True); time.sleep(600)"])
    for _ in range(60):
        if "bound" in subprocess.run(["docker", "logs", name], capture_output=True, text=True).stdout:
            break
        subprocess.run(["sleep", "0.5"])
    yield name
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_a_taken_port_is_a_clear_preflight_failure(vehicle, models_dir, port_holder):
    run = serving_stack.run(["docker", "run", "--rm", "--network", f"container:{port_holder}", "--shm-size", "1g",
                             *_settings_argv(str(models_dir.resolve())), vehicle], timeout=300, check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    port_lines = [line for line in out.splitlines() if "0.0.0.0:8000 is not free" in line]
    assert port_lines, out[-3000:]
    assert "vllm-turing: exec" not in out
