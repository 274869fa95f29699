"""The Hub token as a file: HF_TOKEN_PATH (huggingface_hub's own setting) reaches the server as a path,
the token itself in no environment, argv or output; an existing file the server could not read is
refused before the load, naming HF_TOKEN_PATH; no file at that path is no token (as for the Hub)."""
import json
import os

import pytest
from hypothesis import example, given, strategies as st

from entrypoint.hub_access import token_file_refusal
from tests.unit.test_entrypoint_api_key import make_fifo, served

TOKEN = "hf_plantedTokenForTheHubTest0123456789"


def test_the_token_file_reaches_the_server_as_its_path_only(tmp_path):
    token_file = tmp_path / "hf-token"
    token_file.write_text(TOKEN + "\n")
    process, seen, output = served(tmp_path, {"HF_TOKEN_PATH": str(token_file)})
    assert process.returncode == 0, output
    assert seen["env"]["HF_TOKEN_PATH"] == str(token_file)
    assert TOKEN not in json.dumps(seen) and TOKEN not in output


def test_no_file_at_the_path_is_no_token_as_for_huggingface_hub(tmp_path):
    # the Kubernetes pods mount an optional Secret's directory: without the Secret the file is absent
    process, seen, output = served(tmp_path, {"HF_TOKEN_PATH": str(tmp_path / "absent" / "HF_TOKEN")})
    assert process.returncode == 0, output


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.write_text(""), "the file is empty"),
    (lambda p: p.mkdir(), "a directory, not a regular file"),
    (make_fifo, "a named pipe (FIFO), not a regular file"),
    (lambda p: p.write_text(TOKEN * 2000), "more than the 64 KiB such a file can be"),
    (lambda p: os.symlink(p.parent / "elsewhere", p), "a symlink to a missing file"),
])
def test_a_token_file_the_server_could_not_use_is_refused_naming_the_setting_not_the_token(tmp_path, make, expected):
    token_file = tmp_path / "hf-token"
    make(token_file)
    process, seen, output = served(tmp_path, {"HF_TOKEN_PATH": str(token_file)})
    assert process.returncode == 2 and seen is None, output
    assert f"bad setting HF_TOKEN_PATH='{token_file}'" in output and expected in output
    assert len(output.strip().splitlines()) == 1 and "hf_planted" not in output


def test_a_relative_token_path_is_refused(tmp_path):
    process, seen, output = served(tmp_path, {"HF_TOKEN_PATH": "secrets/token"})
    assert process.returncode == 2 and "HF_TOKEN_PATH" in output and "an absolute path" in output


@given(st.text(max_size=60).map(lambda tail: "/" + tail) | st.sampled_from(["/dev/zero", "/proc/self/mem", "/", "/tmp"]))
@example("/\x00")
@example("/" + "a" * 5000)
def test_any_token_path_is_usable_absent_or_refused_naming_the_setting_never_a_traceback(path):
    refusal = token_file_refusal(path)
    if refusal is not None:
        assert refusal.variable == "HF_TOKEN_PATH" and "\n" not in str(refusal)
