"""Times vLLM's unified attention kernel on the GPU tier's cases in launch configurations the
launcher could be given (tile, num_warps, num_stages), under the Triton lowering this process
runs with, and the clamp's own launch at a forced shared-memory limit.

The lowering is Triton's TRITON_OVERRIDE_ARCH, set by the caller (bench/clamp_gpu): `sm75`
keeps Turing's lowering (TTGIR and LLVM at capability 7.5: no asynchronous copies, so no load
pipelining) and still assembles for the GPU at hand, `sm86` Ampere's, unset the device's own.
On an H200 that makes a proxy of Turing or Ampere code, not Turing or Ampere speed: only ratios
between configurations mean anything. The preflight refuses the override in the product.

    python -m tooling.clamp_sweep compile --shard I/N [--cases A,B]   # compile only (parallel warm-up)
    python -m tooling.clamp_sweep sweep --out FILE [--cases A,B]      # every configuration, clamp bypassed
    python -m tooling.clamp_sweep clamped --out FILE                  # the clamp's own launch (no timing)

Each takes --dtype float16|bfloat16 (default float16): the dtype of the case's q, k and v, so of every
launch; the document records it (the ranking keys its launches by it).

Each configuration's shared memory is the compiled kernel's own (`metadata.shared`), so under
`sm75` it is what a Turing GPU would need; `sweep` times only the configurations that fit the
lowering's device limit (DEVICE_LIMITS) and vLLM's own launch, which is always timed. The
configurations of one case are timed in turns, ROUNDS rounds of one batch each (so a clock change
reaches them all alike); a batch is back-to-back replays of a CUDA graph of one unified_attention()
call (no launch overhead), or back-to-back calls where capture fails (recorded per row as
`timing`); ms is the median over the rounds. `clamped` records the launch the clamp makes at the
limit in TURING_CLAMP_SMEM_LIMIT (bench/clamp_gpu takes its time from the sweep's same launch).
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
from pathlib import Path

import torch

from contract.devices import AMPERE, HOPPER, TURING
from tooling.attention_cases import CASE_NAMES, DTYPES, case_named
from tooling.paged_attention import make_batch
from tooling.unified_attention_run import LAUNCHER_MODULE, attention_call

OVERRIDE_ENV = "TRITON_OVERRIDE_ARCH"
TILES = (16, 32, 64)
WARPS = (2, 4, 8)
# Turing has no asynchronous copy, so Triton's num_stages changes neither its shared memory nor
# its code there (measured, docs/clamp.md); only lowerings that pipeline try stage counts.
STAGES = {"sm75": (None,), "sm86": (None, 1, 2), "native": (None, 2)}
# The device each lowering stands for: a configuration must fit its shared memory per block to be
# timed (T4 / RTX 20xx, RTX 30xx; the H200's own for native).
LOWERING_DEVICES = {"sm75": TURING, "sm86": AMPERE, "native": HOPPER}
DEVICE_LIMITS = {low: device.limit for low, device in LOWERING_DEVICES.items()}
BATCH_MS = 10.0  # calls per timed batch: enough for about this many milliseconds
ROUNDS = 5  # every configuration of a case is timed once per round, round after round


def lowering() -> str:
    return os.environ.get(OVERRIDE_ENV) or "native"


def config_list(default_tile: int, low: str) -> list[dict]:
    """vLLM's own launch first (its tile, Triton's default warps and stages), then the grid."""
    grid = [{"tile_size": t, "num_warps": w, "num_stages": s}
            for t in TILES for w in WARPS for s in STAGES[low]]
    return [{"tile_size": default_tile, "num_warps": None, "num_stages": None, "vllm_default": True}] + grid


class Forced:
    """kernel[grid](**kwargs) with some keyword arguments replaced; keeps the compiled kernel."""

    def __init__(self, kernel, overrides: dict):
        self.kernel, self.overrides, self.compiled = kernel, overrides, None

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def call(*args, **kwargs):
            self.compiled = launch(*args, **dict(kwargs, **self.overrides))
            return self.compiled
        return call


def bypass_clamp(module) -> None:
    """vLLM's own tiles and stages whatever the limit: the sweep sets them itself."""
    module._vllm_turing_clamp = lambda q, block_m, tp, td, num_warps=None, num_stages=None, adjust_stages=False, \
        sliding_window=None: (tp, td, num_stages)


def recorded_launch(module, launch) -> dict:
    """The kernel_unified_attention launch one call makes: vLLM's (or the clamp's) own choice."""
    seen = []
    original = module.kernel_unified_attention

    class Spy:
        def __getitem__(self, grid):
            def call(*args, **kwargs):
                seen.append({k: kwargs.get(k) for k in ("TILE_SIZE", "IS_3D", "BLOCK_M", "HEAD_SIZE_PADDED",
                                                       "SLIDING_WINDOW", "num_warps", "num_stages")})
                compiled = original[grid](*args, **kwargs)
                seen[-1]["shared"] = compiled.metadata.shared
                return compiled
            return call

    module.kernel_unified_attention = Spy()
    try:
        launch()
        torch.cuda.synchronize()
    finally:
        module.kernel_unified_attention = original
    assert len(seen) == 1, f"{len(seen)} attention launches in one call"
    return seen[0]


def with_config(module, config: dict):
    """A context: the launcher's two kernels forced to `config` (the reduction repeats the tile)."""
    overrides = {"TILE_SIZE": config["tile_size"]}
    for option in ("num_warps", "num_stages"):
        if config[option] is not None:
            overrides[option] = config[option]
    attention = Forced(module.kernel_unified_attention, overrides)
    reduction = Forced(module.reduce_segments, {"TILE_SIZE": config["tile_size"]})

    class Context:
        def __enter__(self):
            self.saved = (module.kernel_unified_attention, module.reduce_segments)
            module.kernel_unified_attention, module.reduce_segments = attention, reduction
            return attention

        def __exit__(self, *exc):
            module.kernel_unified_attention, module.reduce_segments = self.saved
    return Context()


