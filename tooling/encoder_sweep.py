"""Times vLLM's encoder attention kernel (context_attention_fwd's `_fwd_kernel`) in the launch
configurations its launcher could be given (BLOCK, num_warps, num_stages), under the Triton lowering
this process runs with, beside vLLM's own launch and the clamp's, at the shared-memory limit of the
GPU that lowering stands for (bench/clamp_gpu runs it; tooling/clamp_sweep does the same for the
unified kernel).

    python -m tooling.encoder_sweep --out FILE [--heads 64,72,128,256,512] [--dtype float16|bfloat16]
    python -m tooling.encoder_sweep --compile-only --shard I/N   # fill the Triton cache (parallel warm-up)

vLLM picks the encoder's BLOCK from the compute capability its platform reports (64 below 8.0, 128
from 8.0, at most 32 at head 512) and its warps from the head size (4 up to 64, else 8), one stage.
The platform is made to report the lowering's capability (patches.fitcheck's simulated device, which
also forces TURING_CLAMP_SMEM_LIMIT and the clamp's fit table), so vLLM's own launch and the clamp's
are those a Turing (sm75) or Ampere (sm86) GPU would make. A configuration's BLOCK reaches the
kernel the way the clamp's does (the launcher computes its grid from it); its warps and stages
replace the launcher's. Each configuration's shared memory is the compiled kernel's own; only those
that fit the limit (and vLLM's own) are timed, in turns over ROUNDS rounds, as clamp_sweep times.
A configuration's need grows at least in proportion to its BLOCK, so a BLOCK whose need, scaled from
the largest BLOCK compiled at the same warps and stages, is over the limit is neither compiled nor
timed (its row says "skipped", and why): under the Turing lowering at head 128 and above those are the
compiles that take minutes each (BLOCK 128 at head 128 with 2 warps: over 4 minutes in ptxas on the
H200) and could never be a candidate.
The batch per head is tooling.encoder_attention_run's (8 query heads on 4 KV heads, bidirectional
sequences of 1 to 1,024 tokens).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from contract import layout
from tooling.attention_cases import DTYPES
from tooling.clamp_sweep import DEVICE_LIMITS, LOWERING_DEVICES, STAGES, environment, first_line, lowering, queue_timing, time_in_turns
from tooling.encoder_attention_run import ENCODER_MODULE, HEADS, KERNEL, SEQ_LENS, encoder_batch

BLOCKS = (16, 32, 64, 128)
WARPS = (2, 4, 8)
# The capability each lowering stands for (what vLLM's platform is made to report).
LOWERING_CC = {low: device.cc for low, device in LOWERING_DEVICES.items()}
CLAMP = "_vllm_turing_encoder_clamp"
PROXY_LOWERINGS = ("sm75", "sm86")


def config_list(low: str, head: int) -> list[dict]:
    """vLLM's own launch first (None: what the launcher passes), then, under a proxy lowering, the grid;
    the launcher always passes one stage, so a configuration naming Triton's default stages has 1 here.
    Natively only vLLM's own launch is timed (the figure beside the proxies). BLOCK 128 is tried up to
    head 128: above it no limit here admits it (head 256 needs 163,840 bytes), and it compiles slowly."""
    own = [{"block": None, "num_warps": None, "num_stages": None, "vllm_default": True}]
    if low not in PROXY_LOWERINGS:
        return own
    grid = [{"block": b, "num_warps": w, "num_stages": s or 1} for b in BLOCKS for w in WARPS for s in STAGES[low]
            if b < 128 or head <= 128]
    return own + list({tuple(c.values()): c for c in grid}.values())


def chains(configs: list[dict]) -> list[list[dict]]:
    """vLLM's own launch alone, then the grid's configurations grouped by warps and stages, each group
    in increasing BLOCK (compile_share stops a group at its first BLOCK that over_limit skips)."""
    groups: dict[tuple, list[dict]] = {}
    for config in configs:
        key = ("own",) if config.get("vllm_default") else (config["num_warps"], config["num_stages"])
        groups.setdefault(key, []).append(config)
    return [sorted(group, key=lambda c: c["block"] or 0) for group in groups.values()]


def over_limit(config: dict, needs: dict, limit: int) -> str | None:
    """Why `config` is skipped, or None. needs: {(num_warps, num_stages): (BLOCK, shared)}, the largest
    BLOCK compiled so far at those warps and stages. Every shared buffer of this kernel is a tile with
    BLOCK rows (q, k, v) or BLOCK x BLOCK (p), so a larger BLOCK needs at least the compiled need scaled
    by the BLOCKs' ratio; when that is over the limit, the configuration is not compiled (at head 128
    and above, under the Turing lowering, those compiles take minutes each)."""
    if config.get("vllm_default"):
        return None
    block, shared = needs.get((config["num_warps"], config["num_stages"]), (None, None))
    if block is None or config["block"] <= block:
        return None
    at_least = shared * config["block"] // block
    if at_least <= limit:
        return None
    return f"BLOCK {block} at these warps and stages needs {shared:,} bytes, so BLOCK {config['block']} at least {at_least:,}"


def note_need(config: dict, shared: int, needs: dict) -> None:
    """Records a grid configuration's compiled need for over_limit."""
    if not config.get("vllm_default"):
        needs[(config["num_warps"], config["num_stages"])] = (config["block"], shared)


