"""Runs vLLM's encoder attention (context_attention_fwd, triton_prefill_attention.py) as a Turing
GPU would launch it, on this GPU, and records every kernel launch with its compiled shared memory.

    python -m tooling.encoder_attention_run --out DIR [--heads 64,72,128,256,512]

The launch is Turing's in both of its halves: vLLM picks the encoder's tiles from the compute
capability it reads from its platform, so the platform answers 7.5 (patches.fitcheck's simulated
device, which also forces TURING_CLAMP_SMEM_LIMIT=65536 and the clamp's fit table), and Triton
lowers as for sm_75 (TRITON_OVERRIDE_ARCH=sm75, set by the caller), so `metadata.shared` of each
compiled kernel is what a Turing GPU needs. Whatever the clamp (if the site's launcher carries
one) chooses is what runs. Writes DIR/launches.json and DIR/head<N>.pt (fp16 outputs); the batch
of each head is rebuilt from its seed by `encoder_batch` (tests/gpu/test_encoder_attention.py
computes the float32 reference from it).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from contract.devices import TURING

ENCODER_MODULE = "vllm.v1.attention.ops.triton_prefill_attention"
KERNEL = "_fwd_kernel"
HEADS = (64, 72, 128, 256, 512)
# Bidirectional sequences of one batch (tokens each): a single token, odd lengths, one longer
# than every tile, as an embedding model's batch is.
SEQ_LENS = (1, 7, 100, 333, 1024)
QUERY_HEADS, KV_HEADS = 8, 4
QUERY_GAIN = 3.0  # peaked softmax, so an absolute tolerance means something (as paged_attention)
SIMULATED = TURING  # the device the simulated one answers as (tests/gpu/ampere_proxy.py sets Ampere)
RECORDED = ("BLOCK_M", "BLOCK_N", "BLOCK_DMODEL", "IS_CAUSAL", "num_warps", "num_stages")


def encoder_batch(head: int, device="cpu", dtype=None) -> dict:
    """q, k, v [tokens, heads, head] (fp16 unless dtype) and the per-sequence starts and lengths,
    from seed = head. torch is imported here, so the tier collects on hosts without it."""
    import torch

    dtype = dtype or torch.float16
    gen = torch.Generator().manual_seed(head)
    tokens = sum(SEQ_LENS)
    q = torch.randn((tokens, QUERY_HEADS, head), generator=gen) * QUERY_GAIN
    k = torch.randn((tokens, KV_HEADS, head), generator=gen)
    v = torch.randn((tokens, KV_HEADS, head), generator=gen)
    starts = torch.tensor([sum(SEQ_LENS[:i]) for i in range(len(SEQ_LENS))], dtype=torch.int32)
    return {"q": q.to(dtype).to(device), "k": k.to(dtype).to(device), "v": v.to(dtype).to(device),
            "b_start_loc": starts.to(device), "b_seq_len": torch.tensor(SEQ_LENS, dtype=torch.int32).to(device)}


def reference(batch: dict):
    """Float32 bidirectional attention per sequence, KV heads shared by their query-head group."""
    import torch

    q, k, v = (batch[n].float() for n in ("q", "k", "v"))
    group = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for start, length in zip(batch["b_start_loc"].tolist(), batch["b_seq_len"].tolist()):
        s = slice(start, start + length)
        qs = q[s].transpose(0, 1)
        ks = k[s].repeat_interleave(group, dim=1).transpose(0, 1)
        vs = v[s].repeat_interleave(group, dim=1).transpose(0, 1)
        scores = (qs @ ks.transpose(1, 2)) * q.shape[-1] ** -0.5
        out[s] = (scores.softmax(-1) @ vs).transpose(0, 1)
    return out


class Recorder:
    """Stands where the kernel stands in the module; records each launch and its compiled need."""

    def __init__(self, kernel, sink: list):
        self.kernel, self.sink = kernel, sink

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def call(*args, **kwargs):
            self.sink.append({"grid": list(grid), **{k: kwargs.get(k) for k in RECORDED}})
            compiled = launch(*args, **kwargs)
            self.sink[-1]["shared"] = getattr(getattr(compiled, "metadata", None), "shared", None)
            return compiled
        return call


def run(heads, out_dir: Path, fit_table: str | None) -> dict:
    import torch

    from patches.fitcheck.recorder import simulated_device

    module = importlib.import_module(ENCODER_MODULE)
    summary = {"module": module.__file__, "override": os.environ.get("TRITON_OVERRIDE_ARCH"),
               "clamped": any(name.startswith("_vllm_turing_") for name in vars(module)), "heads": {}}
    with simulated_device(module, SIMULATED.cc, SIMULATED.limit, fit_table):
        for head in heads:
            batch = encoder_batch(head, device="cuda")
            out = torch.empty_like(batch["q"])
            launches: list = []
            original = getattr(module, KERNEL)
            setattr(module, KERNEL, Recorder(original, launches))
            try:
                module.context_attention_fwd(batch["q"], batch["k"], batch["v"], out, batch["b_start_loc"],
                                             batch["b_seq_len"], max(SEQ_LENS), is_causal=False)
                torch.cuda.synchronize()
            finally:
                setattr(module, KERNEL, original)
            summary["heads"][str(head)] = launches
            torch.save(out.cpu(), out_dir / f"head{head}.pt")
    (out_dir / "launches.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--heads", default=",".join(map(str, HEADS)))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    run([int(h) for h in args.heads.split(",") if h], args.out, os.environ.get("TURING_CLAMP_FIT_TABLE"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
