"""`python3 -m entrypoint check --json` on the GPU host itself, outside a container, with
its real /dev/nvidia* nodes and the driver libraries in /usr/local/nvidia/lib64.

Breakage is made in a private mount namespace (unshare -m), so the host is untouched:
libcuda is made unreachable by bind-mounting /dev/null over every libcuda file the
loader could find; a device node is hidden by mounting a copy of /dev without it. Run
as root, NVIDIA's user-space driver recreates missing nodes at cuInit (seen on the GPU
machine: the check then found them all again), as it cannot in a container without the
toolkit; so the check runs without CAP_MKNOD there, the way such a container is stuck.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from tooling.gpu_site import REPO, python_env

HARDWARE_CHECKS = ("devices", "driver", "torch")

FIND_LIBCUDA = """
import ctypes, glob, os, subprocess
ctypes.CDLL("libcuda.so.1")
loaded = {l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l}
cached = [l.split("=>")[-1].strip() for l in subprocess.run(["ldconfig", "-p"], capture_output=True,
          text=True).stdout.splitlines() if "libcuda.so" in l]
dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + ["/usr/local/nvidia/lib64"]
listed = [p for d in dirs for p in glob.glob(os.path.join(d, "libcuda.so*"))]
print("\\n".join(sorted({os.path.realpath(p) for p in (*loaded, *cached, *listed) if os.path.exists(p)})))
"""


def run_check(env: dict, setup: str = "", prefix: tuple = ()) -> dict:
    """The JSON report of `entrypoint check`, after `setup` ran in a private mount namespace,
    run under the `prefix` command."""
    command = [*prefix, sys.executable, "-m", "entrypoint", "check", "--json"]
    if setup:
        script = f"set -e; {setup}; exec {shlex.join(command)}"
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), f"exit {done.returncode}: {done.stderr.strip()[-2000:]}"
    return json.loads(done.stdout)


def by_name(report: dict) -> dict:
    return {check["name"]: check for check in report["checks"]}


@pytest.fixture(scope="module")
def check_env(vllm_site, tmp_path_factory) -> dict:
    """Settings for a check run: a model dir with nothing in it (the model check's business, not ours)."""
    model = tmp_path_factory.mktemp("model")
    return python_env(vllm_site, MODEL=str(model), HF_HUB_OFFLINE="1")


def test_hardware_checks_pass_on_the_gpu_host(check_env, figures):
    report = run_check(check_env)
    figures["preflight"] = report
    checks = by_name(report)
    for name in HARDWARE_CHECKS:
        assert checks[name]["status"] == "pass", checks[name]
    assert report["device"]["count"] >= 1 and report["device"]["smem_optin"] > 0
    # the site's vLLM carries the clamp, and the entrypoint finds it there
    assert checks["clamp"]["status"] == "pass", checks["clamp"]


def libcuda_files(env: dict) -> list[str]:
    done = subprocess.run([sys.executable, "-c", FIND_LIBCUDA], env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_unreachable_libcuda_fails_the_driver_check(check_env, figures):
    files = libcuda_files(check_env)
    assert files, "libcuda.so.1 loads, yet no file of it was found to hide"
    report = run_check(check_env, "; ".join(f"mount --bind /dev/null {shlex.quote(f)}" for f in files))
    figures["preflight_without_libcuda"] = report
    driver = by_name(report)["driver"]
    assert driver["status"] == "fail", driver
    assert "libcuda.so.1" in driver["message"]
    assert "/usr/local/nvidia/lib64" in driver["fix"] and "libcuda.so.1" in driver["fix"]
    assert report["ok"] is False


WITHOUT_MKNOD = ("setpriv", "--bounding-set=-mknod")


def without_device_node(node: str) -> str:
    """Shell: mount a copy of /dev without `node` (a shell glob: nvidia[0-9]* hides every GPU node
    of a host with several GPUs) over /dev, inside the private namespace."""
    return ("copy=$(mktemp -d); mount -t tmpfs -o mode=755 devcopy \"$copy\"; "
            "cp -a /dev/. \"$copy\"/ 2>/dev/null || true; "
            f"rm -f \"$copy\"/{node}; mount --bind \"$copy\" /dev; "
            f"! ls /dev/{node} >/dev/null 2>&1")


@pytest.mark.parametrize("node,finding", [
    ("nvidia[0-9]*", "no /dev/nvidiaN GPU node"),
    ("nvidia-uvm", "/dev/nvidia-uvm is missing"),
])
def test_hidden_device_node_fails_the_devices_check(check_env, figures, node, finding):
    report = run_check(check_env, without_device_node(node), prefix=WITHOUT_MKNOD)
    figures[f"preflight_without_{node.replace('[0-9]*', 'N')}"] = report
    devices = by_name(report)["devices"]
    assert devices["status"] == "fail", devices
    assert devices["message"] == finding
    assert "/dev/nvidia0..N" in devices["fix"] and "/dev/nvidia-uvm" in devices["fix"]
    assert report["ok"] is False
