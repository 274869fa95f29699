"""The preflight in the built image reads what the build proved about its stack from the image
facts file instead of importing torch or vLLM, and stops at once on `docker stop`.

On a stand-in T4 (driver libraries compiled here answer the driver API as a T4 would), `check`
runs every check in one Python process; afterwards neither torch nor vllm is in sys.modules.
With the facts file unusable, the torch check imports torch and says why."""
import json
import time

import pytest

from contract.layout import IMAGE_FACTS
from tests.image.containers import run_to_end
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver

NVIDIA_LIBS = "/usr/local/nvidia/lib64"
IN_PROCESS = """
import contextlib, io, json, os, sys
from entrypoint.start import main
report = io.StringIO()
with contextlib.redirect_stdout(report):
    code = main(["check", "--json"], dict(os.environ))
checks = {check["name"]: check for check in json.loads(report.getvalue())["checks"]}
print(json.dumps({"code": code, "imported": sorted(m for m in ("torch", "vllm", "triton") if m in sys.modules),
                  "checks": checks}))
"""


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    root = tmp_path_factory.mktemp("fast")
    write_model_dir(root / "model")
    (root / "not-facts.json").write_text("{}")
    libs = build_standin_driver(root / "libs", cc=(7, 5))
    return {str(libs): {"bind": NVIDIA_LIBS, "mode": "ro"}, str(root / "model"): {"bind": "/models/m", "mode": "ro"}}, root


def in_process_check(docker_client, image, volumes, skip: str = "devices,driver,port"):
    code, out, err = run_to_end(docker_client, image, ["-c", IN_PROCESS], entrypoint="python3",
                                environment={"MODEL": "/models/m", "SKIP_CHECKS": skip},
                                volumes=volumes, shm_size="1g")
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_the_default_path_imports_neither_torch_nor_vllm(docker_client, image, mounts):
    volumes, _ = mounts
    result = in_process_check(docker_client, image, volumes)
    checks = result["checks"]
    assert checks["torch"]["status"] == "pass" and "the image's facts, as built" in checks["torch"]["message"]
    assert checks["argv"]["status"] == "pass" and "(image facts)" in checks["argv"]["message"]
    assert result["imported"] == [], result["imported"]


def test_without_usable_facts_the_torch_check_imports_torch_and_says_why(docker_client, image, mounts):
    volumes, root = mounts
    volumes = {**volumes, str(root / "not-facts.json"): {"bind": IMAGE_FACTS, "mode": "ro"}}
    result = in_process_check(docker_client, image, volumes)
    assert "torch" in result["imported"]
    assert f"torch imported: {IMAGE_FACTS} is not a schema-1 facts file" in result["checks"]["torch"]["message"]


def test_on_a_t4_the_12bs_fp16_line_names_the_layers_the_images_vllm_runs_in_fp32(docker_client, image, mounts,
                                                                                tmp_path):
    from entrypoint.settings import CHECK_NAMES
    from tests.support.gemma4_configs import published_model_dir

    volumes, _ = mounts
    model = published_model_dir("gemma4-12b", tmp_path)
    volumes = {**{host: bind for host, bind in volumes.items() if bind["bind"] != "/models/m"},
               str(model): {"bind": "/models/m", "mode": "ro"}}
    result = in_process_check(docker_client, image, volumes, ",".join(n for n in CHECK_NAMES if n != "fp16"))
    fp16 = result["checks"]["fp16"]
    assert fp16["status"] == "pass", fp16
    assert fp16["message"].startswith("vision_embedder.patch_dense and vision_embedder.patch_ln2 run in fp32, the rest "
                                      "of the 12B in float16 on cc 7.5 (fp16 upcast v"), fp16
    assert result["imported"] == [], result["imported"]


def sigterm_caught(container) -> bool:
    code, out = container.exec_run(["python3", "-c", "print(open('/proc/1/status').read())"])
    mask = next((line.split()[1] for line in out.decode().splitlines() if line.startswith("SigCgt:")), "0")
    return code == 0 and bool(int(mask, 16) & (1 << (15 - 1)))


# A DNS server that reads every query and answers none: the resolver waits its full timeout. (A
# nameserver address that nothing serves is not enough: a host may refuse the datagram at once, and
# the preflight then ends with "does not resolve" before the stop is sent.)
SILENT_DNS = """
import socket
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("0.0.0.0", 53))
print("listening", flush=True)
while True:
    server.recv(4096)
"""


@pytest.fixture
def silent_dns(docker_client, image):
    server = docker_client.containers.run(image, ["-c", SILENT_DNS], entrypoint="python3", user="root", detach=True)
    try:
        deadline = time.monotonic() + 120
        while b"listening" not in server.logs():
            server.reload()
            assert server.status in ("created", "running") and time.monotonic() < deadline, server.logs().decode()
            time.sleep(0.1)
        yield server.attrs["NetworkSettings"]["IPAddress"]
    finally:
        server.remove(force=True)


def test_docker_stop_during_the_preflight_ends_it_at_once_with_143(docker_client, image, silent_dns):
    # HOST must be resolved by the port check, from a server that never answers: the preflight
    # waits there (60 s at least), well past the moment the stop is sent
    container = docker_client.containers.run(image, ["check"], detach=True, dns=[silent_dns],
                                             dns_opt=["timeout:30", "attempts:2"],
                                             environment={"MODEL": "google/gemma-4-E2B-it", "HF_HUB_OFFLINE": "1",
                                                          "HOST": "preflight.example"})
    try:
        deadline = time.monotonic() + 120
        while not sigterm_caught(container):
            assert time.monotonic() < deadline, container.logs().decode()[-2000:]
            time.sleep(0.2)
        started = time.monotonic()
        container.stop(timeout=30)
        stopped_in = time.monotonic() - started
        container.reload()
        assert container.attrs["State"]["ExitCode"] == 143, (container.attrs["State"], stopped_in,
                                                               container.logs().decode()[-2000:])
        print(f"docker stop during the preflight: {stopped_in:.2f} s")
    finally:
        container.remove(force=True)
