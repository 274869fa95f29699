"""vLLM's encoder attention (context_attention_fwd) launched as on a Turing GPU fits its shared
memory and computes bidirectional attention within the tier's bound against float32.

One process (tooling/encoder_attention_run) runs the kernel for heads 64 to 512 with vLLM's
platform answering compute capability 7.5 (so vLLM picks Turing's tiles), the clamp's limit forced
to 65,536 bytes and Triton lowering as for sm_75 (TRITON_OVERRIDE_ARCH=sm75), so the compiled
kernel's shared memory is a Turing GPU's need. Whatever the clamp chooses runs; without the encoder
clamp, vLLM's own tiles at head 256 and 512 need 131,072 bytes there and the fit test fails.

The same heads also run on the Ampere proxy, in fp16 and in bf16 (tests/gpu/ampere_proxy.py: platform
answering 8.6, limit 101,376 bytes, TRITON_OVERRIDE_ARCH=sm86, the fit table for sm_86 and the ranked
configurations): each launch must be the one the ranking's rows for cc 86 in that dtype give, within
Ampere's limit, and its output within the dtype's bound against float32. Never bf16 under the sm_75
lowering: Turing has no bf16.
"""
from __future__ import annotations

import functools
import json

import pytest

from contract.devices import TURING
from tests.gpu.ampere_proxy import AMPERE_LIMIT, LOWERING, bf16_bound
from tooling.encoder_attention_run import HEADS

# as tests/gpu/test_clamped_numerics.py: fp16 in and out, fp32 accumulation
MAX_ABS_TOLERANCE = 1e-2
MEAN_ABS_TOLERANCE = 2e-4
# proxy -> (dtype, (max, mean) absolute error bound, numerics.json key); bf16's bound: tests/gpu/ampere_proxy.py
PROXIES = {"turing": ("float16", (MAX_ABS_TOLERANCE, MEAN_ABS_TOLERANCE), "encoder"),
           "ampere": ("float16", (MAX_ABS_TOLERANCE, MEAN_ABS_TOLERANCE), "encoder_sm86"),
           "ampere-bf16": ("bfloat16", (bf16_bound(MAX_ABS_TOLERANCE), bf16_bound(MEAN_ABS_TOLERANCE)),
                           "encoder_sm86_bf16")}
AMPERE_PROXIES = ("ampere", "ampere-bf16")
# the Turing runs keep their test ids (the head); the Ampere ones are <head>-sm86 and <head>-sm86-bf16
PROXY_HEADS = [pytest.param(head, proxy, id=str(head) if proxy == "turing" else f"{head}-{proxy.replace('ampere', 'sm86')}")
               for proxy in PROXIES for head in HEADS]
AMPERE_HEADS = [param for param in PROXY_HEADS if param.values[1] in AMPERE_PROXIES]


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


@pytest.fixture(scope="module")
def ampere_encoder_runs(ampere):
    """{proxy: (output folder, launches.json)} of the runs on the Ampere proxy (AMPERE_PROXIES)."""
    runs = {}
    for proxy in AMPERE_PROXIES:
        out, summary = runs[proxy] = ampere[PROXIES[proxy][0]].encoder()
        assert summary["override"] == LOWERING, f"the {proxy} run lowered for {summary['override']}, expected {LOWERING}"
    return runs


def run_of(request, proxy: str):
    if proxy in AMPERE_PROXIES:
        return request.getfixturevalue("ampere_encoder_runs")[proxy]
    return request.getfixturevalue("encoder_run")


@functools.lru_cache(maxsize=1)
def reference(head: int, dtype: str = "float16"):
    import torch

    from tooling.encoder_attention_run import encoder_batch, reference as fp32

    return fp32(encoder_batch(head, device="cuda", dtype=getattr(torch, dtype)))


@pytest.mark.parametrize("head", HEADS)
def test_encoder_launches_fit_turing_shared_memory(encoder_run, figures, head):
    summary = encoder_run[1]
    launches = summary["heads"][str(head)]
    figures.setdefault("encoder", {}).setdefault(str(head), {})["launches"] = launches
    figures["encoder"]["clamped_module"] = summary["clamped"]
    assert launches, f"head {head}: context_attention_fwd launched no kernel"
    too_large = [l for l in launches if l["shared"] is None or l["shared"] > TURING.limit]
    assert not too_large, (f"head {head}: launches needing more than {TURING.limit} bytes on sm_75 "
                           f"(encoder clamp in the launcher: {summary['clamped']}): {too_large}")


@pytest.mark.parametrize("head,proxy", AMPERE_HEADS)
def test_encoder_ampere_launch_is_the_ranked_one_within_its_limit(ampere_encoder_runs, figures, head, proxy):
    """On the Ampere proxy the encoder launched the BLOCK / warps / stages the ranking's rows for cc 86 in
    the run's dtype give its launch (head 72 pads to 128 and takes head 128's), within 101,376 bytes."""
    from tooling import clamp_ranking as ranking
    from tests.gpu.ampere_proxy import configuration, ranked_choice, ranked_file, ranked_launch

    dtype, _, key = PROXIES[proxy]
    summary = ampere_encoder_runs[proxy][1]
    launches = summary["heads"][str(head)]
    record = figures.setdefault(key, {}).setdefault(str(head), {})
    record["launches"] = launches
    assert summary["clamped"], "the encoder launcher carries no clamp"
    assert len(launches) == 1, f"head {head}: {len(launches)} launches of the encoder kernel: {launches}"
    launch = launches[0]
    ranked = ranked_launch(ranking.read(ranked_file()), dtype, "encoder", 1 << (head - 1).bit_length())
    expected = ranked_choice(ranked)
    ran = (launch["BLOCK_M"], launch["num_warps"], launch["num_stages"])
    record["ranked"] = list(configuration(expected))
    assert ran == configuration(expected), (
        f"head {head}: launched BLOCK/num_warps/num_stages {ran}, the ranked {dtype} choice is "
        f"{configuration(expected)} ({ranked_file()}, vLLM's BLOCK {ranked['vllm_tile_size']})")
    assert launch["shared"] is not None and launch["shared"] <= AMPERE_LIMIT, f"head {head}: {launch}"


@pytest.mark.parametrize("head,proxy", PROXY_HEADS)
def test_encoder_output_matches_float32_reference(request, figures, head, proxy):
    import torch

    from tooling.paged_attention import error_figures

    dtype, (max_abs, mean_abs), key = PROXIES[proxy]
    output = torch.load(run_of(request, proxy)[0] / f"head{head}.pt").cuda()
    assert output.dtype == getattr(torch, dtype), f"head {head} ({proxy}): output in {output.dtype}"
    errors = error_figures(output, reference(head, dtype))
    figures.setdefault(key, {}).setdefault(str(head), {})["errors"] = errors
    assert errors["ref_std"] > 0.1, f"head {head}: reference outputs are too small to judge ({errors})"
    assert errors["max_abs"] <= max_abs, f"head {head} ({dtype}): {errors}"
    assert errors["mean_abs"] <= mean_abs, f"head {head} ({dtype}): {errors}"
