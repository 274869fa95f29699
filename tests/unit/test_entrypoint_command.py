"""The server argv for the two seed deployments, as their runbooks ran it, and its building rules."""
import json
import shlex

from entrypoint.server_command import server_argv
from entrypoint.settings import SERVER_CMD, parse_settings

from tests.support.entrypoint_cli import run_entrypoint
from tests.support.seed_configs import (RTX_3090, RTX_3090_12B_ARGV, RTX_3090_12B_ENV, SERVER, T4,
                                       T4_E2B_ARGV, T4_E2B_ENV)
from tooling.standins.standin_driver import build_standin_driver


def test_t4_serving_e2b_qat():
    assert server_argv(parse_settings(T4_E2B_ENV), T4) == T4_E2B_ARGV


def test_rtx_3090_serving_12b_qat_with_the_bf16_mtp_drafter():
    assert server_argv(parse_settings(RTX_3090_12B_ENV), RTX_3090) == RTX_3090_12B_ARGV


def test_print_command_on_a_standin_t4_resolves_float16(tmp_path):
    libs = build_standin_driver(tmp_path / "lib", cc=(7, 5))
    done = run_entrypoint(T4_E2B_ENV, "print-command", library_path=libs)
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout) == T4_E2B_ARGV
    done = run_entrypoint(RTX_3090_12B_ENV, "print-command", "--json", library_path=libs)
    assert json.loads(done.stdout)["argv"][len(SERVER) + 8:len(SERVER) + 10] == ["--dtype", "float16"]


def test_extra_args_then_container_args_come_last():
    settings = parse_settings({"MODEL": "m", "VLLM_EXTRA_ARGS": "--chat-template '/t/a b.jinja' --seed 1",
                               "ENFORCE_EAGER": "yes", "KV_CACHE_DTYPE": "fp8", "PORT": "9000"})
    argv = server_argv(settings, None, ("--max-lora-rank", "8"))
    assert argv[-6:] == ["--chat-template", "/t/a b.jinja", "--seed", "1", "--max-lora-rank", "8"]
    assert "--enforce-eager" in argv and argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    assert argv[argv.index("--port") + 1] == "9000" and argv[argv.index("--dtype") + 1] == "auto"


def test_no_environment_variable_replaces_the_server_program():
    # the first release's switch for stand-in servers (VLLM_TURING_SERVER_CMD) is gone: it made the
    # shipped entrypoint exec any program as root
    settings = parse_settings({"MODEL": "m", "VLLM_TURING_SERVER_CMD": "python3 /srv/standin_server.py"})
    assert server_argv(settings, None)[:4] == [*SERVER_CMD, "--model"]
