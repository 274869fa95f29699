"""Runs in a container of the image (bench/ssm_kernels_smem): the Mamba/SSM Triton kernels of the
hybrid families, called through vLLM's real launchers on CPU tensors with a recorder in place of
each kernel, cross-compiled for sm_75 and sm_86 by the image's Triton. One JSON line per
(device, family, kernel, configuration). Nothing runs on a GPU and nothing is timed.

An autotuned kernel (the SSD chunk scan's five) is recorded once per configuration of its list:
Triton's autotuner scores a configuration that raises OutOfResources as infinitely slow
(triton/runtime/autotuner.py), so such a launch fails only when every configuration does.
"""
import json
import sys

import torch

from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.recorder import _Recorder, prepare_cpu_host

prepare_cpu_host()
import vllm.model_executor.layers.mamba.ops.causal_conv1d as conv  # noqa: E402
import vllm.model_executor.layers.mamba.ops.mamba_ssm as ssu  # noqa: E402
import vllm.model_executor.layers.mamba.ops.ssd_bmm as bmm  # noqa: E402
import vllm.model_executor.layers.mamba.ops.ssd_chunk_scan as scan  # noqa: E402
import vllm.model_executor.layers.mamba.ops.ssd_chunk_state as state  # noqa: E402
import vllm.model_executor.layers.mamba.ops.ssd_combined as combined  # noqa: E402
import vllm.model_executor.layers.mamba.ops.ssd_state_passing as passing  # noqa: E402

DTYPE = torch.float16
# vLLM looks for a tuned selective_state_update file by the device's name; a CPU host has none to
# give. The release ships none for a Turing or Ampere consumer name, so a T4's name finds the
# built-in choice, as it does on the card.
ssu.get_ssm_device_name = lambda: "Tesla_T4"


class AutotunedRecorder:
    """Stands where an @triton.autotune kernel stands for triton_helpers.launch_autotuned: each
    launch records one launch per configuration of the autotuner's list."""

    def __init__(self, name, autotuner, sink):
        self.name, self.autotuner, self.sink = name, autotuner, sink
        self.keys = autotuner.keys
        self.fn = autotuner.fn
        self.best_config = type("Config", (), {"pre_hook": object()})()  # never cached by launch_autotuned

    def __getitem__(self, grid):
        def launch(**kwargs):
            for index, config in enumerate(self.autotuner.configs):
                recorder = _Recorder(self.name, self.autotuner.fn, self.sink)
                options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
                recorder[grid](**kwargs, **config.kwargs, **options)
                self.sink[-1].options["config"] = index
        return launch


class HeuristicsRecorder:
    """Stands where a @triton.heuristics chain over a plain kernel stands: the heuristic values are
    computed from the launch's arguments, as Triton does, and the inner kernel's launch recorded."""

    def __init__(self, name, kernel, sink):
        self.heuristics = []
        while hasattr(kernel, "values") and hasattr(kernel, "fn"):
            self.heuristics.append(kernel.values)
            kernel = kernel.fn
        self.inner = _Recorder(name, kernel, sink)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            names = list(self.inner.signature.parameters)
            values = dict(zip(names, args), **kwargs)
            for heuristic in reversed(self.heuristics):  # the innermost decorator runs last
                for key, compute in heuristic.items():
                    values[key] = compute(values)
            self.inner[grid](**values)
        return launch


def recorder_for(name, kernel, sink):
    if hasattr(kernel, "configs"):
        return AutotunedRecorder(name, kernel, sink)
    if hasattr(kernel, "values"):
        return HeuristicsRecorder(name, kernel, sink)
    return _Recorder(name, kernel, sink)


def recorded(kernels, call):
    """The launches `call()` makes through `kernels`, [(module, names)], each name a recorder meanwhile."""
    launches, saved = [], [(module, name, getattr(module, name)) for module, names in kernels for name in names]
    try:
        for module, name, kernel in saved:
            setattr(module, name, recorder_for(name, kernel, launches))
        call()
    finally:
        for module, name, kernel in saved:
            setattr(module, name, kernel)
    return launches


