"""The parallel check on the GPU host itself: `entrypoint check --json` with every other check
skipped, the real devices read through libcuda, and the NCCL probe across the real GPUs.
Tests needing two GPUs are skipped with the reason that names the missing GPU."""
from __future__ import annotations

import json

import pytest

from entrypoint.settings import CHECK_NAMES
from tests.gpu.test_preflight import by_name, run_check
from tooling.gpu_site import python_env

ONLY_PARALLEL = ",".join(name for name in CHECK_NAMES if name != "parallel")
# Query heads 12, KV heads 4 on sliding layers and 3 on global ones: TP 2 splits the sliding
# layers but not the global ones.
UNSPLITTABLE_GLOBAL = {"model_type": "gemma4_text", "num_attention_heads": 12, "num_key_value_heads": 4,
                       "num_global_key_value_heads": 3, "head_dim": 256, "global_head_dim": 512,
                       "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]}
SPLITTABLE = {**UNSPLITTABLE_GLOBAL, "num_global_key_value_heads": 2}


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


needs_two = pytest.mark.skipif("gpu_count() < 2", reason="no GPU: a second GPU is needed")


def model_dir(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


def parallel_result(vllm_site, tmp_path, config: dict, tp: int) -> dict:
    env = python_env(vllm_site, MODEL=model_dir(tmp_path, config), HF_HUB_OFFLINE="1",
                     TENSOR_PARALLEL_SIZE=str(tp), SKIP_CHECKS=ONLY_PARALLEL)
    return by_name(run_check(env))["parallel"]


@needs_two
def test_tp_equal_to_the_gpu_count_passes_the_nccl_probe(vllm_site, tmp_path, figures):
    result = parallel_result(vllm_site, tmp_path, SPLITTABLE, gpu_count())
    assert result["status"] == "pass", result
    assert "gave the right sum" in result["message"]
    figures["nccl_probe"] = {"gpus": gpu_count(), "message": result["message"], "check_s": result["elapsed_s"]}


def test_tp_above_the_gpu_count_fails(vllm_site, tmp_path):
    tp = gpu_count() + 1
    result = parallel_result(vllm_site, tmp_path, SPLITTABLE, tp)
    assert result["status"] == "fail"
    assert f"needs {tp} GPUs; {gpu_count()} visible" in result["message"]


@needs_two
def test_a_head_count_tp_does_not_divide_fails_naming_the_layer_type(vllm_site, tmp_path):
    result = parallel_result(vllm_site, tmp_path, UNSPLITTABLE_GLOBAL, 2)
    assert result["status"] == "fail"
    assert "global layers" in result["message"] and "3 KV heads do not divide by 2" in result["message"]
