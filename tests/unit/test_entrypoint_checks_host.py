"""Device nodes, driver libraries, port: against real device nodes (mknod), real shared libraries
(StandIn driver builds, since no NVIDIA driver exists here) and real sockets."""
import os
import socket
import stat

import pytest

from contract.verdict import Status
from entrypoint.checks.devices import check_devices
from entrypoint.checks.driver import check_driver, compare_versions, kernel_driver_version
from entrypoint.checks.port import check_port

from tooling.standins.standin_driver import build_standin_driver, proc_driver_version_text

NULL = os.makedev(1, 3)          # a working character device (the one behind /dev/null)
NO_DRIVER = os.makedev(195, 0)   # nvidia's major number: no driver behind it on this machine


def make_dev(root, nodes):
    root.mkdir()
    for name, number in nodes.items():
        os.mknod(root / name, stat.S_IFCHR | 0o666, number)
    return str(root)


def test_devices_pass_when_all_nodes_open_read_write(tmp_path):
    dev = make_dev(tmp_path / "dev", {"nvidia0": NULL, "nvidia1": NULL, "nvidiactl": NULL, "nvidia-uvm": NULL})
    result = check_devices(dev)
    assert result.status is Status.PASS and "nvidia0, nvidia1" in result.message


@pytest.mark.parametrize("missing", ["nvidiactl", "nvidia-uvm"])
def test_devices_fail_naming_a_missing_node(tmp_path, missing):
    nodes = {"nvidia0": NULL, "nvidiactl": NULL, "nvidia-uvm": NULL}
    del nodes[missing]
    result = check_devices(make_dev(tmp_path / "dev", nodes))
    assert result.status is Status.FAIL and result.message.endswith(f"{missing} is missing")
    assert "--device" in result.fix or "devices:" in result.fix


def test_devices_fail_without_a_gpu_node(tmp_path):
    result = check_devices(make_dev(tmp_path / "dev", {"nvidiactl": NULL, "nvidia-uvm": NULL}))
    assert result.status is Status.FAIL and "nvidiaN" in result.message


def test_devices_fail_on_a_regular_file_bind_mounted_as_node(tmp_path):
    dev = make_dev(tmp_path / "dev", {"nvidia0": NULL, "nvidia-uvm": NULL})
    (tmp_path / "dev" / "nvidiactl").write_text("")
    result = check_devices(dev)
    assert result.status is Status.FAIL and "not a character device" in result.message


def test_devices_fail_when_the_node_has_no_driver_behind_it(tmp_path):
    dev = make_dev(tmp_path / "dev", {"nvidia0": NO_DRIVER, "nvidiactl": NULL, "nvidia-uvm": NULL})
    result = check_devices(dev)
    assert result.status is Status.FAIL and "cannot be opened read-write" in result.message
    assert "kernel module" in result.fix


@pytest.mark.parametrize("text,version", [
    (proc_driver_version_text("535.104.05"), "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)\n",
     "570.86.15"),
    ("garbage", None)])
def test_kernel_driver_version_parses_proc_text(text, version):
    assert kernel_driver_version(text) == version


def test_version_comparison_names_both_versions():
    result = compare_versions("550.54.14", "535.104.05")
    assert result.status is Status.FAIL and "mismatch" in result.message
    assert "550.54.14" in result.message and "535.104.05" in result.fix


@pytest.fixture(scope="module")
def standin_libs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drivers")
    return {"535": build_standin_driver(root / "535", driver_version="535.104.05"),
            "550": build_standin_driver(root / "550", driver_version="550.54.14"),
            "rm_mismatch": build_standin_driver(root / "rm", nvml_init_code=18),
            "no_device": build_standin_driver(root / "nodev", cu_init_code=100)}


def driver_result(libs, proc_file):
    return check_driver(str(libs / "libcuda.so.1"), str(libs / "libnvidia-ml.so.1"), str(proc_file))


def test_driver_passes_when_library_and_kernel_agree(standin_libs, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(proc_driver_version_text("535.104.05"))
    result = driver_result(standin_libs["535"], proc)
    assert result.status is Status.PASS and "535.104.05" in result.message


def test_driver_fails_on_libraries_of_another_release(standin_libs, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(proc_driver_version_text("535.104.05"))
    result = driver_result(standin_libs["550"], proc)
    assert result.status is Status.FAIL and "driver/library version mismatch" in result.message


def test_driver_fails_when_nvml_reports_the_mismatch_itself(standin_libs, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(proc_driver_version_text("535.104.05"))
    result = driver_result(standin_libs["rm_mismatch"], proc)
    assert result.status is Status.FAIL and "version mismatch" in result.message and "535.104.05" in result.fix


def test_driver_fails_when_cuinit_finds_no_device(standin_libs, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(proc_driver_version_text("535.104.05"))
    result = driver_result(standin_libs["no_device"], proc)
    assert result.status is Status.FAIL and "CUDA_ERROR_NO_DEVICE" in result.message


def test_driver_fails_when_libcuda_is_not_mounted(tmp_path):
    result = check_driver(str(tmp_path / "libcuda.so.1"), "libnvidia-ml.so.1", str(tmp_path / "version"))
    assert result.status is Status.FAIL and "does not load" in result.message
    assert "/usr/local/nvidia/lib64" in result.fix


def test_driver_fails_on_a_file_that_is_not_a_library(standin_libs, tmp_path):
    not_an_elf = tmp_path / "libnvidia-ml.so.1"
    not_an_elf.write_text("not an ELF file")
    result = check_driver(str(standin_libs["535"] / "libcuda.so.1"), str(not_an_elf), str(tmp_path / "version"))
    assert result.status is Status.FAIL and "libnvidia-ml.so.1 does not load" in result.message


def test_port_free_and_busy():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        result = check_port("127.0.0.1", busy)
        assert result.status is Status.FAIL and str(busy) in result.message and "PORT" in result.fix
    assert check_port("127.0.0.1", busy).status is Status.PASS


def test_port_with_an_unresolvable_host():
    assert check_port("no-such-host.invalid", 8000).status is Status.FAIL
