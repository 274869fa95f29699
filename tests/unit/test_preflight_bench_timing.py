"""bench/preflight_gpu times each run as a container start meets it: its own process holds no CUDA
(tooling/cuda_free.py, asked before every timing), and bench/preflight prints every check's time."""
import json
import subprocess
import sys

from tooling.cuda_free import held
from tests import REPO

LIBCUDA_LINE = "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
PLAIN_LINE = "7f1c2b000000-7f1c2b100000 r-xp 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6"


def test_a_loaded_driver_and_an_imported_torch_are_found():
    assert held(f"{PLAIN_LINE}\n{LIBCUDA_LINE}\n", ["json", "torch"]) == [
        "module torch imported", "libcuda.so.580.159.04 loaded"]


def test_a_process_without_cuda_holds_nothing():
    assert held(f"{PLAIN_LINE}\n7f00-7f01 rw-p 00000000 00:00 0\n", ["json", "ctypes", "torchvision_not"]) == []


CHILD = """
import importlib.machinery, importlib.util, json, sys, types
loader = importlib.machinery.SourceFileLoader("preflight_gpu", sys.argv[1])
module = importlib.util.module_from_spec(importlib.util.spec_from_loader("preflight_gpu", loader))
loader.exec_module(module)  # the thin executable, as its #! runs it; its work is tooling.preflight_gpu's
module = sys.modules["tooling.preflight_gpu"]
before = module.held_here()
sys.modules["torch"] = types.ModuleType("torch")  # planted: the check must find it
try:
    module.refuse_if_cuda_held()
    refused = None
except SystemExit as stop:
    refused = str(stop)
print(json.dumps({"before": before, "refused": refused}))
"""


def test_the_gpu_bench_loads_without_cuda_and_refuses_to_time_once_it_holds_it():
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "bench" / "preflight_gpu")], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["before"] == []
    assert seen["refused"].startswith("bench/preflight_gpu: this process holds CUDA (module torch imported)")
    assert "\n" not in seen["refused"]


def test_bench_preflight_prints_every_check(tmp_path):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    model = f"--model={tmp_path / 'absent'}"
    report = subprocess.run([sys.executable, "-m", "entrypoint", "check", "--json"], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env=dict(env, MODEL=str(tmp_path / "absent")))
    names = [check["name"] for check in json.loads(report.stdout)["checks"]]
    assert len(names) > 6  # more than the six the bench used to print
    done = subprocess.run([sys.executable, str(REPO / "bench" / "preflight"), "--local", "--runs", "1", model],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = [line.split(" check:")[0] for line in done.stdout.splitlines() if " check:" in line]
    assert sorted(printed) == sorted(names)
