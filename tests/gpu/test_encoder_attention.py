"""vLLM's encoder attention (context_attention_fwd) launched as on a Turing GPU fits its shared
memory and computes bidirectional attention within the tier's bound against float32.

One process (tooling/encoder_attention_run) runs the kernel for heads 64 to 512 with vLLM's
platform answering compute capability 7.5 (so vLLM picks Turing's tiles), the clamp's limit forced
to 65,536 bytes and Triton lowering as for sm_75 (TRITON_OVERRIDE_ARCH=sm75), so the compiled
kernel's shared memory is a Turing GPU's need. Whatever the clamp chooses runs; without the encoder
clamp, vLLM's own tiles at head 256 and 512 need 131,072 bytes there and the fit test fails.
"""
from __future__ import annotations

import functools
import json

import pytest

from tooling.encoder_attention_run import HEADS, TURING_LIMIT

# as tests/gpu/test_clamped_numerics.py: fp16 in and out, fp32 accumulation
MAX_ABS_TOLERANCE = 1e-2
MEAN_ABS_TOLERANCE = 2e-4


@pytest.fixture(scope="module")
def encoder_run(vllm_site, fit_table, scratch):
    import subprocess
    import sys

    from tooling.gpu_site import REPO, python_env

    out = scratch / "encoder"
    env = python_env(vllm_site, fit_table, TRITON_OVERRIDE_ARCH="sm75")
    done = subprocess.run([sys.executable, "-m", "tooling.encoder_attention_run", "--out", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, "\n".join(done.stderr.strip().splitlines()[-15:])
    return out, json.loads((out / "launches.json").read_text())


@functools.lru_cache(maxsize=1)
def reference(head: int):
    from tooling.encoder_attention_run import encoder_batch, reference as fp32

    return fp32(encoder_batch(head, device="cuda"))


@pytest.mark.parametrize("head", HEADS)
def test_encoder_launches_fit_turing_shared_memory(encoder_run, figures, head):
    summary = encoder_run[1]
    launches = summary["heads"][str(head)]
    figures.setdefault("encoder", {}).setdefault(str(head), {})["launches"] = launches
    figures["encoder"]["clamped_module"] = summary["clamped"]
    assert launches, f"head {head}: context_attention_fwd launched no kernel"
    too_large = [l for l in launches if l["shared"] is None or l["shared"] > TURING_LIMIT]
    assert not too_large, (f"head {head}: launches needing more than {TURING_LIMIT} bytes on sm_75 "
                           f"(encoder clamp in the launcher: {summary['clamped']}): {too_large}")


@pytest.mark.parametrize("head", HEADS)
def test_encoder_output_matches_float32_reference(encoder_run, figures, head):
    import torch

    from tooling.paged_attention import error_figures

    output = torch.load(encoder_run[0] / f"head{head}.pt").cuda()
    errors = error_figures(output, reference(head))
    figures.setdefault("encoder", {}).setdefault(str(head), {})["errors"] = errors
    assert errors["ref_std"] > 0.1, f"head {head}: reference outputs are too small to judge ({errors})"
    assert errors["max_abs"] <= MAX_ABS_TOLERANCE, f"head {head}: {errors}"
    assert errors["mean_abs"] <= MEAN_ABS_TOLERANCE, f"head {head}: {errors}"
