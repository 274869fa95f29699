"""Units for 1, 2 and 4 GPUs, as `build.py units --gpus` writes them, judged by the real tools:
`docker compose config` and podman's `quadlet -dryrun`. compose and Quadlet must carry the same
device nodes, and the toolkit variants must select the same GPUs."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.image.test_deploy_tools import QUADLET, compose_env, quadlet_dryrun
from tests.support.build_py import build_py
from tests.support.deploy_units import compose_view, option_values, podman_run_argv


def write_units(tmp_path, *args: str):
    out = tmp_path / "units"
    assert build_py().main(["units", "--defaults", "--out", str(out), *args]) == 0
    shutil.copy(out / "quadlet/vllm-turing.env", out / "vllm-turing.env")  # compose's env_file path
    return out


def compose_service(folder, *files: str) -> dict:
    flags = [arg for name in files for arg in ("-f", str(folder / name))]
    run = subprocess.run(["docker", "compose", *flags, "config", "--format", "json"], cwd=folder,
                         env=compose_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["services"]["vllm"]


def quadlet_argv(folder, tmp_path, home_name: str = "home") -> list[str]:
    if not QUADLET.is_file():
        pytest.fail(f"no quadlet at {QUADLET}; run scripts/install-test-host.sh", pytrace=False)
    units = tmp_path / home_name / "systemd"
    units.mkdir(parents=True)
    for name in ("vllm-turing.container", "vllm-turing.env"):
        shutil.copy(folder / "quadlet" / name, units / name)
    run = quadlet_dryrun(units, tmp_path / home_name)
    assert run.returncode == 0, run.stderr
    return podman_run_argv(run.stdout)


@pytest.mark.parametrize("gpus, indices", [("1", [0]), ("2", [0, 1]), ("4", [0, 1, 2, 3]), ("1,3", [1, 3])])
def test_every_chosen_gpu_node_is_in_compose_and_quadlet(tmp_path, gpus, indices):
    folder = write_units(tmp_path, "--gpus", gpus)
    nodes = [f"/dev/nvidia{i}" for i in indices]
    service = compose_service(folder, "compose.yaml")
    compose_nodes = [d for d in compose_view(service)["devices"] if d[len("/dev/nvidia"):].isdigit()]
    assert compose_nodes == nodes
    assert service["environment"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(map(str, indices))
    assert int(service["shm_size"]) >= 2**30
    argv = quadlet_argv(folder, tmp_path)
    assert [d for d in option_values(argv, "--device") if d[len("/dev/nvidia"):].isdigit()] == nodes
    assert option_values(argv, "--shm-size") == [service_shm(service)]


def service_shm(service: dict) -> str:
    return f"{int(service['shm_size']) // 2**30}g"


def test_the_toolkit_variants_select_the_same_gpus(tmp_path):
    folder = write_units(tmp_path, "--gpus", "0,2")
    service = compose_service(folder, "compose.yaml", "compose.toolkit.yaml")
    reservation = service["deploy"]["resources"]["reservations"]["devices"]
    assert reservation == [{"capabilities": ["gpu"], "driver": "nvidia", "device_ids": ["0", "2"]}]
    cdi = write_units(tmp_path / "cdi", "--gpus", "0,2", "--cdi")
    argv = quadlet_argv(cdi, tmp_path, "cdi-home")
    assert option_values(argv, "--device")[:2] == ["nvidia.com/gpu=0", "nvidia.com/gpu=2"]


def test_host_ipc_replaces_the_sized_shm_in_both(tmp_path):
    folder = write_units(tmp_path, "--gpus", "2", "--ipc-host")
    service = compose_service(folder, "compose.yaml")
    assert service["ipc"] == "host" and "shm_size" not in service
    argv = quadlet_argv(folder, tmp_path)
    assert "--ipc=host" in argv and not option_values(argv, "--shm-size")


@pytest.mark.parametrize("gpus", ["0", "two", "0,0", "1,,2"])
def test_bad_gpu_selections_exit_2_and_write_nothing(tmp_path, gpus):
    out = tmp_path / "units"
    assert build_py().main(["units", "--defaults", "--out", str(out), "--gpus", gpus]) == 2
    assert not out.exists()
