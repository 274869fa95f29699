"""The entrypoint's modes end to end, as a process: the report (one line per finding with its fix,
how long the checks took), --json, SKIP_CHECKS, and exec of the server in place of the entrypoint."""
import json
import subprocess
import sys
from pathlib import Path

from contract.layout import DEPRECATED_ENV_NAMES, ENV_SMEM_LIMIT
from entrypoint.settings import CHECK_NAMES

from tests.support.entrypoint_cli import REPO, run_entrypoint
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver
from tests.support.standin_vllm import write_standin_vllm
from tooling.serving_stack import free_port

DEVICE_CHECKS = "devices,driver,torch,clamp,fit"
OLD_SMEM_LIMIT = next(old for old, new in DEPRECATED_ENV_NAMES.items() if new == ENV_SMEM_LIMIT)
STANDIN_SERVER = """
import json, os, sys
with open(os.environ["STANDIN_RECORD"], "w") as record:
    json.dump({"pid": os.getpid(), "argv": sys.argv[1:], "env": dict(os.environ)}, record)
"""


def test_check_without_gpu_fails_the_device_checks_with_fixes(tmp_path):
    write_model_dir(tmp_path / "model")
    done = run_entrypoint({"MODEL": str(tmp_path / "model"), "PORT": str(free_port())}, "check")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("vllm-turing preflight, device: none")
    by_name = {line.split()[1]: line for line in lines[1:-1]}
    assert list(by_name) == list(CHECK_NAMES)
    for name in ("devices", "driver"):
        assert by_name[name].startswith("FAIL") and " -> fix: " in by_name[name]
    assert by_name["model"].startswith("PASS")
    assert lines[-1].startswith("checks took ") and " s: " in lines[-1]


def test_check_json_report(tmp_path):
    write_model_dir(tmp_path / "model")
    done = run_entrypoint({"MODEL": str(tmp_path / "model"), "SKIP_CHECKS": "port,disk"}, "check", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["ok"] is False and report["elapsed_s"] >= 0
    statuses = {check["name"]: check for check in report["checks"]}
    assert statuses["devices"]["status"] == "fail" and statuses["devices"]["fix"]
    assert statuses["port"] == {**statuses["port"], "status": "warn", "message": "skipped by SKIP_CHECKS"}
    assert report["argv"][report["argv"].index("--model") + 1] == str(tmp_path / "model")


def test_standin_t4_is_the_reported_device(tmp_path):
    libs = build_standin_driver(tmp_path / "lib", cc=(7, 5), smem_optin=65536)
    done = run_entrypoint({"MODEL": "google/gemma-4-E2B-it", "SKIP_CHECKS": "torch,fit"}, "check", library_path=libs)
    assert "StandIn Tesla T4 x1, compute capability 7.5, 65536 bytes" in done.stdout.splitlines()[0]


def serve(tmp_path, env):
    standin = write_standin_vllm(tmp_path / "standin", STANDIN_SERVER)
    record = tmp_path / "record.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "entrypoint", "--max-lora-rank", "8"], cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
             "PYTHONPATH": f"{standin}:{REPO}", "STANDIN_RECORD": str(record), **env})
    out, err = process.communicate(timeout=60)
    return process, record, out, err


def test_nvml_is_read_before_the_preflights_cuda_context_and_the_server_execd_after_its_release(tmp_path):
    write_model_dir(tmp_path / "model")
    # NVML's view (the memory check's) is read before the preflight makes its context, or the card
    # would count that context as used: NVML answers after half a second, the context at once. The
    # release takes a second: an exec that did not wait for it would leave no "release" line.
    libs = build_standin_driver(tmp_path / "lib", latency_ms={"nvmlInit_v2": 500, "cuDevicePrimaryCtxRelease": 1000})
    log = tmp_path / "driver.log"
    process, record, out, err = serve(tmp_path, {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()),
                                                 "SKIP_CHECKS": DEVICE_CHECKS, "LD_LIBRARY_PATH": str(libs),
                                                 "STANDIN_DRIVER_LOG": str(log)})
    assert process.returncode == 0 and record.exists(), out + err
    assert log.read_text().splitlines() == ["memory read", "retain", "release"]


def test_check_ends_once_the_preflights_cuda_context_is_released(tmp_path):
    write_model_dir(tmp_path / "model")
    libs = build_standin_driver(tmp_path / "lib", latency_ms={"cuDevicePrimaryCtxRelease": 2000})
    log = tmp_path / "driver.log"
    # the probe makes the context whatever checks run: without the slow ones, the exit comes first
    done = run_entrypoint({"MODEL": str(tmp_path / "model"), "SKIP_CHECKS": DEVICE_CHECKS + ",port",
                           "STANDIN_DRIVER_LOG": str(log)}, "check", library_path=libs)
    assert "StandIn Tesla T4" in done.stdout.splitlines()[0], done.stdout + done.stderr
    assert log.read_text().splitlines() == ["memory read", "retain", "release"]  # not cut off by the exit


def test_default_mode_execs_the_server_in_its_own_process(tmp_path):
    write_model_dir(tmp_path / "model")
    process, record, out, err = serve(tmp_path, {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()),
                                                 "SKIP_CHECKS": DEVICE_CHECKS})
    assert process.returncode == 0, out + err
    seen = json.loads(record.read_text())
    assert seen["pid"] == process.pid  # exec: the server replaced the entrypoint, no child
    assert seen["argv"][:2] == ["--model", str(tmp_path / "model")] and seen["argv"][-2:] == ["--max-lora-rank", "8"]
    assert any(line.split()[:2] == ["WARN", "devices"] and line.endswith("skipped by SKIP_CHECKS -> fix: remove devices "
                                                                         "from SKIP_CHECKS to run it")
               for line in out.splitlines()), out
    # the entrypoint's own settings stay behind: vLLM warns about every VLLM_* name it does not own
    assert not {"MODEL", "PORT", "SKIP_CHECKS"} & set(seen["env"])
    assert seen["env"]["STANDIN_RECORD"] == str(record)


def test_a_deprecated_clamp_name_reaches_the_server_under_its_new_name_with_a_warning(tmp_path):
    write_model_dir(tmp_path / "model")
    process, record, out, err = serve(tmp_path, {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()),
                                                 "SKIP_CHECKS": DEVICE_CHECKS, "VLLM_EXTRA_ARGS": "--seed 1",
                                                 OLD_SMEM_LIMIT: "65536"})
    assert process.returncode == 0, out + err
    seen = json.loads(record.read_text())
    assert seen["env"][ENV_SMEM_LIMIT] == "65536"
    assert not [name for name in seen["env"] if name.startswith("VLLM_")]
    assert "WARN  env" in out and f"{OLD_SMEM_LIMIT} is now {ENV_SMEM_LIMIT}" in out


def test_default_mode_does_not_start_the_server_when_a_check_fails(tmp_path):
    process, record, out, err = serve(tmp_path, {"MODEL": str(tmp_path / "absent"), "SKIP_CHECKS": DEVICE_CHECKS})
    assert process.returncode == 1 and not record.exists()
    assert "FAIL  model" in out
