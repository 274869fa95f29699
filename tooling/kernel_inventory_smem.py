"""Shared memory of the Triton kernels besides attention that served models of the matrix reach.

    bench/kernel_inventory_smem [--image REF]

In a container of the image (this checkout mounted), each kernel's real launcher is called on CPU
tensors with the fit check's recorder in place of the kernel, the launch vLLM makes for the simulated
device (cc 7.5 or 8.6) is recorded and cross-compiled by the image's Triton (patches/fitcheck/
compiler.py), and its `shared` is printed beside the device's limit. Nothing is timed or run.

- fused_moe_kernel (unquantized fp16 MoE: Gemma 4 26B-A4B, Qwen3-30B-A3B, Mixtral): vLLM's default
  config per batch size M (get_default_config: tiles and num_stages grow with M), and every tuned
  config file the image ships for a Turing or Ampere consumer GPU name.
- reshape_and_cache_kernel_flash (the Triton backend's KV-cache write, every decoder model).
- TRITON_MLA's decode (v1/attention/ops/triton_decode_attention.py, decode_attention_fwd with is_mla,
  as triton_mla.py calls it): _fwd_grouped_kernel_stage1 and _fwd_kernel_stage2, for latent ranks of
  DeepSeek V2/V3, Kimi K2 and GLM-4.7-Flash (kv_lora_rank 512 + rope 64) and one unaligned rank, in
  fp16 and bf16 (the stage-1 tiles follow the latent rank alone; heads only set the grid).
- Model Runner V2's own kernels (v1/worker/gpu; the default runner where Triton is present), as
  model_runner.py and its sampler call them: input preparation, block tables and slot mappings, staged
  state writes, and the sampler (temperature, min_p, penalties and their bincount, logit bias / min
  tokens, bad words, Gumbel sampling, logprobs and ranks, the structured-output bitmask, and the top-k /
  top-p kernels of v1/sample/ops it calls), at Gemma 4's vocabulary (262,144) and 1 / 64 / 256 rows,
  and a hybrid model's per-step num_accepted kernels (model_states/mamba_hybrid.py).
- MRoPE (MRotaryEmbedding.forward_cuda -> _triton_mrope_forward) for Qwen2-VL / Qwen2.5-VL / Qwen3-VL
  head layouts (head 128), fp16 and bf16, and the runner's M-RoPE position kernel.
- LoRA's lora_shrink / lora_expand with get_lora_op_configs' configs, ranks 8 / 16 / 64, hidden 2048 /
  4096, fp16.
The last three groups are recorded by tooling/kernel_inventory_launches.py, which says what a CPU host
is made to answer as the GPU would; their tiles print by name. A launcher that cannot be called on CPU
tensors is listed below the table with its error. Warps / stages that a launcher does not pass are
Triton's defaults, as compiled ("(default)").
The figures are in docs/clamp.md ("Triton kernels a served model reaches").
"""
import argparse
import json

from contract.pins import PYPI_BASE_TAG
from contract.devices import DEVICES
from tooling.probes.container import container_lines

