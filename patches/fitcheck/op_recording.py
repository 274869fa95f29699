"""What every family that records its own launches (families/<family>/launches.py: the mixers, latent
attention) shares: vLLM's real ops called on CPU tensors with a recorder in place of each kernel, the
Mamba ops' import and their causal convolution (Mamba-2, Mamba-1, short convolution, gated delta net and
KDA run it), and the launches' verdict once compiled for a device. Nothing runs on a GPU.

An @triton.autotune kernel (the SSD chunk scan's five, FLA's) is recorded once per configuration of its
list. Triton's autotuner scores a configuration that raises OutOfResources as infinitely slow
(triton/runtime/autotuner.py), so such a launch fits when one configuration does: the check compiles
its configurations smallest first and stops at the first that fits. A plain launch must fit itself.
An op this vLLM does not take the way the check calls it is a Problem (the fit check's exit 2).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
from dataclasses import dataclass

from door.problem import Problem
from patches.fitcheck.family import DEFAULT_DTYPE, RecordedShape
from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.recorder import Launch, _Recorder, prepare_cpu_host

DTYPE_NAME = DEFAULT_DTYPE
OPS = "vllm.model_executor.layers.mamba.ops"
DECODE_BATCH = 4
# The device name vLLM looks up a tuned selective_state_update file by (mamba_ssm.get_ssm_device_name);
# a CPU host has none to give. The release ships no file for a Turing or Ampere consumer card, so a
# T4's name finds the built-in choice, as it does on the card.
SSM_DEVICE_NAME = "Tesla_T4"
# ReplaySSM's Triton decode (mamba_mixer2.py, cache_config.use_replayssm); releases before it have none.
REPLAYSSM = "selective_state_update_replayssm_output_only"


@dataclass(frozen=True)
class MixerCase:
    """One call of a mixer op: the report's case for its launches."""

    shape: RecordedShape
    kind: str  # conv-prefill | ssd-prefill | norm | checkpoint | conv-decode | ssm-decode | replayssm-decode
    query_len: int
    num_seqs: int = 1


class _AutotunedRecorder:
    """Stands where an @triton.autotune kernel stands for triton_helpers.launch_autotuned: a launch
    records one launch per configuration of the autotuner's list."""

    def __init__(self, name, autotuner, sink):
        self.name, self.autotuner, self.sink = name, autotuner, sink
        self.keys = autotuner.keys
        self.fn = autotuner.fn
        self.signature = inspect.signature(autotuner.fn.fn)  # the kernel's parameters, as _Recorder's
        self.best_config = type("Config", (), {"pre_hook": object()})()  # never cached by launch_autotuned

    def __getitem__(self, grid):
        def launch(**kwargs):
            configs = self.autotuner.configs
            for index, config in enumerate(configs):
                recorder = _Recorder(self.name, self.autotuner.fn, self.sink)
                recorder[grid](**kwargs, **config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)
                self.sink[-1].options.update(config=index, configs=len(configs))
        return launch


class _HeuristicsRecorder:
    """Stands where a @triton.heuristics chain over a plain or an @triton.autotune kernel stands (FLA's
    kernels are heuristics over autotune): the heuristic values are computed from the launch's
    arguments, as Triton does, and the inner kernel's launch recorded (per configuration when autotuned)."""

    def __init__(self, name, kernel, sink):
        self.heuristics = []
        while hasattr(kernel, "values") and hasattr(kernel, "fn"):
            self.heuristics.append(kernel.values)
            kernel = kernel.fn
        self.inner = _recorder_for(name, kernel, sink)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            values = dict(zip(self.inner.signature.parameters, args), **kwargs)
            for heuristic in reversed(self.heuristics):  # the innermost decorator runs last
                for key, compute in heuristic.items():
                    values[key] = compute(values)
            self.inner[grid](**values)
        return launch


def _recorder_for(name, kernel, sink):
    if hasattr(kernel, "configs"):
        return _AutotunedRecorder(name, kernel, sink)
    if hasattr(kernel, "values"):
        return _HeuristicsRecorder(name, kernel, sink)
    return _Recorder(name, kernel, sink)


def recorded(kernels, call) -> list[Launch]:
    """The launches `call()` makes through `kernels`, [(module, names)], each name a recorder meanwhile."""
    launches, saved = [], [(module, name, getattr(module, name)) for module, names in kernels for name in names]
    try:
        for module, name, kernel in saved:
            setattr(module, name, _recorder_for(name, kernel, launches))
        call()
    finally:
        for module, name, kernel in saved:
            setattr(module, name, kernel)
    return launches


def mamba_ops() -> dict:
    """vLLM's Mamba op modules by name (ReplaySSM's where the release has it)."""
    prepare_cpu_host()
    names = ("causal_conv1d", "mamba_ssm", "ssd_bmm", "ssd_chunk_scan", "ssd_chunk_state", "ssd_combined",
             "ssd_state_passing", "layernorm_gated", "ssd_checkpoint")
    try:
        ops = {name: importlib.import_module(f"{OPS}.{name}") for name in names}
        if importlib.util.find_spec(f"{OPS}.{REPLAYSSM}") is not None:
            ops[REPLAYSSM] = importlib.import_module(f"{OPS}.{REPLAYSSM}")
        return ops
    except Exception as error:  # the ops import vLLM's runtime (its distributed package needs zmq, ...)
        raise Problem(f"cannot import vLLM's Mamba ops ({type(error).__name__}: {error}); run the fit check "
                      "inside the vLLM image, or pass --matrix attention to leave the mixers out") from None