class Timer:
    """Times one configuration's call: a CUDA graph of it when capture works, else the call itself."""

    def __init__(self, launch):
        self.launch, self.graph, self.how = launch, None, "graph"
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                launch()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                launch()
            self.graph = graph
        except Exception as error:
            torch.cuda.synchronize()
            self.how = f"calls ({first_line(error)})"
        self.calls = 1
        self.calls = max(1, min(200, math.ceil(BATCH_MS / max(self.batch(), 1e-3))))

    def run(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.launch()

    def batch(self) -> float:
        """Milliseconds per call over one batch of back-to-back calls."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(self.calls):
            self.run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / self.calls


def first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"[:240]


def queue_timing(row: dict, config: dict, launch, timers: list) -> None:
    """The configuration joins the timed ones when it fits the lowering's limit or is vLLM's own."""
    if row["fits"] or config.get("vllm_default"):
        timer = Timer(launch)
        row["timing"] = timer.how
        timers.append((row, config, timer, []))


def time_in_turns(timers: list, configured) -> None:
    """Times each (row, config, Timer, []) ROUNDS times, the configurations in turns, and writes the
    median into its row; configured(config) is the context a Timer without a CUDA graph runs in."""
    for _ in range(ROUNDS):
        for row, config, timer, times in timers:
            if timer.graph is None:
                with configured(config):
                    times.append(timer.batch())
            else:
                times.append(timer.batch())
    for row, _, _, times in timers:
        row["ms"] = statistics.median(times)
        row["rounds_ms"] = [round(t, 5) for t in times]


def sweep_case(module, name: str, low: str, timed: bool, dtype: str = "float16") -> dict:
    case = case_named(name)
    batch = make_batch(case, device="cuda", dtype=getattr(torch, dtype))
    launch, _ = attention_call(module, batch, case.layer)
    default = recorded_launch(module, launch)
    rows, timers = [], []
    for config in config_list(default["TILE_SIZE"], low):
        row = dict(config)
        try:
            with with_config(module, config) as attention:
                launch()
                torch.cuda.synchronize()
                metadata = attention.compiled.metadata
                row.update(shared=metadata.shared, compiled_num_warps=metadata.num_warps,
                           compiled_num_stages=metadata.num_stages)
                row["fits"] = metadata.shared <= DEVICE_LIMITS[low]
                if timed:
                    queue_timing(row, config, launch, timers)
        except Exception as error:  # a configuration the compiler or the device refuses is a finding
            row["error"] = first_line(error)
            torch.cuda.synchronize()
        rows.append(row)
    time_in_turns(timers, lambda config: with_config(module, config))
    del batch, launch, timers
    torch.cuda.empty_cache()
    return {"default": default, "configs": rows}


def environment(dtype: str = "float16") -> dict:
    import triton

    props = torch.cuda.get_device_properties(0)
    try:
        import importlib.metadata as metadata
        vllm_version = metadata.version("vllm")
    except Exception:
        vllm_version = "unknown"
    return {"lowering": lowering(), "override": os.environ.get(OVERRIDE_ENV), "gpu": props.name,
            "cc": f"{props.major}.{props.minor}", "triton": triton.__version__, "torch": torch.__version__,
            "vllm": vllm_version, "device_limit": DEVICE_LIMITS[lowering()], "dtype": dtype}


def clamped_case(module, name: str, dtype: str = "float16") -> dict:
    """The clamp's own launch (limit from TURING_CLAMP_SMEM_LIMIT), with the options it applied."""
    case = case_named(name)
    batch = make_batch(case, device="cuda", dtype=getattr(torch, dtype))
    launch, _ = attention_call(module, batch, case.layer)
    row = recorded_launch(module, launch)
    del batch, launch
    torch.cuda.empty_cache()
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("compile", "sweep", "clamped"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default=",".join(CASE_NAMES))
    parser.add_argument("--shard", default="0/1", help="compile: this worker's share, I/N")
    parser.add_argument("--dtype", choices=DTYPES, default="float16", help="the dtype of q, k and v")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    module = importlib.import_module(LAUNCHER_MODULE)
    low = lowering()
    if args.action == "compile":
        index, count = (int(p) for p in args.shard.split("/"))
        bypass_clamp(module)
        # one shard = a slice of (case, configuration) pairs, so the compiles spread evenly
        for name in names:
            case = case_named(name)
            batch = make_batch(case, device="cuda", dtype=getattr(torch, args.dtype))
            launch, _ = attention_call(module, batch, case.layer)
            default_tile = recorded_launch(module, launch)["TILE_SIZE"]
            for position, config in enumerate(config_list(default_tile, low)):
                if (names.index(name) * 100 + position) % count != index:
                    continue
                try:
                    with with_config(module, config):
                        launch()
                        torch.cuda.synchronize()
                except Exception:
                    torch.cuda.synchronize()
            del batch, launch
            torch.cuda.empty_cache()
        return 0
    document = dict(environment(args.dtype), cases={})
    if args.action == "sweep":
        bypass_clamp(module)
    for name in names:
        document["cases"][name] = sweep_case(module, name, low, timed=True, dtype=args.dtype) \
            if args.action == "sweep" else clamped_case(module, name, args.dtype)
        args.out.write_text(json.dumps(document, indent=1))
        print(f"clamp_sweep {args.action} {low}: {name} done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