# Runs in the container: one JSON line per (kernel, case, device).
SCRIPT = r"""
import glob, json, os, sys
import torch
import triton.language as tl
from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.recorder import _Recorder, prepare_cpu_host
prepare_cpu_host()
import vllm.model_executor.layers.fused_moe.fused_moe as moe
import vllm.v1.attention.ops.triton_reshape_and_cache_flash as cache
import vllm.v1.attention.ops.triton_decode_attention as mla

devices = json.loads(sys.argv[1])
launches = []
moe.fused_moe_kernel = _Recorder("fused_moe_kernel", moe.fused_moe_kernel, launches)
cache.reshape_and_cache_kernel_flash = _Recorder("reshape_and_cache_kernel_flash", cache.reshape_and_cache_kernel_flash, launches)
E, N, K, TOPK = 128, 1408, 2816, 8  # an MoE of Gemma 4 26B-A4B's order (128 experts, top 8); tiles do not follow E/N/K

def moe_launch(M, config):
    launches.clear()
    A = torch.empty(M, K, dtype=torch.float16)
    B = torch.empty(E, N, K, dtype=torch.float16)
    C = torch.empty(M, TOPK, N, dtype=torch.float16)
    em = M * TOPK + E * config["BLOCK_SIZE_M"]
    moe.invoke_fused_moe_triton_kernel(A, B, C, None, None, torch.empty(M, TOPK), torch.zeros(em, dtype=torch.int32),
        torch.zeros(em // config["BLOCK_SIZE_M"] + 1, dtype=torch.int32), torch.tensor([em], dtype=torch.int32),
        False, TOPK, dict(config), tl.float16, False, False, False, False, False)
    return launches[0]

cases = []
for M in (1, 32, 64, 96, 512, 4096):
    cases.append(("fused_moe_kernel", f"default M={M}", moe_launch(M, moe.get_default_config(M, E, N, K, TOPK, None))))
configs = os.path.join(os.path.dirname(moe.__file__), "configs")
for path in sorted(glob.glob(os.path.join(configs, "*.json"))):
    name = os.path.basename(path)
    if not any(gpu in name for gpu in ("T4", "2080", "3090", "3080", "A10,", "A10.", "A40", "A10G", "RTX", "Quadro")):
        continue
    if "dtype=" in name and "dtype=fp16" not in name and "dtype=bf16" not in name:
        continue
    for M, config in json.load(open(path)).items():
        config = {k: v for k, v in config.items() if k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")}
        cases.append(("fused_moe_kernel", f"{name} M={M}", moe_launch(max(1, int(M)), config)))
for head, kv in ((256, 8), (512, 1)):
    launches.clear()
    key = torch.empty(16, kv, head, dtype=torch.float16)
    kc = torch.empty(4, 16, kv, head, dtype=torch.float16)
    torch.cuda.get_device_capability = lambda device=None: (7, 5)
    cache.triton_reshape_and_cache_flash(key, key.clone(), kc, kc.clone(), torch.arange(16), "auto",
                                         torch.ones(1), torch.ones(1))
    cases.append(("reshape_and_cache_kernel_flash", f"head {head}, {kv} KV heads", launches[0]))
mla._fwd_grouped_kernel_stage1 = _Recorder("_fwd_grouped_kernel_stage1", mla._fwd_grouped_kernel_stage1, launches)
mla._fwd_kernel_stage2 = _Recorder("_fwd_kernel_stage2", mla._fwd_kernel_stage2, launches)
PAGE, BATCH = 16, 4
for rank, rope, heads, splits in ((512, 64, 16, 4), (512, 64, 20, 16), (512, 64, 128, 16), (256, 64, 16, 4)):
    for dtype in (torch.float16, torch.bfloat16):
        launches.clear()
        kv = torch.empty(8, PAGE, 1, rank + rope, dtype=dtype)  # triton_mla.py: the cache with a head dim of 1
        mla.decode_attention_fwd(torch.empty(BATCH, heads, rank + rope, dtype=dtype), kv, kv[..., :rank],
                                 torch.empty(BATCH, heads, rank, dtype=dtype), torch.empty(BATCH, heads, dtype=dtype),
                                 torch.zeros(BATCH, 2, dtype=torch.int32), torch.full((BATCH,), 20, dtype=torch.int32),
                                 torch.empty(BATCH, heads, splits, rank + 1, dtype=torch.float32), splits, 0.1, PAGE,
                                 k_scale=torch.ones(1), v_scale=torch.ones(1), is_mla=True)
        for launch in list(launches):
            cases.append((launch.kernel_name, f"MLA rank {rank}+{rope}, {heads} heads, {splits} splits, {str(dtype)[6:]}",
                          launch))
legacy = len(cases)
from patches.fitcheck.op_recording import options as compile_options
from tooling import kernel_inventory_launches as more
inventory = more.record_all()
cases += inventory.cases
for launcher, case, reason in inventory.unrecorded:
    print(json.dumps({"unrecorded": launcher, "case": case, "reason": reason}), flush=True)
shipped = more.lora_config_files()
print(json.dumps({"note": "LoRA configs: VLLM_TUNED_CONFIG_FOLDER " + ("set" if os.environ.get("VLLM_TUNED_CONFIG_FOLDER") else "unset")
                  + f", so get_lora_op_configs gives its defaults; the image's vLLM ships {len(shipped)} tuned LoRA file(s)"
                  + (": " + ", ".join(os.path.basename(p) for p in shipped[:8]) if shipped else "")}), flush=True)
for name, (cc, limit) in devices.items():
    results = compile_launches([(l.fn, l.params, compile_options(l)) for _, _, l in cases], cc, 2)
    for index, ((kernel, case, launch), result) in enumerate(zip(cases, results)):
        named = index >= legacy
        tiles = more.tile_params(launch) if named else {k: launch.param(k) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "TILE_SIZE", "BLOCK_H", "BLOCK_N", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV") if k in launch.params}
        print(json.dumps({"device": name, "limit": limit, "kernel": kernel, "case": case, "shared": result.shared,
                          "options": {k: v for k, v in compile_options(launch).items()},
                          "compiled": [result.num_warps, result.num_stages], "named": named,
                          "tiles": tiles, "error": result.error}), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=PYPI_BASE_TAG)
    args = parser.parse_args()
    devices = {name: DEVICES[name] for name in ("sm75", "sm86")}
    device_rows = lambda lines: [line for line in lines if "device" in line]  # noqa: E731
    lines = container_lines("bench/kernel_inventory_smem", args.image, ["-c", SCRIPT, json.dumps(devices)],
                            rows_of=device_rows, network=True)
    if lines is None:
        return 1
    rows = device_rows(lines)
    print(f"Triton kernels besides attention, fp16 unless a case names its dtype, image {args.image}")
    print("| device | kernel | case | tiles | warps / stages | shared bytes | limit | fits |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | --- |")
    for row in rows:
        fits = "compile failed: " + row["error"] if row["shared"] is None else (
            "yes" if row["shared"] <= row["limit"] else "NO")
        if row.get("named"):
            tiles = ", ".join(f"{k} {v}" for k, v in row["tiles"].items()) or "none"
            warps, stages = (row["options"].get(k) for k in ("num_warps", "num_stages"))
            options = (f"{warps if warps is not None else str(row['compiled'][0]) + ' (default)'} / "
                       f"{stages if stages is not None else str(row['compiled'][1]) + ' (default)'}")
        else:
            tiles = " x ".join(str(v) for v in row["tiles"].values())
            options = f"{row['options'].get('num_warps')} / {row['options'].get('num_stages')}"
        print(f"| {row['device']} | {row['kernel']} | {row['case']} | {tiles} | {options} | {row['shared']} | "
              f"{row['limit']} | {fits} |")
    for line in lines:
        if "unrecorded" in line:
            print(f"not recorded: {line['unrecorded']} ({line['case']}): {line['reason']}")
        elif "note" in line:
            print(line["note"])
    return 0