def conv_calls(dim: int, width: int, seqlen: int, conv, dtype_name: str, activation: str | None = "silu",
               bias: bool = True) -> list[tuple[str, int, int, tuple, object]]:
    """The causal conv's prefill over one sequence of `seqlen` tokens and its decode step: (kind,
    query_len, num_seqs, kernels, call) each, as a family's calls give them. The Mamba mixers apply SiLU in the
    kernel and add a bias, LFM2's short convolution neither (both constexprs of the kernels)."""
    import torch

    dtype = getattr(torch, dtype_name)
    conv_bias = torch.empty(dim, dtype=dtype) if bias else None

    def conv_prefill():
        conv.causal_conv1d_fn(torch.empty(seqlen, dim, dtype=dtype).t(), torch.empty(dim, width, dtype=dtype),
                              conv_bias, torch.empty(2, dim, width - 1, dtype=dtype),
                              torch.tensor([0, seqlen], dtype=torch.int32),
                              cache_indices=torch.tensor([1], dtype=torch.int32),
                              has_initial_state=torch.tensor([False]), activation=activation)

    def conv_decode():
        conv.causal_conv1d_update(torch.empty(DECODE_BATCH, dim, dtype=dtype),
                                  torch.empty(DECODE_BATCH, dim, width - 1, dtype=dtype),
                                  torch.empty(dim, width, dtype=dtype), conv_bias, activation=activation,
                                  conv_state_indices=torch.arange(DECODE_BATCH, dtype=torch.int32))

    return [("conv-prefill", seqlen, 1, ((conv, ("_causal_conv1d_fwd_kernel",)),), conv_prefill),
            ("conv-decode", 1, DECODE_BATCH, ((conv, ("_causal_conv1d_update_kernel",)),), conv_decode)]


# Mamba-1 and short-conv prefill: the conv runs over one sequence this long
MAMBA1_PREFILL_LEN = 256


def record_calls(shape, calls, failure) -> list[Launch]:
    """Every launch the ops in `calls` make ((kind, query_len, num_seqs, kernels, call) each), each a
    MixerCase of `shape`; an op that fails raises failure(kind, error)."""
    launches = []
    for kind, query_len, num_seqs, kernels, call in calls:
        try:
            made = recorded(kernels, call)
        except Exception as error:
            raise failure(kind, f"{type(error).__name__}: {str(error)[:200]}") from None
        case = MixerCase(shape, kind, query_len, num_seqs)
        for launch in made:
            launch.case = case
        launches += made
    return launches


def record_mamba_ops(shape, calls, what: str, dtype: str) -> list[Launch]:
    """Every launch `calls(shape, mamba_ops(), dtype)` makes: the ops of a Mamba-2 or Mamba-1 mixer, a short
    convolution or latent attention (`what`, for the message of an op that fails)."""
    return record_calls(shape, calls(shape, mamba_ops(), dtype), lambda kind, error: Problem(
        f"vLLM's {kind} op of the {what} failed on {shape.label} ({error}); the check does not know this "
        "release's mixer ops"))


# FLA's tile names (gated delta net); the SSD kernels' all start with BLOCK
FLA_TILES = ("BT", "BK", "BV", "BS")


def tile_volume(launch: Launch) -> int:
    """How large a configuration's tiles are: the order its configurations are compiled in."""
    blocks = [value for key, value in launch.params.items()
              if (key.startswith("BLOCK") or key in FLA_TILES) and isinstance(value, int) and not isinstance(value, bool)]
    return math.prod(blocks) * (launch.options.get("num_stages") or 1)


def options(launch: Launch) -> dict:
    """The launch options Triton compiles with (the recorder's configuration index left out)."""
    return {k: v for k, v in launch.options.items() if k not in ("config", "configs")}


def judged(launches: list[Launch], cc: int, limit: int, workers: int | None = None) -> list[tuple]:
    """(launch, CompileResult, autotune) per plain launch and per autotuned call: for an autotuned one
    the first configuration that fits in smallest-first order (else the smallest that compiled), and
    autotune = {configs, compiled, fitting_config}. Plain launches first, in one batch of compiles."""
    plain = [launch for launch in launches if "configs" not in launch.options]
    groups, current = [], []
    for launch in launches:
        if "configs" in launch.options:
            current.append(launch)
            if len(current) == launch.options["configs"]:
                groups.append(sorted(current, key=tile_volume))
                current = []
    out = [(launch, result, None) for launch, result in
           zip(plain, compile_launches([(l.fn, l.params, options(l), l.case) for l in plain], cc, workers))]
    # Rounds: each call that has no fitting configuration yet compiles its next ones, as many as leave
    # no worker idle (one each while many calls are pending).
    state = [{"members": members, "tried": [], "fit": None} for members in groups]
    spare = workers or os.cpu_count() or 1
    while True:
        pending = [s for s in state if s["fit"] is None and len(s["tried"]) < len(s["members"])]
        if not pending:
            break
        step = max(1, spare // len(pending))
        batch = [(s, member) for s in pending for member in s["members"][len(s["tried"]):len(s["tried"]) + step]]
        results = compile_launches([(m.fn, m.params, options(m), m.case) for _, m in batch], cc, workers)
        for (s, member), result in zip(batch, results):
            s["tried"].append((member, result))
            if s["fit"] is None and result.shared is not None and result.shared <= limit:
                s["fit"] = (member, result)
    for s in state:
        compiled = [(l, r) for l, r in s["tried"] if r.shared is not None]
        launch, result = s["fit"] or (min(compiled, key=lambda lr: lr[1].shared) if compiled else s["tried"][0])
        out.append((launch, result, {"configs": len(s["members"]), "compiled": len(compiled),
                                     "fitting_config": launch.options["config"] if s["fit"] else None}))
    return out