class Launches:
    """Stands where the kernel stands in the module: records each launch (and its compiled need),
    with the configuration's warps and stages in place of the launcher's."""

    def __init__(self, kernel, overrides: dict):
        self.kernel, self.overrides, self.seen = kernel, overrides, []

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def call(*args, **kwargs):
            kwargs = dict(kwargs, **self.overrides)
            compiled = launch(*args, **kwargs)
            self.seen.append({"BLOCK_M": kwargs.get("BLOCK_M"), "BLOCK_N": kwargs.get("BLOCK_N"),
                              "num_warps": kwargs.get("num_warps"), "num_stages": kwargs.get("num_stages"),
                              "shared": compiled.metadata.shared})
            return compiled
        return call


class Configured:
    """A context: the module's kernel recorded (warps and stages forced when given) and, for a
    configuration's BLOCK, the clamp answering it; `keep_clamp` leaves the clamp's own choice."""

    def __init__(self, module, config: dict, keep_clamp: bool = False):
        overrides = {k: config[k] for k in ("num_warps", "num_stages") if config.get(k) is not None}
        self.module, self.block, self.keep = module, config.get("block"), keep_clamp
        self.launches = Launches(getattr(module, KERNEL), overrides)

    def __enter__(self):
        self.saved = {name: getattr(self.module, name) for name in (KERNEL, CLAMP) if hasattr(self.module, name)}
        if CLAMP not in self.saved:
            raise SystemExit(f"encoder_sweep: {self.module.__file__} carries no {CLAMP}; run it on a clamped site")
        setattr(self.module, KERNEL, self.launches)
        if not self.keep:
            block = self.block
            setattr(self.module, CLAMP, lambda q, own: own if block is None else block)
        return self.launches

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            setattr(self.module, name, value)


def run_once(module, batch: dict, out: torch.Tensor) -> None:
    module.context_attention_fwd(batch["q"], batch["k"], batch["v"], out, batch["b_start_loc"], batch["b_seq_len"],
                                 max(SEQ_LENS), is_causal=False)


def as_config(launch: dict) -> dict:
    return {"block": launch["BLOCK_M"], "num_warps": launch["num_warps"], "num_stages": launch["num_stages"]}


@contextlib.contextmanager
def own_needs_table(module, head: int, default: dict, rows: list, fit_table: str | None, dtype: str):
    """With no fit table given: one the clamp reads, holding the needs this sweep compiled at vLLM's own
    warps and stages (what the build's fit check records for the encoder), so the clamp's own code
    decides its launch as on that GPU (the simulated device again, with that table). With one, nothing
    changes."""
    if fit_table or default is None:
        yield
        return
    from patches.fitcheck.recorder import simulated_device
    from patches.turing_clamp.runtime import _VLLM_TURING_ENCODER_PATH

    low = lowering()
    cc = LOWERING_CC[low]
    entries = [{"cc": cc, "path": _VLLM_TURING_ENCODER_PATH, "head_size_padded": 1 << (head - 1).bit_length(),
                "dtype": dtype, "block_m": r["block"], "num_warps": default["num_warps"],
                "num_stages": default["num_stages"], "tile_size": r["block"], "shared": r["shared"]}
               for r in rows if "shared" in r and r["num_warps"] == default["num_warps"]
               and r["num_stages"] == default["num_stages"]]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as table:
        json.dump({"format": 1, "vllm_version": "sweep", "triton_version": "sweep", "entries": entries}, table)
        table.flush()
        with simulated_device(module, cc, DEVICE_LIMITS[low], table.name):
            yield


