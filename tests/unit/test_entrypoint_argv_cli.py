"""The issue's examples through the entrypoint's command line, as the image runs it: with an option
table (here recorded from the stand-in parser of tests/support/standin_vllm_parser.py, as the entrypoint
records one from vLLM when the image facts are missing). Each ends in one refusal line naming the
setting or option with the fix (exit 2), a failed check naming it (exit 1), or an acceptance."""
import json

import pytest

from tests import REPO
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver
from tests.support.standin_vllm_parser import write_standin_vllm_parser

SECRET = "sk-planted-cli-2b7e"
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
         "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512, "num_hidden_layers": 2}
NOT_JUDGED_HERE = "devices,driver,torch,clamp,fit,port,parallel,shm,memory,disk"


@pytest.fixture
def entrypoint(tmp_path):
    standin = write_standin_vllm_parser(tmp_path / "standin")
    write_model_dir(tmp_path / "model", LLAMA)

    def run(env: dict, *args: str):
        return run_entrypoint({"MODEL": str(tmp_path / "model"), "HF_HOME": str(tmp_path / "hf"),
                               "PYTHONPATH": f"{standin}:{REPO}", **env}, *args)
    return run


def refused_line(done) -> str:
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("env, says", [
    ({"VLLM_EXTRA_ARGS": "--seed abc"}, ("VLLM_EXTRA_ARGS", "argument --seed: invalid int value: 'abc'")),
    ({"VLLM_EXTRA_ARGS": "--enforce-eager"}, ("expected no --enforce-eager:", "Set ENFORCE_EAGER instead")),
    ({"VLLM_EXTRA_ARGS": "--chat-template /nowhere/t.jinja"}, ("VLLM_EXTRA_ARGS --chat-template", "does not exist")),
    ({"VLLM_EXTRA_ARGS": "--tokenizer /nowhere/tok"}, ("VLLM_EXTRA_ARGS --tokenizer", "does not exist")),
    ({"TURING_CLAMP_SMEM_LIMIT": "64k"}, ("bad setting TURING_CLAMP_SMEM_LIMIT='64k'", "Set TURING_CLAMP_SMEM_LIMIT")),
    ({"VLLM_EXTRA_ARGS": "--load-format gguff"}, ("argument --load-format: invalid choice: 'gguff'",)),
    ({"VLLM_EXTRA_ARGS": f"--api-key {SECRET}"}, ("no --api-key:", "Set API_KEY_FILE instead")),
    ({"VLLM_EXTRA_ARGS": f"--seed x --hf-token={SECRET}"}, ("invalid int value: 'x'",)),
    ({"VLLM_EXTRA_ARGS": f"--download-dir https://me:{SECRET}@host/d --nope"}, ("unrecognized arguments: --nope",)),
])
def test_each_example_is_refused_in_one_line_naming_it_without_a_secret(entrypoint, env, says):
    line = refused_line(entrypoint(env, "print-command"))
    assert all(part in line for part in says) and SECRET not in line, line


def test_the_search_for_the_secret_finds_it_in_an_ordinary_option(entrypoint):
    done = entrypoint({"VLLM_EXTRA_ARGS": f"--response-role {SECRET}"}, "print-command")
    assert done.returncode == 0 and f"--response-role {SECRET}" in done.stdout, done.stdout + done.stderr


def model_check(entrypoint, **env) -> dict:
    done = entrypoint({"SKIP_CHECKS": NOT_JUDGED_HERE, **env}, "check", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return {check["name"]: check for check in json.loads(done.stdout)["checks"]}


def test_hf_overrides_are_judged_on_the_effective_config(entrypoint):
    lowered = model_check(entrypoint, MAX_MODEL_LEN="4096",
                          VLLM_EXTRA_ARGS="--hf-overrides '{\"max_position_embeddings\": 1024}'")
    assert lowered["model"]["status"] == "fail" and "limit of 1024" in lowered["model"]["message"], lowered["model"]
    raised = model_check(entrypoint, MAX_MODEL_LEN="8192",
                         VLLM_EXTRA_ARGS="--hf-overrides.max_position_embeddings 8192")
    assert raised["model"]["status"] == "pass", raised["model"]
    assert "parsed with vLLM" in raised["argv"]["message"] and "hf_overrides" in raised["argv"]["message"]


@pytest.mark.parametrize("cc, refused", [((7, 5), True), ((8, 6), False)])
def test_an_encoder_backend_the_device_lacks_is_refused_naming_the_option(entrypoint, tmp_path, cc, refused):
    driver = build_standin_driver(tmp_path / "driver", cc=cc)
    done = run_entrypoint({"MODEL": str(tmp_path / "model"), "PYTHONPATH": f"{tmp_path / 'standin'}:{REPO}",
                           "VLLM_EXTRA_ARGS": "--mm-encoder-attn-backend FLASH_ATTN"}, "print-command",
                          library_path=driver)
    if refused:
        line = refused_line(done)
        # no image facts here: the entrypoint asked vLLM's backend class (the stand-in's registry)
        assert "VLLM_EXTRA_ARGS --mm-encoder-attn-backend='FLASH_ATTN'" in line and "compute capability 7.5" in line \
            and "vLLM's own backend class" in line, line
    else:
        assert done.returncode == 0 and "--mm-encoder-attn-backend FLASH_ATTN" in done.stdout, done.stderr
