"""`build.py units`: generation against a stand-in host (/dev tree and driver library directory in tmp),
the committed units equal to the generator's defaults, and compose/Quadlet parity."""
from __future__ import annotations

import os
from ipaddress import ip_address
from pathlib import Path

import pytest
import yaml

from buildtool.units.spec import (CONTAINER_LIB_DIR, DRIVER_LIBRARIES, HostValues, UnitSpec,
                                  gpu_indices_from_names, image_version)
from contract.layout import API_KEY_PATH, API_KEY_SECRET, ENV_API_KEY_FILE
from buildtool.units.compose import render_compose, render_toolkit_override
from buildtool.units.quadlet import podman_image_ref, render_env_file, render_quadlet
from tests.support.build_py import build_py
from tests.support.deploy_units import (compose_view, interpolate_defaults, parse_unit, quadlet_view,
                                        uncommented)
from tests import REPO



class ComposeLoader(yaml.SafeLoader):
    """Reads compose's !reset / !override tags as plain values."""


for _tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(_tag, lambda loader, node: (
        loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode) else loader.construct_scalar(node)))


def load_compose(text: str) -> dict:
    return yaml.load(interpolate_defaults(text), Loader=ComposeLoader)


@pytest.fixture
def standin_host(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    libs = tmp_path / "lib"
    libs.mkdir()
    for name in DRIVER_LIBRARIES:
        (libs / name).write_bytes(b"\x7fELF")
    return dev, libs


def generate(out: Path, *args: str) -> int:
    """`build.py units` in this process."""
    return build_py().main(["units", "--out", str(out), *args])


def test_committed_units_are_exactly_the_generators_defaults(tmp_path):
    assert generate(tmp_path, "--defaults") == 0
    for name in ("compose.yaml", "compose.toolkit.yaml", "quadlet/vllm-turing.container",
                 "quadlet/vllm-turing.env"):
        assert (REPO / name).read_text() == (tmp_path / name).read_text(), \
            f"{name} differs from `python3 build.py units --defaults`: regenerate it"


def test_generation_reads_the_hosts_gpus_and_library_directory(tmp_path, standin_host, capsys):
    dev, libs = standin_host
    out = tmp_path / "out"
    assert generate(out, "--dev-root", str(dev), "--lib-dir", str(libs), "--model-dir", "/srv/models") == 0
    compose = load_compose((out / "compose.yaml").read_text())["services"]["vllm"]
    assert compose["devices"] == [f"/dev/{n}:/dev/{n}" for n in
                                  ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
    lib_mounts = {v["source"]: v["target"] for v in compose["volumes"]
                  if isinstance(v, dict) and v["target"].startswith(CONTAINER_LIB_DIR)}
    assert lib_mounts == {f"{libs}/{n}": f"{CONTAINER_LIB_DIR}/{n}" for n in DRIVER_LIBRARIES}
    unit = parse_unit((out / "quadlet/vllm-turing.container").read_text())["Container"]
    assert "AddDevice=/dev/nvidia1" in [f"AddDevice={d}" for d in unit["AddDevice"]]
    assert f"{libs}/libcuda.so.1:{CONTAINER_LIB_DIR}/libcuda.so.1:ro" in unit["Volume"]
    assert "/srv/models:/models:ro" in unit["Volume"]
    assert "2 GPU(s)" in capsys.readouterr().out


def test_defaults_read_nothing_from_the_host_but_take_every_option_given(tmp_path, monkeypatch):
    monkeypatch.setenv("NVIDIA_LIB_DIR", str(tmp_path / "not-read"))
    assert generate(tmp_path, "--defaults", "--image", "me/vllm-turing:1", "--port", "8123", "--bind", "0.0.0.0",
                    "--model-dir", "/srv/llm", "--gpus", "2", "--dev-root", str(tmp_path / "no-dev")) == 0
    compose = load_compose((tmp_path / "compose.yaml").read_text())["services"]["vllm"]
    assert compose["image"] == "me/vllm-turing:1" and compose["ports"] == ["0.0.0.0:8123:8000"]
    assert "/dev/nvidia1:/dev/nvidia1" in compose["devices"]
    assert {"/srv/llm", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"} <= {v["source"] for v in compose["volumes"]
                                                                      if isinstance(v, dict)}
    unit = parse_unit((tmp_path / "quadlet/vllm-turing.container").read_text())["Container"]
    assert unit["Image"] == ["localhost/me/vllm-turing:1"] and unit["PublishPort"] == ["0.0.0.0:8123:8000"]
    assert "/srv/llm:/models:ro" in unit["Volume"]


@pytest.mark.parametrize("defaults", [(), ("--defaults",)])
@pytest.mark.parametrize("port", ["0", "65536"])
def test_a_port_out_of_range_is_bad_input_and_nothing_is_written(tmp_path, standin_host, capsys, defaults, port):
    dev, libs = standin_host
    out = tmp_path / "out"
    assert generate(out, *defaults, "--dev-root", str(dev), "--lib-dir", str(libs), "--port", port) == 2
    err = capsys.readouterr().err
    assert f"argument --port: '{port}': expected a port from 1 to 65535" in err and err.count("\n") == 1
    assert not out.exists()


def test_library_directory_from_the_environment(tmp_path, standin_host, monkeypatch):
    dev, libs = standin_host
    monkeypatch.setenv("NVIDIA_LIB_DIR", str(libs))
    assert generate(tmp_path, "--dev-root", str(dev)) == 0
    assert f"Volume={libs}/libnvidia-ml.so.1:" in (tmp_path / "quadlet/vllm-turing.container").read_text()


def test_a_library_directory_without_the_driver_is_refused_and_nothing_written(tmp_path, standin_host, capsys):
    dev, libs = standin_host
    (libs / "libnvidia-ptxjitcompiler.so.1").unlink()
    out = tmp_path / "out"
    assert generate(out, "--dev-root", str(dev), "--lib-dir", str(libs)) == 2
    err = capsys.readouterr().err
    assert "libnvidia-ptxjitcompiler.so.1" in err and "--lib-dir" in err and "Traceback" not in err
    assert not out.exists()


def test_a_host_without_gpu_nodes_is_refused_unless_told_the_count(tmp_path, standin_host, capsys):
    _, libs = standin_host
    empty_dev = tmp_path / "nodev"
    empty_dev.mkdir()
    assert generate(tmp_path / "a", "--dev-root", str(empty_dev), "--lib-dir", str(libs)) == 2
    assert "--gpus N" in capsys.readouterr().err
    assert generate(tmp_path / "b", "--dev-root", str(empty_dev), "--lib-dir", str(libs), "--gpus", "3") == 0
    assert "AddDevice=/dev/nvidia2" in (tmp_path / "b/quadlet/vllm-turing.container").read_text()


@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_a_bad_gpu_count_is_bad_input(tmp_path, bad, capsys):
    assert generate(tmp_path, "--gpus", bad) == 2
    assert "--gpus" in capsys.readouterr().err


def test_the_users_env_file_is_never_overwritten(tmp_path):
    env = tmp_path / "quadlet/vllm-turing.env"
    env.parent.mkdir()
    env.write_text("MODEL=/models/mine\n")
    assert generate(tmp_path, "--defaults") == 0
    assert env.read_text() == "MODEL=/models/mine\n"
    assert (tmp_path / "compose.yaml").exists()


def test_gpu_nodes_are_told_apart_from_control_nodes():
    names = ["nvidia10", "nvidiactl", "nvidia-uvm", "nvidia2", "nvidia-uvm-tools", "nvidia-caps", "nvidia0"]
    assert gpu_indices_from_names(names) == (0, 2, 10)


@pytest.mark.parametrize("image, ref", [("vllm-turing:0.33.0", "localhost/vllm-turing:0.33.0"),
                                        ("me/vllm-turing:1", "localhost/me/vllm-turing:1"),
                                        ("registry.example:5000/x/y:1", "registry.example:5000/x/y:1"),
                                        ("localhost/vllm-turing:0.33.0", "localhost/vllm-turing:0.33.0")])
def test_podman_image_reference_stays_local(image, ref):
    assert podman_image_ref(image) == ref


HOSTS = [HostValues(), HostValues(gpu_indices=(0, 1, 3), lib_dir="/usr/lib64/", model_dir="/srv/llm",
                                  bind_address=ip_address("0.0.0.0"), port=8123, api_key_file="/etc/vllm-turing/key")]


@pytest.mark.parametrize("host", HOSTS)
def test_compose_and_quadlet_carry_the_same_devices_mounts_and_settings(host):
    spec = UnitSpec(host)
    compose = compose_view(load_compose(render_compose(spec))["services"]["vllm"])
    quadlet = quadlet_view(parse_unit(render_quadlet(spec)), home=os.path.expanduser("~"))
    compose["binds"] = sorted((os.path.expanduser(s), t, ro) for s, t, ro in compose["binds"])
    assert compose == quadlet
    # and what they agree on is what the host needs
    assert compose["devices"] == sorted([f"/dev/nvidia{i}" for i in host.gpu_indices]
                                        + ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"])
    assert all(ro for _, _, ro in compose["binds"])
    assert compose["named_volume_targets"] == sorted(spec.cache_volumes.values())
    assert compose["port"] == (str(host.bind_address), host.port, 8000)
    assert compose["memlock"] == -1


def test_the_toolkit_override_keeps_everything_but_the_hand_wiring():
    spec = UnitSpec()
    base = load_compose(render_compose(spec))["services"]["vllm"]
    override = load_compose(render_toolkit_override(spec))["services"]["vllm"]
    assert override["devices"] == []
    kept = [v for v in base["volumes"] if not (isinstance(v, dict) and v["target"].startswith(CONTAINER_LIB_DIR))]
    assert override["volumes"] == kept
    assert override["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def test_the_cdi_unit_asks_for_all_gpus_and_wires_nothing_by_hand(tmp_path, standin_host):
    dev, libs = standin_host
    assert generate(tmp_path, "--cdi", "--dev-root", str(dev), "--lib-dir", str(libs)) == 0
    container = parse_unit((tmp_path / "quadlet/vllm-turing.container").read_text())["Container"]
    assert container["AddDevice"] == ["nvidia.com/gpu=all"]
    assert not [v for v in container["Volume"] if CONTAINER_LIB_DIR in v]


def test_cdi_demands_no_driver_libraries_on_this_host(tmp_path, standin_host, monkeypatch):
    """The CDI spec mounts the libraries: a host whose library directory lacks them (or with none at
    the default path) still gets its units."""
    dev, _ = standin_host
    monkeypatch.setenv("NVIDIA_LIB_DIR", str(tmp_path / "no-such-dir"))
    assert generate(tmp_path / "out", "--cdi", "--dev-root", str(dev)) == 0
    assert generate(tmp_path / "without", "--dev-root", str(dev)) == 2  # without --cdi the check stands


def test_compile_caches_are_keyed_by_the_image_version_and_downloads_are_not():
    assert image_version("vllm-turing:0.33.0") == "0.33.0"
    assert image_version("registry.example:5000/me/vllm-turing:0.33.0-b2") == "0.33.0-b2"
    assert image_version("registry.example:5000/me/vllm-turing") == "0.33.0"  # untagged: the pinned vLLM
    assert image_version("me/vllm-turing@sha256:" + "a" * 64) == "0.33.0"
    volumes = UnitSpec(HostValues(image="me/vllm-turing:0.34.1")).cache_volumes
    assert volumes == {"hf-cache": "/cache/huggingface", "triton-cache-0.34.1": "/opt/vllm-turing/triton-cache",
                       "vllm-cache-0.34.1": "/cache/vllm"}
    # every cache the environment points at lies on a compile volume
    env = UnitSpec().environment
    for key in ("TRITON_CACHE_DIR", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME", "CUDA_CACHE_PATH"):
        assert any(env[key] == target or env[key].startswith(target + "/")
                   for target in UnitSpec().compile_volumes.values()), key
    compose = load_compose(render_compose(UnitSpec(HostValues(image="me/vllm-turing:0.34.1"))))
    assert set(compose["volumes"]) == set(volumes)
    quadlet = parse_unit(render_quadlet(UnitSpec(HostValues(image="me/vllm-turing:0.34.1"))))["Container"]
    assert "vllm-turing-vllm-cache-0.34.1:/cache/vllm" in quadlet["Volume"]


def test_the_api_key_wiring_is_commented_out_by_default_and_written_on_with_a_key_file(tmp_path):
    off = load_compose(render_compose(UnitSpec()))
    assert "secrets" not in off and "secrets" not in off["services"]["vllm"]
    assert ENV_API_KEY_FILE not in off["services"]["vllm"]["environment"]
    assert generate(tmp_path, "--defaults", "--api-key-file", "/etc/vllm-turing/key") == 0
    text = (tmp_path / "compose.yaml").read_text()
    on = load_compose(text)
    assert on["secrets"] == {API_KEY_SECRET: {"file": "/etc/vllm-turing/key"}}
    assert on["services"]["vllm"]["secrets"] == [API_KEY_SECRET]
    assert on["services"]["vllm"]["environment"][ENV_API_KEY_FILE] == API_KEY_PATH
    unit = parse_unit((tmp_path / "quadlet/vllm-turing.container").read_text())["Container"]
    assert unit["Secret"] == [f"{API_KEY_SECRET},type=mount,target={API_KEY_PATH}"]
    assert f"{ENV_API_KEY_FILE}={API_KEY_PATH}" in unit["Environment"]
    assert "podman secret create vllm-api-key /etc/vllm-turing/key" in \
        (tmp_path / "quadlet/vllm-turing.container").read_text()


def test_uncommenting_the_shipped_wiring_gives_what_the_key_file_option_writes():
    """The commented lines are the real wiring: uncommented, they equal the rendered-on service
    but for the example path of the key's file."""
    shipped = render_compose(UnitSpec())
    by_hand = load_compose(uncommented(shipped))
    written = load_compose(render_compose(UnitSpec(HostValues(api_key_file="./secrets/vllm-api-key"))))
    assert by_hand == written
    unit = render_quadlet(UnitSpec())
    by_hand_unit = parse_unit(uncommented(unit))
    assert by_hand_unit == parse_unit(render_quadlet(UnitSpec(HostValues(api_key_file="FILE"))))


def test_the_units_drop_every_capability_and_privilege_gain():
    service = load_compose(render_compose(UnitSpec()))["services"]["vllm"]
    assert service["cap_drop"] == ["ALL"] and service["security_opt"] == ["no-new-privileges:true"]
    unit = parse_unit(render_quadlet(UnitSpec()))["Container"]
    assert unit["DropCapability"] == ["ALL"] and unit["NoNewPrivileges"] == ["true"]


def test_the_env_file_is_plain_key_value_lines_both_tools_read_alike():
    for line in render_env_file().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            assert key.isidentifier() and key.isupper(), line
            assert not any(c in value for c in "\"'#") and value == value.strip(), line
    assert "MODEL=" in render_env_file()


@pytest.mark.parametrize("kubernetes", [(), ("--kubernetes", "--weights-gib", "4")])
def test_a_key_file_path_over_two_lines_is_bad_input_and_nothing_is_written(tmp_path, capsys, kubernetes):
    out = tmp_path / "out"
    assert generate(out, "--defaults", *kubernetes, "--api-key-file", "/etc/key\nSecret=evil") == 2
    err = capsys.readouterr().err
    assert "--api-key-file" in err and err.count("\n") == 1 and not out.exists()
