"""The preflight's fp16 line (entrypoint/checks/fp16.py): on a Turing GPU (the stand-in T4 driver) the 12B's
published config gets a line naming the layers the fp16 upcast runs in fp32 when the serving vLLM carries
it, and fails with the fix when that vLLM lacks it; other models and other dtypes are told nothing is
patched."""
from __future__ import annotations

import json
import shutil

import pytest

from contract.model_config import parse_config
from entrypoint.checks.fp16 import check_fp16
from entrypoint.settings import CHECK_NAMES
from patches import fp16_upcast
from tests import REPO
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.gemma4_configs import published_model_dir
from tooling.standins.standin_driver import build_standin_driver
from tooling import vllm_releases

ONLY_FP16 = ",".join(name for name in CHECK_NAMES if name != "fp16")


@pytest.fixture(scope="module")
def t4(tmp_path_factory):
    """A stand-in T4 driver, the 12B's published config.json, and the pinned vLLM's gemma4_unified.py in a
    site folder (vLLM as a namespace package: the check finds the file without importing vLLM)."""
    root = tmp_path_factory.mktemp("fp16-t4")
    site = root / "site"
    shutil.copytree(vllm_releases.site_dir(vllm_releases.PINNED), site)
    return build_standin_driver(root / "driver"), published_model_dir("gemma4-12b", root), site


def fp16_line(t4, tmp_path) -> tuple[int, str, dict]:
    driver, model, site = t4
    env = {"MODEL": str(model), "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": f"{site}:{REPO}",
           "SKIP_CHECKS": ONLY_FP16}
    text = run_entrypoint(env, "check", library_path=driver)
    assert "Traceback" not in text.stderr, text.stderr
    [line] = [line for line in text.stdout.splitlines() if line.split()[1:2] == ["fp16"]]
    as_json = run_entrypoint(env, "check", "--json", library_path=driver)
    [result] = [c for c in json.loads(as_json.stdout)["checks"] if c["name"] == "fp16"]
    print(text.stdout.splitlines()[0] + "\n" + line)
    return text.returncode, line, result


def test_on_a_t4_the_12b_is_told_which_layers_run_in_fp32_and_fails_without_the_upcast(t4, tmp_path):
    target = t4[2] / "vllm" / fp16_upcast.TARGET_IN_PACKAGE
    code, line, result = fp16_line(t4, tmp_path)
    assert code == 1 and line.startswith("FAIL  fp16") and result["status"] == "fail"
    assert "vision_embedder.patch_dense and vision_embedder.patch_ln2 would run in float16 on cc 7.5" in line
    assert "rebuild the image" in result["fix"] and "patches.fp16_upcast apply" in result["fix"]
    assert fp16_upcast.apply(target).outcome.label == "applied"
    code, line, result = fp16_line(t4, tmp_path)
    assert code == 0 and result["status"] == "pass", line
    assert line.startswith("PASS  fp16")
    assert ("vision_embedder.patch_dense and vision_embedder.patch_ln2 run in fp32, the rest of the 12B in float16 "
            f"on cc 7.5 (fp16 upcast v{fp16_upcast.placement.PATCH_VERSION} in gemma4_unified.py, vLLM "
            f"{vllm_releases.PINNED})") == result["message"]


def config(variant: str):
    from tests.support.gemma4_configs import config_object

    return parse_config(json.loads(json.dumps(config_object(variant, towers=True).to_dict())), variant)


@pytest.mark.parametrize("model, dtype, says", [
    ("gemma4-12b", "bfloat16", "nothing patched to fp32: the model runs in bfloat16 on cc 8.6"),
    ("gemma4-e2b", "float16", "gemma4's vision and audio path(s) run in float16 on cc 8.6; no layer of theirs"),
    ("llama", "float16", "nothing patched to fp32: no Gemma 4 vision or audio path"),
])
def test_other_models_and_dtypes_are_told_nothing_is_patched(model, dtype, says):
    typed = parse_config({"model_type": "llama"}, "llama") if model == "llama" else config(model)
    result = check_fp16(typed, dtype, (8, 6), module="no.such.module")  # never imported for these
    assert result.status.value == "pass" and result.message.startswith(says), result.message
