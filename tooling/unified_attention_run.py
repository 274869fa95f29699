"""Runs vLLM's (clamped) unified_attention on the GPU tier's cases in this process, the way
vLLM's Triton backend calls it, and records the tile size of every kernel launch.

The clamp reads TURING_CLAMP_SMEM_LIMIT once per launch shape and process, so each mode
(clamped: limit 65536; default: no limit, the H200's own 232,448 bytes; each also under Turing's
lowering, TRITON_OVERRIDE_ARCH=sm75, set by tooling.gpu_site.run_attention) is one process:

    python -m tooling.unified_attention_run --out DIR [--time] [--cases A,B]

writes DIR/launches.json (tiles, module file, limit), DIR/<case>.pt (fp16 outputs) or,
with --time, DIR/timings.json (median kernel time per case, triton.testing.do_bench).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import torch

from contract import layout
from tooling.attention_cases import ALL_CASE_NAMES, NUM_PAR_SOFTMAX_SEGMENTS, Layer, case_named
from tooling.paged_attention import Batch, make_batch

LAUNCHER_MODULE = "vllm.v1.attention.ops.triton_unified_attention"
RECORDED = ("TILE_SIZE", "IS_3D", "BLOCK_M", "BLOCK_Q", "HEAD_SIZE_PADDED", "num_warps", "num_stages")


class _RecordedKernel:
    """kernel[grid](**kwargs) as before, with the launch's constexprs appended to `sink`."""

    def __init__(self, kernel, name: str, sink: list):
        self.kernel, self.name, self.sink = kernel, name, sink

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def call(*args, **kwargs):
            self.sink.append({"kernel": self.name, **{k: kwargs.get(k) for k in RECORDED}})
            compiled = launch(*args, **kwargs)
            # the compiled kernel's own need: Turing's under TRITON_OVERRIDE_ARCH=sm75
            self.sink[-1]["shared"] = getattr(getattr(compiled, "metadata", None), "shared", None)
            return compiled
        return call


class LaunchRecorder:
    """Wraps the launcher module's two kernels while active; `launches` lists what ran."""

    KERNELS = ("kernel_unified_attention", "reduce_segments")

    def __init__(self, module):
        self.module, self.launches = module, []

    def __enter__(self):
        self.originals = {name: getattr(self.module, name) for name in self.KERNELS}
        for name, kernel in self.originals.items():
            setattr(self.module, name, _RecordedKernel(kernel, name, self.launches))
        return self

    def __exit__(self, *exc):
        for name, kernel in self.originals.items():
            setattr(self.module, name, kernel)


def attention_call(module, batch: Batch, layer: Layer):
    """(launch, out): `launch()` runs unified_attention with the backend's split-K scratch."""
    device = batch.q.device
    num_seqs = len(batch.query_lens)
    head_padded = 1 << (layer.head_size - 1).bit_length()
    rows = layer.seq_threshold_3d  # the backend's max_num_tokens_3d without speculative decoding
    segm = (rows, layer.num_query_heads, NUM_PAR_SOFTMAX_SEGMENTS)
    scratch = {
        "softmax_segm_output": torch.empty((*segm, head_padded), dtype=torch.float32, device=device),
        "softmax_segm_max": torch.empty(segm, dtype=torch.float32, device=device),
        "softmax_segm_expsum": torch.empty(segm, dtype=torch.float32, device=device),
    }
    descale = torch.ones(1, dtype=torch.float32, device=device).expand(num_seqs, layer.num_kv_heads)
    out = torch.empty_like(batch.q)

    def launch():
        module.unified_attention(
            q=batch.q, k=batch.key_cache, v=batch.value_cache, out=out,
            cu_seqlens_q=batch.cu_seqlens_q, max_seqlen_q=batch.max_query_len,
            seqused_k=batch.seq_lens, max_seqlen_k=batch.max_seq_len,
            softmax_scale=batch.scale, causal=True, window_size=layer.window_size,
            block_table=batch.block_table, softcap=0, q_descale=None,
            k_descale=descale, v_descale=descale,
            seq_threshold_3D=layer.seq_threshold_3d,
            num_par_softmax_segments=NUM_PAR_SOFTMAX_SEGMENTS, **scratch,
        )
    return launch, out


def run_cases(names: list[str], out_dir: Path, timed: bool) -> dict:
    module = importlib.import_module(LAUNCHER_MODULE)
    summary = {"module": module.__file__, "clamp_version": getattr(module, "_VLLM_TURING_CLAMP_VERSION", None),
               "smem_limit": os.environ.get(layout.ENV_SMEM_LIMIT), "cases": {}}
    timings = {}
    for name in names:
        case = case_named(name)
        batch = make_batch(case, device="cuda")
        launch, out = attention_call(module, batch, case.layer)
        with LaunchRecorder(module) as recorder:
            launch()
            torch.cuda.synchronize()
        summary["cases"][name] = recorder.launches
        if timed:
            from triton.testing import do_bench

            timings[name] = do_bench(launch, warmup=25, rep=200, return_mode="median")
        else:
            torch.save(out.cpu(), out_dir / f"{name}.pt")
        del batch, out, launch
        torch.cuda.empty_cache()
    (out_dir / "launches.json").write_text(json.dumps(summary, indent=2))
    if timed:
        (out_dir / "timings.json").write_text(json.dumps(timings, indent=2))
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cases", default=",".join(ALL_CASE_NAMES))
    parser.add_argument("--time", action="store_true", help="time each case instead of saving its output")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in ALL_CASE_NAMES]
    if unknown:
        print(f"unknown case(s) {', '.join(unknown)}; expected some of {', '.join(ALL_CASE_NAMES)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    run_cases(names, args.out, args.time)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
