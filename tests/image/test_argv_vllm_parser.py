"""The entrypoint's argv, parsed by the argument parser of the vLLM inside the image.

For every seed configuration and the env file's defaults, the argv the entrypoint would exec is
handed to `python3 -m vllm.entrypoints.openai.api_server` inside the image with the server's
start replaced by a stop right after vLLM parsed and validated its arguments. A flag vLLM renames
or drops then fails here, not at a user's first start. No GPU needed: without one, vLLM 0.33 cannot
infer its platform ("Failed to infer device type") and stops before parsing, so the probe names the
CPU platform with VLLM_TARGET_DEVICE=cpu; the flags are EngineArgs' own on every platform.
"""
import json
import subprocess

import pytest

from entrypoint.server_command import server_argv
from entrypoint.settings import parse_settings
from tests.support import seed_configs
from tooling.serving_stack import read_env_file

# Runs inside the image: the api_server module's own main(), up to the point where it would start
# serving. Whatever function it ends in (uvloop.run or asyncio.run), that call stops it instead.
PARSE_ONLY = r"""
import asyncio, json, runpy, sys
class Parsed(Exception):
    pass
def stop(coro, *a, **k):
    coro.close()
    raise Parsed()
try:
    import uvloop
    uvloop.run = stop
except ImportError:
    pass
asyncio.run = stop
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    sys.argv = [argv[2]] + argv[3:]
    try:
        runpy.run_module(argv[2], run_name="__main__", alter_sys=False)
        results[name] = "returned without starting a server"
    except Parsed:
        results[name] = "ok"
    except SystemExit as exc:
        results[name] = f"exit {exc.code}"
    except Exception as exc:
        results[name] = f"{type(exc).__name__}: {exc}"
print("RESULTS " + json.dumps(results))
"""

CONFIGS = {
    "t4-e2b": (seed_configs.T4_E2B_ENV, seed_configs.T4),
    "rtx3090-12b": (seed_configs.RTX_3090_12B_ENV, seed_configs.RTX_3090),
    "env-file-defaults-t4": (read_env_file(), seed_configs.T4),
    "env-file-defaults-no-device": (read_env_file(), None),
}


def entrypoint_argvs() -> dict[str, list[str]]:
    argvs = {name: server_argv(parse_settings(env), device) for name, (env, device) in CONFIGS.items()}
    for argv in argvs.values():
        assert argv[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"], argv
    return argvs


@pytest.fixture(scope="module")
def parsed(image) -> dict[str, str]:
    run = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3",
                          "-e", "VLLM_TARGET_DEVICE=cpu", image, "-c", PARSE_ONLY, json.dumps(entrypoint_argvs())],
                         capture_output=True, text=True, timeout=600)
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULTS ")]
    assert lines, f"exit {run.returncode}: {run.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("RESULTS "))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_vllm_in_the_image_accepts_the_entrypoints_argv(parsed, name):
    assert parsed[name] == "ok", f"{name}: {entrypoint_argvs()[name][3:]} -> {parsed[name]}"


def test_a_dropped_flag_is_caught(image):
    """The probe can fail: a flag vLLM does not know ends in argparse's exit 2."""
    argv = entrypoint_argvs()["t4-e2b"] + ["--no-such-flag-vllm-turing"]
    run = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3",
                          "-e", "VLLM_TARGET_DEVICE=cpu", image, "-c", PARSE_ONLY, json.dumps({"bad": argv})],
                         capture_output=True, text=True, timeout=600)
    assert '"bad": "exit 2"' in run.stdout, run.stdout[-1000:] + run.stderr[-2000:]
