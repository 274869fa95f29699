"""Inputs a careless or hostile operator gives: each ends in one line naming the setting, never a
traceback, a hang or a forged report line; a hung check fails saying so; SIGTERM ends the preflight."""
import ctypes
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from contract.verdict import Status, passed
from entrypoint import hub_access, identity, preflight, preflight_report
from entrypoint.settings import SettingsError, parse_settings
from tests import REPO
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.model_files import write_model_dir
from door.problem import Problem


@pytest.mark.parametrize("variable, value, expected", [
    ("PORT", "²", "an integer from 1 to 65535"), ("PORT", "٨٠٠٠", "an integer from 1 to 65535"),
    ("PORT", "0", "an integer from 1 to 65535"), ("PORT", "65536", "an integer from 1 to 65535"),
    ("PORT", "8000.0", "an integer from 1 to 65535"), ("PORT", "-1", "an integer from 1 to 65535"),
    ("MAX_MODEL_LEN", "1" + "0" * 30, "an integer from 1 to"), ("MAX_MODEL_LEN", "1_000", "an integer from 1 to"),
    ("MAX_NUM_SEQS", "99999999", "an integer from 1 to"), ("TENSOR_PARALLEL_SIZE", "²", "an integer from 1 to"),
    ("MODEL", "/models/a\nPASS  fit  forged", "printable characters only"),
    ("MODEL", "/models/\x1b[2Jx", "printable characters only"),
    ("SERVED_MODEL_NAME", "gemma\r4", "printable characters only"),
    ("HOST", "0.0.0.0 --port 9", "an IP address or host name"),
    ("TOOL_CALL_PARSER", "gemma4 --x", "a parser name"), ("REASONING_PARSER", "../x", "a parser name"),
    ("HF_HOME", "/cache/\nx", "printable characters only"),
    ("VLLM_EXTRA_ARGS", "--seed 1\n--dtype bfloat16", "words on one line"),
    ("SPECULATIVE_CONFIG", "[" * 100000, "a JSON object"),
    ("SPECULATIVE_CONFIG", '{"model": ["x"]}', 'a "model" that is a path or model id'),
    ("CUDA_VISIBLE_DEVICES", "²", "comma-separated GPU indices"),
])
def test_a_bad_value_is_refused_naming_the_setting(variable, value, expected):
    with pytest.raises(SettingsError) as raised:
        parse_settings({"MODEL": "/models/m", variable: value})
    assert raised.value.variable == variable and expected in str(raised.value)
    assert "\n" not in str(raised.value) and "\x1b" not in str(raised.value)  # the value is shown escaped


