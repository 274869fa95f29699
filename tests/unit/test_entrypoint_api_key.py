"""The API key: from API_KEY_FILE (or vLLM's own VLLM_API_KEY) to the server's environment, never to
argv or any output; a key file that cannot be used is refused naming API_KEY_FILE, never the key."""
import json
import os

import pytest

from contract.layout import ENV_API_KEY, ENV_API_KEY_FILE
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.model_files import write_model_dir
from tests.unit.test_entrypoint_cli import DEVICE_CHECKS, serve
from tooling.serving_stack import free_port

KEY = "sk-planted-3f9c2a7e41"


def served(tmp_path, env):
    write_model_dir(tmp_path / "model")
    process, record, out, err = serve(tmp_path, {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()),
                                                 "SKIP_CHECKS": DEVICE_CHECKS + ",port", **env})
    return process, json.loads(record.read_text()) if record.exists() else None, out + err


def test_the_key_in_api_key_file_reaches_the_server_in_its_environment_only(tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text(KEY + "\n")
    process, seen, output = served(tmp_path, {ENV_API_KEY_FILE: str(key_file)})
    assert process.returncode == 0, output
    assert seen["env"][ENV_API_KEY] == KEY  # the search below would find it: the key is in this record
    assert ENV_API_KEY_FILE not in seen["env"]
    assert KEY not in json.dumps(seen["argv"]) and KEY not in output
    assert "the /v1 routes require the API key (API_KEY_FILE)" in output


def test_vllms_own_variable_reaches_the_server_untouched(tmp_path):
    process, seen, output = served(tmp_path, {ENV_API_KEY: KEY})
    assert process.returncode == 0, output
    assert seen["env"][ENV_API_KEY] == KEY and KEY not in json.dumps(seen["argv"]) and KEY not in output


def test_print_command_and_check_json_never_show_the_key(tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text(KEY)
    write_model_dir(tmp_path / "model")
    env = {"MODEL": str(tmp_path / "model"), ENV_API_KEY_FILE: str(key_file), "SKIP_CHECKS": DEVICE_CHECKS}
    for mode in (["print-command"], ["print-command", "--json"], ["check", "--json"], ["check"]):
        done = run_entrypoint(env, *mode)
        assert done.returncode in (0, 1), done.stderr
        assert KEY not in done.stdout + done.stderr


def make_fifo(path):
    os.mkfifo(path)


@pytest.mark.parametrize("make, expected", [
    (lambda p: None, "the file does not exist"),
    (lambda p: p.write_text(""), "the file is empty"),
    (lambda p: p.write_text("\n"), "the file is empty"),
    (lambda p: p.mkdir(), "a directory, not a regular file"),
    (make_fifo, "a named pipe (FIFO), not a regular file"),  # opened without blocking: no writer ever comes
    (lambda p: p.write_text(KEY + "\nsecond line\n"), "one key on one line"),
    (lambda p: p.write_text(KEY + " trailing words"), "one key on one line"),
    (lambda p: p.write_bytes(b"\xff\xfe" + KEY.encode()), "UTF-8 text"),
    (lambda p: p.write_text(KEY * 4000), "more than the 64 KiB such a file can be"),
])
def test_a_key_file_that_cannot_be_used_is_refused_naming_the_setting_not_the_key(tmp_path, make, expected):
    key_file = tmp_path / "api-key"
    make(key_file)
    process, seen, output = served(tmp_path, {ENV_API_KEY_FILE: str(key_file)})
    assert process.returncode == 2 and seen is None, output
    assert f"bad setting {ENV_API_KEY_FILE}='{key_file}'" in output and expected in output
    assert len(output.strip().splitlines()) == 1 and KEY not in output


def test_two_sources_for_the_key_are_refused(tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text(KEY)
    process, seen, output = served(tmp_path, {ENV_API_KEY_FILE: str(key_file), ENV_API_KEY: "other"})
    assert process.returncode == 2 and "VLLM_API_KEY is set too" in output and KEY not in output


def test_a_relative_key_path_is_refused(tmp_path):
    process, seen, output = served(tmp_path, {ENV_API_KEY_FILE: "secrets/key"})
    assert process.returncode == 2 and "an absolute path" in output
