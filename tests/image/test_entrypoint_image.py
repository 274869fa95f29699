"""The entrypoint in the built image, on this GPU-less machine: `check` fails the device checks with
their fixes, `print-command` prints the seed argv (StandIn driver libraries mounted where the
compose file mounts the host's), and the default mode execs the server as PID 1, which receives
the SIGTERM of `docker stop`."""
import json
import shlex
import time

import pytest

from contract.layout import DEPRECATED_ENV_NAMES, ENV_FIT_TABLE, FIT_TABLE, IMAGE_PYTHONPATH
from entrypoint.settings import ENTRYPOINT_ONLY

from tests.image.containers import run_to_end
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver
from tests.support.standin_vllm import write_standin_vllm
from tests.support.seed_configs import T4_E2B_ARGV, T4_E2B_ENV

NVIDIA_LIBS = "/usr/local/nvidia/lib64"
STANDIN_SERVER = """
import json, os, signal, sys, time
record = "/record/standin.json"
def on_term(signum, frame):
    with open(record, "a") as out:
        out.write(json.dumps({"signal": signal.Signals(signum).name, "pid": os.getpid()}) + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(record, "a") as out:
    out.write(json.dumps({"started": True, "pid": os.getpid(), "argv": sys.argv[1:], "env": dict(os.environ)}) + "\\n")
while True:
    time.sleep(0.1)
"""


def run(docker_client, image, command, environment=None, volumes=None, **kwargs):
    """(exit code, stdout, stderr) of a container run to its end."""
    return run_to_end(docker_client, image, command, environment=environment or {}, volumes=volumes or {},
                      **kwargs)


def test_check_without_gpu_reports_device_checks_failing_with_fixes(docker_client, image):
    code, out, err = run(docker_client, image, ["check"], {"MODEL": "google/gemma-4-E2B-it"})
    assert code == 1, out + err
    lines = {line.split()[1]: line for line in out.splitlines()[1:-1]}
    for name in ("devices", "driver"):
        assert lines[name].startswith("FAIL") and " -> fix: " in lines[name]
    assert "/usr/local/nvidia/lib64" in lines["driver"]
    assert out.splitlines()[-1].startswith("checks took ")


def test_check_json_in_the_image(docker_client, image):
    code, out, _ = run(docker_client, image, ["check", "--json"], {"MODEL": "google/gemma-4-E2B-it"})
    report = json.loads(out)
    assert code == 1 and report["device"] is None
    assert {check["name"]: check["status"] for check in report["checks"]}["clamp"] == "pass"


def test_bad_setting_exits_2(docker_client, image):
    code, out, err = run(docker_client, image, ["check"], {"MODEL": "m", "GPU_MEMORY_UTILIZATION": "1.5"})
    assert code == 2 and "GPU_MEMORY_UTILIZATION" in err and out == ""


@pytest.fixture(scope="module")
def standin_t4_libs(tmp_path_factory):
    return build_standin_driver(tmp_path_factory.mktemp("standin-driver"), cc=(7, 5))


def test_print_command_prints_the_t4_seed_argv(docker_client, image, standin_t4_libs):
    code, out, err = run(docker_client, image, ["print-command"], T4_E2B_ENV,
                         {str(standin_t4_libs): {"bind": NVIDIA_LIBS, "mode": "ro"}})
    assert code == 0, err
    assert shlex.split(out) == T4_E2B_ARGV


def test_bf16_on_the_standin_t4_exits_2(docker_client, image, standin_t4_libs):
    code, _, err = run(docker_client, image, ["check"], {**T4_E2B_ENV, "DTYPE": "bfloat16"},
                       {str(standin_t4_libs): {"bind": NVIDIA_LIBS, "mode": "ro"}})
    assert code == 2 and "DTYPE" in err


def torch_check(docker_client, image, cc, **kwargs):
    script = ("import json; from entrypoint.checks.torch_runtime import check_torch; "
              f"print(json.dumps(check_torch({cc!r}).to_dict()))")
    code, out, err = run(docker_client, image, ["-c", script], entrypoint="python3", **kwargs)
    assert code == 0, err
    return json.loads(out)