def test_the_cli_refuses_in_one_escaped_line_and_exits_2():
    done = run_entrypoint({"MODEL": "/models/a\nPASS  fit  forged"}, "check")
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_report_text_escapes_what_could_forge_a_line():
    assert preflight_report.shown("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert preflight_report.shown("Tesla T4 é") == "Tesla T4 é"


def test_a_check_that_never_returns_fails_at_its_deadline_and_the_rest_run():
    never = threading.Event()
    checks = {"slow": lambda: never.wait(), "next": lambda: passed("next", "ran")}
    old = preflight.CHECK_DEADLINE_S
    preflight.CHECK_DEADLINE_S = 0.2
    try:
        results = preflight.run_checks(checks, ())
    finally:
        preflight.CHECK_DEADLINE_S = old
    assert results[0].status is Status.FAIL and "did not finish in 0.2 s" in results[0].message
    assert "SKIP_CHECKS=slow" in results[0].fix and results[1].status is Status.PASS


def test_a_check_that_raises_fails_in_one_line_instead_of_a_traceback():
    results = preflight.run_checks({"broken": lambda: {}["missing"]}, ())
    assert results[0].status is Status.FAIL and results[0].message == "the check could not run: KeyError: 'missing'"


def test_sigterm_during_the_preflight_ends_it_with_143_and_kills_its_children():
    code = ("import subprocess, sys, time\n"
            "from entrypoint.stop_signals import end_on_stop_signals\n"
            "end_on_stop_signals()\n"
            "child = subprocess.Popen(['sleep', '600'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n")
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    # SIGKILL is delivered asynchronously: on a loaded host the child may run a moment longer, so wait
    # for it to die (a zombie until init reaps it, or gone); a child left alive fails at the deadline
    deadline = time.monotonic() + 60
    while child_state(child) not in ("Z", "X", None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_state(child) in ("Z", "X", None)


def child_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_an_unknown_uid_gets_a_writable_home_and_a_user_name():
    added = identity.fallback_env({"HOME": "/"}, 4242, home_writable=False, user_known=False)
    assert added == {"HOME": "/tmp/vllm-turing-home-4242", "USER": "uid4242", "LOGNAME": "uid4242"}
    assert identity.fallback_env({"HOME": "/root"}, 0, home_writable=True, user_known=True) == {}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_hub_is_told_in_seconds_naming_what_failed():
    refused = hub_access.unreachable({"HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"})
    assert refused is not None and "no connection" in refused[1]
    unknown = hub_access.unreachable({"HF_ENDPOINT": "https://nonexistent.invalid"})
    assert unknown == ("nonexistent.invalid", unknown[1]) and "does not resolve" in unknown[1]
    via_proxy = hub_access.unreachable({"HF_ENDPOINT": "https://nonexistent.invalid",
                                 "HTTPS_PROXY": f"http://127.0.0.1:{closed_port()}"})
    assert via_proxy[0].startswith("127.0.0.1:")


def test_a_hub_model_on_a_host_without_network_fails_the_model_check(tmp_path):
    done = run_entrypoint({"MODEL": "google/gemma-4-E2B-it", "HF_HUB_CACHE": str(tmp_path), "DOWNLOAD_AT_START": "true",
                           "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "SKIP_CHECKS": "port"}, "check")
    line = next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["model"])
    assert line.startswith("FAIL") and "the Hub cannot be reached (127.0.0.1:" in line, done.stdout


def test_the_driver_context_probe_reports_the_drivers_refusal(tmp_path):
    from entrypoint.device import context_error
    from tooling.standins.standin_driver import build_standin_driver

    good = build_standin_driver(tmp_path / "good")
    refused = build_standin_driver(tmp_path / "refused", context_code=100)
    assert context_error(0, str(good / "libcuda.so.1")) is None
    assert ctypes.CDLL(str(good / "libcuda.so.1")).standin_retained() == 0  # released before the answer
    assert context_error(0, str(refused / "libcuda.so.1")) == "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_NO_DEVICE (100)"


def test_the_early_probe_answers_what_the_driver_answers_devices_and_context(tmp_path):
    from entrypoint.device import Probe
    from tooling.standins.standin_driver import build_standin_driver

    good = Probe(str(build_standin_driver(tmp_path / "good", cc=(8, 6), name="StandIn RTX 3090") / "libcuda.so.1"))
    assert [(device.name, device.cc) for device in good.devices()] == [("StandIn RTX 3090", (8, 6))]
    assert good.context_error(0) is None
    refused = Probe(str(build_standin_driver(tmp_path / "refused", context_code=100) / "libcuda.so.1"))
    assert refused.devices()[0].cc == (7, 5)
    assert refused.context_error(0) == "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_NO_DEVICE (100)"
    no_init = Probe(str(build_standin_driver(tmp_path / "no-init", cu_init_code=100) / "libcuda.so.1"))
    with pytest.raises(Problem, match=r"cuInit failed: CUDA_ERROR_NO_DEVICE \(100\)"):
        no_init.devices()
    assert no_init.context_error(0) == "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"  # asked again, answered again
    with pytest.raises(Problem, match="libcuda.so.1 does not load"):
        Probe(str(tmp_path / "absent" / "libcuda.so.1")).devices()


def test_the_early_probe_answers_once_the_context_is_made_and_releases_it_after(tmp_path):
    from entrypoint.device import Probe
    from entrypoint.preflight import within
    from tooling.standins.standin_driver import build_standin_driver

    slow_release = build_standin_driver(tmp_path / "slow", latency_ms={"cuDevicePrimaryCtxRelease": 30_000})
    probe = Probe(str(slow_release / "libcuda.so.1"))
    assert within(20, lambda: probe.context_error(0)) is None
    assert ctypes.CDLL(str(slow_release / "libcuda.so.1")).standin_retained() == 1  # its release is still running


def test_a_driver_that_blocks_in_cuinit_is_named_at_the_deadline_not_waited_for(tmp_path):
    from entrypoint.device import Probe
    from tooling.standins.standin_driver import build_standin_driver

    blocked = Probe(str(build_standin_driver(tmp_path / "blocks", latency_ms={"cuInit": 30_000}) / "libcuda.so.1"))
    with pytest.raises(Problem, match=r"^no answer from cuInit in 0.2 s$"):
        blocked.devices(deadline_s=0.2)


def test_a_model_folder_this_uid_cannot_reach_is_named_so_not_missing(tmp_path):
    locked = tmp_path / "locked"
    write_model_dir(locked / "model")
    locked.chmod(0o700)
    done = subprocess.run(["setpriv", "--reuid=4242", "--regid=0", "--clear-groups", sys.executable, "-m", "entrypoint",
                           "check"], env={"PATH": "/usr/bin:/bin", "HOME": "/", "PYTHONPATH": str(REPO),
                                          "MODEL": str(locked / "model")},
                          cwd="/", capture_output=True, text=True, timeout=120)
    line = next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["model"])
    assert "cannot be reached by uid 4242 (permission denied" in line and "chmod -R a+rX" in line, done.stdout


def test_a_weight_file_this_uid_cannot_read_asks_for_chmod_not_a_download():
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # pytest's own folders are 0700 root
        model = pathlib.Path(folder, "model")
        write_model_dir(model)
        os.chmod(folder, 0o755)
        (model / "config.json").chmod(0o600)
        done = subprocess.run(["setpriv", "--reuid=4242", "--regid=0", "--clear-groups", sys.executable, "-m",
                               "entrypoint", "check"], env={"PATH": "/usr/bin:/bin", "HOME": "/",
                                                            "PYTHONPATH": str(REPO), "MODEL": str(model)},
                              cwd="/", capture_output=True, text=True, timeout=120)
    line = next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["model"])
    assert "Permission denied" in line and "chmod -R a+rX" in line and "download" not in line, done.stdout


def test_a_relative_home_is_left_for_the_settings_to_refuse_whatever_the_uid(monkeypatch):
    """As root, cwd / made `HOME=home` a writable /home; as the image's uid 10001 it is not: either way
    the relative path reaches the settings, which refuse it naming HOME, instead of a silent fallback."""
    from entrypoint import identity
    from entrypoint.settings import SettingsError, parse_settings

    monkeypatch.setattr(identity.os, "geteuid", lambda: 10001)
    monkeypatch.setattr(identity, "writable_dir", lambda path: False)
    env = identity.with_identity({"HOME": "home", "MODEL": "/models/m", "USER": "u", "LOGNAME": "u"})
    assert env["HOME"] == "home"
    with pytest.raises(SettingsError, match="HOME"):
        parse_settings(env)