def sweep_head(module, head: int, low: str, fit_table: str | None = None, dtype: str = "float16") -> dict:
    limit = DEVICE_LIMITS[low]
    batch = encoder_batch(head, device="cuda", dtype=getattr(torch, dtype))
    out = torch.empty_like(batch["q"])
    rows, timers, needs = [], [], {}
    default = clamped = None
    for config in config_list(low, head):
        row = dict(config)
        skipped = over_limit(config, needs, limit)
        if skipped:
            rows.append(dict(row, skipped=skipped))
            continue
        try:
            with Configured(module, config) as launches:
                run_once(module, batch, out)
                torch.cuda.synchronize()
                (seen,) = launches.seen
                row.update(shared=seen["shared"], block_n=seen["BLOCK_N"], fits=seen["shared"] <= limit)
                note_need(config, seen["shared"], needs)
                if config.get("vllm_default"):
                    default = seen
                    row.update(as_config(seen))
                queue_timing(row, config, lambda: run_once(module, batch, out), timers)
        except Exception as error:  # a configuration the compiler or the device refuses is a finding
            row["error"] = first_line(error)
            torch.cuda.synchronize()
        rows.append(row)
    with own_needs_table(module, head, default, rows, fit_table, dtype):
        with Configured(module, {}, keep_clamp=True) as launches:
            run_once(module, batch, out)
            torch.cuda.synchronize()
            clamped = launches.seen[-1]
    time_in_turns(timers, lambda config: Configured(module, config))
    del batch, out, timers
    torch.cuda.empty_cache()
    return {"default": default, "clamped": clamped, "configs": rows}


def compile_share(module, heads, low: str, index: int, count: int, dtype: str = "float16") -> None:
    """Compiles this worker's share of (head, chain) pairs into Triton's cache, each chain up to its
    first BLOCK over the limit (the sweep skips the rest as well)."""
    pairs = [(head, chain) for head in heads for chain in chains(config_list(low, head))]
    for head, chain in pairs[index::count]:
        batch, needs = encoder_batch(head, device="cuda", dtype=getattr(torch, dtype)), {}
        for config in chain:
            if over_limit(config, needs, DEVICE_LIMITS[low]):
                break
            print(f"encoder_sweep compile {low} {index}/{count}: head {head} {config}", file=sys.stderr, flush=True)
            try:
                with Configured(module, config) as launches:
                    run_once(module, batch, torch.empty_like(batch["q"]))
                    torch.cuda.synchronize()
                note_need(config, launches.seen[-1]["shared"], needs)
            except Exception:  # refused configurations are recorded by the sweep itself
                torch.cuda.synchronize()


def main(argv: list[str]) -> int:
    from patches.fitcheck.recorder import simulated_device

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--heads", default=",".join(map(str, HEADS)))
    parser.add_argument("--fit-table", help=f"the clamp's fit table (default: ${layout.ENV_FIT_TABLE})")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--shard", default="0/1", help="with --compile-only: this worker's share, I/N")
    parser.add_argument("--dtype", choices=DTYPES, default="float16", help="the dtype of q, k and v")
    args = parser.parse_args(argv)
    heads = [int(h) for h in args.heads.split(",") if h]
    module = importlib.import_module(ENCODER_MODULE)
    low = lowering()
    document = dict(environment(args.dtype), kernel=KERNEL, cases={})
    fit_table = args.fit_table or os.environ.get(layout.ENV_FIT_TABLE)
    with simulated_device(module, LOWERING_CC[low], DEVICE_LIMITS[low], fit_table):
        if args.compile_only:
            compile_share(module, heads, low, *(int(p) for p in args.shard.split("/")), args.dtype)
            return 0
        for head in heads:
            document["cases"][f"encoder-h{head}"] = sweep_head(module, head, low, fit_table, args.dtype)
            args.out.write_text(json.dumps(document, indent=1))
            print(f"encoder_sweep {low}: head {head} done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
