"""Shared memory of vLLM's other Triton attention kernel, the one the clamp does not cover.

    bench/encoder_attention_smem [--image REF]

vLLM's Triton backend runs encoder (bidirectional) attention, and the multimodal encoder when
`--mm-encoder-attn-backend TRITON_ATTN` is chosen, through `context_attention_fwd`
(vllm/v1/attention/ops/triton_prefill_attention.py), not through the unified-attention launcher.
This calls that function on CPU tensors in a container of the image, records its `_fwd_kernel`
launch with the tiles vLLM picks per device (BLOCK 64 below compute capability 8.0, 128 from
8.0), cross-compiles it with the image's Triton (patches/fitcheck/compiler.py) and prints the
bytes per head size next to each device's limit. Nothing is timed; the figures are in docs/clamp.md.
"""
import argparse
import json

from contract.pins import PYPI_BASE_TAG
from contract.devices import DEVICES
from tooling.probes.container import container_lines

HEAD_SIZES = (64, 72, 80, 96, 128, 256, 512)
DEVICE_BLOCKS = {"sm75": 64, "sm86": 128}  # triton_prefill_attention.get_block_size, fp16

# Runs in the container: one JSON line per (device, head size).
SCRIPT = r"""
import json, sys
import torch
import vllm.v1.attention.ops.triton_prefill_attention as prefill
from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.recorder import _Recorder

devices, heads = json.loads(sys.argv[1]), json.loads(sys.argv[2])
launches = []
prefill._fwd_kernel = _Recorder("_fwd_kernel", prefill._fwd_kernel, launches)  # the fit check's recorder
prefill._prefer_narrow_kv_tile = lambda: False
for name, (cc, block) in devices.items():
    prefill.get_block_size = lambda dtype, block=block: block
    for head in heads:
        launches.clear()
        q = torch.empty(64, 8, head, dtype=torch.float16)
        k = torch.empty(64, 4, head, dtype=torch.float16)
        prefill.context_attention_fwd(q, k, k.clone(), torch.empty_like(q), torch.tensor([0], dtype=torch.int32),
                                      torch.tensor([64], dtype=torch.int32), 64, is_causal=False)
        [launch] = launches
        [result] = compile_launches([(launch.fn, launch.params, launch.options)], cc, 1)
        print(json.dumps({"device": name, "head": head, "block_m": launch.param("BLOCK_M"),
                          "block_n": launch.param("BLOCK_N"), "num_warps": launch.options.get("num_warps"),
                          "shared": result.shared, "error": result.error}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=PYPI_BASE_TAG)
    args = parser.parse_args()
    devices = {name: (DEVICES[name][0], block) for name, block in DEVICE_BLOCKS.items()}
    rows = container_lines("bench/encoder_attention_smem", args.image,
                           ["-c", SCRIPT, json.dumps(devices), json.dumps(HEAD_SIZES)],
                           rows_of=lambda rows: len(rows) == len(devices) * len(HEAD_SIZES), network=True, tail=1)
    if rows is None:
        return 1
    print(f"context_attention_fwd (_fwd_kernel), fp16, image {args.image}")
    print("| device | head | BLOCK_M / BLOCK_N | warps | shared bytes | limit | fits |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- |")
    for row in rows:
        limit = DEVICES[row["device"]][1]
        fits = "compile failed: " + row["error"] if row["shared"] is None else ("yes" if row["shared"] <= limit else "NO")
        print(f"| {row['device']} | {row['head']} | {row['block_m']} / {row['block_n']} | {row['num_warps']} | "
              f"{row['shared']} | {limit} | {fits} |")
    return 0