def ssd_prefill(heads, headdim, dstate, groups, chunk):
    """mamba_chunk_scan_combined_varlen for one sequence of two chunks (its five kernels)."""
    seqlen = 2 * chunk
    x = torch.empty(seqlen, heads, headdim, dtype=DTYPE)
    dt = torch.empty(seqlen, heads, dtype=DTYPE)
    A = torch.empty(heads, dtype=torch.float32)
    B = torch.empty(seqlen, groups, dstate, dtype=DTYPE)
    C = torch.empty(seqlen, groups, dstate, dtype=DTYPE)
    D = torch.empty(heads, dtype=torch.float32)
    out = torch.empty_like(x)
    cu_seqlens = torch.tensor([0, seqlen], dtype=torch.int32)
    cu_chunk = torch.tensor([0, chunk, seqlen], dtype=torch.int32)
    last_chunk = torch.tensor([1], dtype=torch.int32)
    seq_idx = torch.zeros(2, dtype=torch.int32)
    kernels = ((state, ("_chunk_cumsum_fwd_kernel", "_chunk_state_fwd_kernel")),
               (passing, ("_state_passing_fwd_kernel",)), (bmm, ("_bmm_chunk_fwd_kernel",)),
               (scan, ("_chunk_scan_fwd_kernel",)))
    return recorded(kernels, lambda: combined.mamba_chunk_scan_combined_varlen(
        x, dt, A, B, C, chunk, cu_seqlens, cu_chunk, last_chunk, seq_idx, out, D=D, z=torch.empty_like(x),
        dt_bias=torch.empty(heads, dtype=torch.float32), dt_softplus=True, state_dtype=DTYPE))


def ssu_decode(heads, headdim, dstate, groups):
    """selective_state_update for a decode batch of 4 (Mamba-2 heads; Mamba-1 is heads=1)."""
    batch = 4
    def call():
        ssu.selective_state_update(
            torch.empty(batch, heads, headdim, dstate, dtype=DTYPE), torch.empty(batch, heads, headdim, dtype=DTYPE),
            torch.empty(batch, heads, headdim, dtype=DTYPE), torch.empty(heads, headdim, dstate, dtype=torch.float32),
            torch.empty(batch, groups, dstate, dtype=DTYPE), torch.empty(batch, groups, dstate, dtype=DTYPE),
            torch.empty(heads, headdim, dtype=torch.float32), torch.empty(heads, headdim, dtype=torch.float32),
            z=torch.empty(batch, heads, headdim, dtype=DTYPE), dt_softplus=True,
            out=torch.empty(batch, heads, headdim, dtype=DTYPE))
    return recorded(((ssu, ("_selective_scan_update_kernel",)),), call)


def conv_update(dim, width):
    """causal_conv1d_update for a decode batch of 4."""
    def call():
        conv.causal_conv1d_update(torch.empty(4, dim, dtype=DTYPE), torch.empty(4, dim, width - 1, dtype=DTYPE),
                                  torch.empty(dim, width, dtype=DTYPE), torch.empty(dim, dtype=DTYPE), activation="silu",
                                  conv_state_indices=torch.arange(4, dtype=torch.int32))
    return recorded(((conv, ("_causal_conv1d_update_kernel",)),), call)


families = json.loads(sys.argv[1])
devices = json.loads(sys.argv[2])
cases = []
for family in families:
    name, heads, headdim, dstate, groups, chunk, width = (family[k] for k in (
        "family", "heads", "headdim", "dstate", "groups", "chunk", "conv_width"))
    for kind, make in (("prefill", lambda: ssd_prefill(heads, headdim, dstate, groups, chunk)),
                       ("decode", lambda: ssu_decode(heads, headdim, dstate, groups)),
                       ("conv decode", lambda: conv_update(heads * headdim + 2 * groups * dstate, width))):
        try:
            for launch in make():
                cases.append((name, kind, launch))
        except Exception as error:  # a launcher this probe calls wrongly: said, not hidden
            print(json.dumps({"family": name, "kind": kind, "error": f"{type(error).__name__}: {error}"[:300]}),
                  flush=True)
for device, (cc, limit) in devices.items():
    results = compile_launches([(l.fn, l.params, {k: v for k, v in l.options.items() if k != "config"})
                                for _, _, l in cases], cc, 2)
    for (name, kind, launch), result in zip(cases, results):
        tiles = {k: v for k, v in launch.params.items() if k.startswith("BLOCK_SIZE") and isinstance(v, int)}
        print(json.dumps({"device": device, "limit": limit, "family": name, "kind": kind, "kernel": launch.kernel_name,
                          "config": launch.options.get("config"), "tiles": tiles,
                          "num_warps": launch.options.get("num_warps"), "num_stages": launch.options.get("num_stages"),
                          "shared": result.shared, "error": result.error}), flush=True)