def test_torch_check_on_the_images_real_torch(docker_client, image):
    assert "sees no CUDA device" in torch_check(docker_client, image, (7, 5))["message"]
    pascal = torch_check(docker_client, image, (6, 1))
    assert pascal["status"] == "fail" and "no kernels for sm_61" in pascal["message"]


def test_torch_without_its_nvidia_libraries_is_caught(docker_client, image):
    code, out, _ = run(docker_client, image, ["-c", "import nvidia, os; print(list(nvidia.__path__)[0])"],
                       entrypoint="python3")
    hidden = torch_check(docker_client, image, (7, 5), tmpfs={out.strip(): ""})
    assert hidden["status"] == "fail" and "torch does not import" in hidden["message"]
    assert ".so" in hidden["message"] and "nvidia-* dependency wheels" in hidden["fix"]


def test_server_is_exec_d_as_pid_1_and_receives_docker_stops_sigterm(docker_client, image, tmp_path):
    write_model_dir(tmp_path / "model")
    write_standin_vllm(tmp_path / "server", STANDIN_SERVER)
    (tmp_path / "record").mkdir(mode=0o777)  # written by the image's uid, 10001
    (tmp_path / "record").chmod(0o777)
    record = tmp_path / "record" / "standin.json"
    container = docker_client.containers.run(
        image, ["--max-lora-rank", "8"], detach=True, shm_size="1g",
        environment={"MODEL": "/models/e2b", "SKIP_CHECKS": "devices,driver,torch,clamp,fit",
                     # a stand-in vllm package first on the path: the entrypoint execs the one
                     # server command it has, which then runs the stand-in
                     "PYTHONPATH": f"/standin:{IMAGE_PYTHONPATH}",
                     "VLLM_TURING_SERVER_CMD": "python3 -c 'print(1)'"},  # the old switch: ignored
        volumes={str(tmp_path / "model"): {"bind": "/models/e2b", "mode": "ro"},
                 str(tmp_path / "server"): {"bind": "/standin", "mode": "ro"},
                 str(tmp_path / "record"): {"bind": "/record", "mode": "rw"}})
    try:
        deadline = time.monotonic() + 60
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = json.loads(record.read_text().splitlines()[0])
        assert started["pid"] == 1  # the entrypoint was PID 1; exec made the server PID 1
        assert started["argv"][:2] == ["--model", "/models/e2b"] and started["argv"][-2:] == ["--max-lora-rank", "8"]
        # the server sees none of the entrypoint's own settings, and the image's fit table under the new name
        assert not (set(ENTRYPOINT_ONLY) | set(DEPRECATED_ENV_NAMES)) & set(started["env"])
        assert started["env"][ENV_FIT_TABLE] == FIT_TABLE
        container.stop(timeout=20)
        assert json.loads(record.read_text().splitlines()[-1]) == {"signal": "SIGTERM", "pid": 1}
        container.reload()
        # stopped by its SIGTERM handler: a kill after the timeout would read 137 (no bound on the
        # clock here, which a loaded host would stretch)
        assert container.attrs["State"]["ExitCode"] == 0
        logs = container.logs(stderr=False).decode()
        assert "exec python3 -m vllm.entrypoints.openai.api_server --model /models/e2b" in logs and "PASS  env" in logs
    finally:
        container.remove(force=True)


def shm_check(docker_client, image, **kwargs) -> dict:
    code, out, err = run(docker_client, image, ["check", "--json"], {"MODEL": "google/gemma-4-E2B-it"}, **kwargs)
    assert code in (0, 1), err
    return {check["name"]: check for check in json.loads(out)["checks"]}["shm"]


def test_dockers_default_shm_fails_the_shm_check_and_shm_size_passes_it(docker_client, image):
    # No CUDA device here: vLLM would run on its CPU platform, whose multiprocessing executor
    # puts 400 MiB of message queues in /dev/shm for one worker.
    default = shm_check(docker_client, image)
    assert default["status"] == "fail" and "--shm-size 1g" in default["fix"], default
    assert shm_check(docker_client, image, shm_size="1g")["status"] == "pass"
