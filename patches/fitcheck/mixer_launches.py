"""The Triton launches of one Mamba-2 or Mamba-1 mixer or LFM2 short convolution (families/mamba2.py MixerShape,
families/mamba1.py Mamba1Shape, families/short_conv.py ShortConvShape), made by
vLLM's real mixer ops on CPU tensors with a recorder in place of each kernel, and their verdict once
compiled for a device.

The ops are the ones vLLM 0.33.0's MambaMixer2 calls on CUDA (model_executor/layers/mamba/
mamba_mixer2.py): a prefill of two chunks (causal_conv1d_fn, mamba_chunk_scan_combined_varlen,
rms_norm_gated where the mixer uses it, store_prefill_checkpoint) and a decode step of four sequences
(causal_conv1d_update, selective_state_update on its Triton backend), and the same step under ReplaySSM
(`--use-replayssm`, opt-in: selective_state_update_replayssm_output_only's precompute and update
kernels over a history of mixer_shapes.REPLAYSSM_HISTORY inputs; FlashInfer's variant with
`--mamba-backend flashinfer` is CUDA, outside the check). A Mamba-1 mixer (MambaMixer,
mamba_mixer.py) runs the same conv ops and selective_state_update on a state without heads; its
prefill scan is CUDA (selective_scan_fn), not Triton. LFM2's ShortConv (short_conv.py) runs the conv ops
alone, without an activation. Nothing runs on a GPU.

An @triton.autotune kernel (the SSD chunk scan's five) is recorded once per configuration of its
list. Triton's autotuner scores a configuration that raises OutOfResources as infinitely slow
(triton/runtime/autotuner.py), so such a launch fits when one configuration does: the check compiles
its configurations smallest first and stops at the first that fits. A plain launch must fit itself.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
from dataclasses import dataclass

from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.mixer_shapes import (MAMBA1, MAMBA2, MLA, MODEL_DTYPE, REPLAYSSM_HISTORY, SHORT_CONV,
                                           RecordedShape)
from patches.fitcheck.recorder import Launch, _Recorder, prepare_cpu_host
from patches.fitcheck.util import swapped

DTYPE_NAME = MODEL_DTYPE
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


def _ops():
    prepare_cpu_host()
    names = ("causal_conv1d", "mamba_ssm", "ssd_bmm", "ssd_chunk_scan", "ssd_chunk_state", "ssd_combined",
             "ssd_state_passing", "layernorm_gated", "ssd_checkpoint")
    try:
        ops = {name: importlib.import_module(f"{OPS}.{name}") for name in names}
        if importlib.util.find_spec(f"{OPS}.{REPLAYSSM}") is not None:
            ops[REPLAYSSM] = importlib.import_module(f"{OPS}.{REPLAYSSM}")
        return ops
    except Exception as error:  # the ops import vLLM's runtime (its distributed package needs zmq, ...)
        raise MixerError(f"cannot import vLLM's Mamba ops ({type(error).__name__}: {error}); run the fit check "
                         "inside the vLLM image, or pass --matrix attention to leave the mixers out") from None


def _conv_calls(dim: int, width: int, seqlen: int, conv, dtype_name: str, activation: str | None = "silu",
                bias: bool = True) -> list[tuple[str, int, int, tuple, object]]:
    """The causal conv's prefill over one sequence of `seqlen` tokens and its decode step: (kind,
    query_len, num_seqs, kernels, call) each, as _calls gives them. The Mamba mixers apply SiLU in the
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


def _short_conv_calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """LFM2's ShortConv ops: the conv's prefill and decode with no activation and, as LiquidAI's checkpoints
    have it (conv_bias false), no bias (with one the needs are the same: 1,024 and 0 bytes at width 3 on
    sm_75 and sm_86, measured with the image's Triton 3.8.0)."""
    return _conv_calls(shape.channels, shape.conv_width, MAMBA1_PREFILL_LEN, ops["causal_conv1d"], dtype_name,
                       activation=None, bias=False)


# TRITON_MLA's decode (triton_mla.py forward_mqa): a page of the latent cache, the splits of the KV
# (its _compute_num_kv_splits; constexprs that set no tile) and a batch of decoding sequences
MLA_PAGE_SIZE = 16
MLA_KV_SPLITS = 4


def _mla_calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """TRITON_MLA's decode as triton_mla.py calls decode_attention_fwd: the query of latent rank plus rope
    dim against the latent cache with a head dim of 1, its first kv_lora_rank channels the values."""
    import torch

    from vllm.v1.attention.ops import triton_decode_attention as decode

    dtype = getattr(torch, dtype_name)
    heads, rank, width, batch = shape.heads, shape.kv_lora_rank, shape.kv_lora_rank + shape.rope_dim, DECODE_BATCH

    def mla_decode():
        cache = torch.empty(2 * batch, MLA_PAGE_SIZE, 1, width, dtype=dtype)
        decode.decode_attention_fwd(
            torch.empty(batch, heads, width, dtype=dtype), cache, cache[..., :rank],
            torch.empty(batch, heads, rank, dtype=dtype), torch.empty(batch, heads, dtype=dtype),
            torch.arange(2 * batch, dtype=torch.int32).view(batch, 2),
            torch.full((batch,), MLA_PAGE_SIZE + 1, dtype=torch.int32),
            torch.empty(batch, heads, MLA_KV_SPLITS, rank + 1, dtype=torch.float32), MLA_KV_SPLITS, 0.1,
            MLA_PAGE_SIZE, k_scale=torch.ones(1), v_scale=torch.ones(1), is_mla=True)

    kernels = ((decode, ("_fwd_kernel_stage1", "_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2")),)
    return [("mla-decode", 1, batch, kernels, mla_decode)]


def _mamba1_calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """A Mamba-1 mixer's Triton ops (mamba_mixer.py): the conv's prefill and decode, and the decode's
    selective_state_update on its 3-D state (one row per channel, no heads), with the dtypes the mixer
    passes: A and the time step bias in fp32, D in the model's dtype."""
    import torch

    dtype = getattr(torch, dtype_name)
    dim, state, batch = shape.channels, shape.state_size, DECODE_BATCH
    ssm = ops["mamba_ssm"]

    def ssm_decode():
        indices = torch.arange(batch, dtype=torch.int32)
        with swapped(ssm, "get_ssm_device_name", lambda: SSM_DEVICE_NAME):
            ssm.selective_state_update(
                torch.empty(batch, dim, state, dtype=dtype), torch.empty(batch, dim, dtype=dtype),
                torch.empty(batch, dim, dtype=dtype), torch.empty(dim, state, dtype=torch.float32),
                torch.empty(batch, state, dtype=dtype), torch.empty(batch, state, dtype=dtype),
                torch.empty(dim, dtype=dtype), torch.empty(dim, dtype=torch.float32),
                z=torch.empty(batch, dim, dtype=dtype), dt_softplus=True, state_batch_indices=indices,
                dst_state_batch_indices=indices, out=torch.empty(batch, dim, dtype=dtype))

    return _conv_calls(dim, shape.conv_width, MAMBA1_PREFILL_LEN, ops["causal_conv1d"], dtype_name) + [
        ("ssm-decode", 1, batch, ((ssm, ("_selective_scan_update_kernel",)),), ssm_decode)]


def _calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """(kind, query_len, num_seqs, kernels, call) for each op the mixer runs."""
    import torch

    dtype = getattr(torch, dtype_name)
    heads, head_dim, state, groups, chunk = shape.heads, shape.head_dim, shape.state_size, shape.groups, shape.chunk_size
    dim, width = shape.conv_dim, shape.conv_width
    seqlen = 2 * chunk  # one sequence of two chunks
    ssm = ops["mamba_ssm"]
    conv_prefill, conv_decode = _conv_calls(dim, width, seqlen, ops["causal_conv1d"], dtype_name)

    def ssd_prefill():
        x = torch.empty(seqlen, heads, head_dim, dtype=dtype)
        ops["ssd_combined"].mamba_chunk_scan_combined_varlen(
            x, torch.empty(seqlen, heads, dtype=dtype), torch.empty(heads, dtype=torch.float32),
            torch.empty(seqlen, groups, state, dtype=dtype), torch.empty(seqlen, groups, state, dtype=dtype), chunk,
            torch.tensor([0, seqlen], dtype=torch.int32), torch.tensor([0, chunk, seqlen], dtype=torch.int32),
            torch.tensor([1], dtype=torch.int32), torch.zeros(2, dtype=torch.int32), torch.empty_like(x),
            D=torch.empty(heads, dtype=torch.float32), z=torch.empty_like(x),
            dt_bias=torch.empty(heads, dtype=torch.float32), dt_softplus=True, state_dtype=dtype)

    def norm():
        rows = torch.empty(seqlen, shape.norm_width, dtype=dtype)
        ops["layernorm_gated"].rms_norm_gated(rows, torch.empty(shape.norm_width, dtype=dtype), bias=None,
                                              z=torch.empty_like(rows), norm_before_gate=False)

    def checkpoint():
        from vllm.model_executor.layers.mamba.checkpoint import MambaPrefillCheckpointMetadata

        fields = {"checkpoint_offsets": torch.tensor([chunk], dtype=torch.int32),
                  "state_indices": torch.tensor([1], dtype=torch.int32)}
        known = getattr(MambaPrefillCheckpointMetadata, "__dataclass_fields__", fields)
        metadata = MambaPrefillCheckpointMetadata(**{k: v for k, v in fields.items() if k in known})
        ops["ssd_checkpoint"].store_prefill_checkpoint(
            metadata, torch.tensor([0], dtype=torch.int32), torch.empty(seqlen, dim, dtype=dtype).t(),
            torch.empty(2, dim, width - 1, dtype=dtype), torch.empty(2, heads, head_dim, state, dtype=dtype),
            torch.empty(2, heads, head_dim, state, dtype=dtype), torch.tensor([0, seqlen], dtype=torch.int32),
            state_len=width - 1)

    def ssm_decode():
        batch = DECODE_BATCH
        with swapped(ssm, "get_ssm_device_name", lambda: SSM_DEVICE_NAME):
            ssm.selective_state_update(
                torch.empty(batch, heads, head_dim, state, dtype=dtype), torch.empty(batch, heads, head_dim, dtype=dtype),
                torch.empty(batch, heads, head_dim, dtype=dtype), torch.empty(heads, head_dim, state, dtype=torch.float32),
                torch.empty(batch, groups, state, dtype=dtype), torch.empty(batch, groups, state, dtype=dtype),
                torch.empty(heads, head_dim, dtype=torch.float32), torch.empty(heads, head_dim, dtype=torch.float32),
                z=torch.empty(batch, heads, head_dim, dtype=dtype), dt_softplus=True,
                out=torch.empty(batch, heads, head_dim, dtype=dtype))

    def replayssm_decode():
        batch, length = DECODE_BATCH, REPLAYSSM_HISTORY
        # A, dt and dt_bias are one value per head (TIE_HDIM, as the mixer passes them)
        ops[REPLAYSSM].selective_state_update_replayssm_output_only(
            torch.empty(batch, heads, head_dim, state, dtype=dtype), torch.empty(batch, heads, head_dim, dtype=dtype),
            torch.empty(batch, heads, 1, dtype=dtype).expand(batch, heads, head_dim),
            torch.empty(heads, 1, 1, dtype=torch.float32).expand(heads, head_dim, state),
            torch.empty(batch, groups, state, dtype=dtype), torch.empty(batch, groups, state, dtype=dtype),
            torch.empty(heads, head_dim, dtype=torch.float32),
            torch.empty(heads, 1, dtype=torch.float32).expand(heads, head_dim), dt_softplus=True,
            x_cache=torch.empty(batch, heads, length, head_dim, dtype=dtype),
            dt_cache=torch.empty(batch, heads, length, dtype=torch.float32),
            B_cache=torch.empty(batch, groups, length, state, dtype=dtype),
            bc_pre=torch.empty(batch, groups, length, dtype=torch.float32),
            write_pos=torch.zeros(batch, dtype=torch.int32), is_flush=torch.zeros(batch, dtype=torch.bool),
            max_cache_len=length, state_batch_indices=torch.arange(batch, dtype=torch.int32),
            out=torch.empty(batch, heads, head_dim, dtype=dtype))

    ssd = ((ops["ssd_chunk_state"], ("_chunk_cumsum_fwd_kernel", "_chunk_state_fwd_kernel")),
           (ops["ssd_state_passing"], ("_state_passing_fwd_kernel",)), (ops["ssd_bmm"], ("_bmm_chunk_fwd_kernel",)),
           (ops["ssd_chunk_scan"], ("_chunk_scan_fwd_kernel",)))
    calls = [conv_prefill, ("ssd-prefill", seqlen, 1, ssd, ssd_prefill)]
    if shape.norm_width:
        calls.append(("norm", seqlen, 1, ((ops["layernorm_gated"], ("_layer_norm_fwd_1pass_kernel",)),), norm))
    calls += [("checkpoint", seqlen, 1, ((ops["ssd_checkpoint"], ("_store_prefill_checkpoint_kernel",)),), checkpoint),
              conv_decode, ("ssm-decode", 1, DECODE_BATCH, ((ssm, ("_selective_scan_update_kernel",)),), ssm_decode)]
    if REPLAYSSM in ops:
        replay = ((ops[REPLAYSSM], ("_replayssm_output_only_precompute_kernel", "_replayssm_output_only_kernel")),)
        calls.append(("replayssm-decode", 1, DECODE_BATCH, replay, replayssm_decode))
    return calls


class MixerError(RuntimeError):
    """A mixer op this vLLM does not take the way the check calls it (exit 2)."""


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


def _record(shape, calls, what: str, dtype: str) -> list[Launch]:
    return record_calls(shape, calls(shape, _ops(), dtype), lambda kind, error: MixerError(
        f"vLLM's {kind} op of the {what} failed on {shape.label} ({error}); the check does not know this "
        "release's mixer ops"))


def record_mamba2(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    """Every launch one Mamba-2 mixer's ops make (autotuned kernels: one per configuration)."""
    return _record(shape, _calls, "Mamba-2 mixer", dtype)


def record_mamba1(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return _record(shape, _mamba1_calls, "Mamba-1 mixer", dtype)


def record_short_conv(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return _record(shape, _short_conv_calls, "short convolution", dtype)


def record_mla(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return _record(shape, _mla_calls, "multi-head latent attention", dtype)


# The probes' way in (bench/ssm_kernels_probe.py, the image tier), for a shape of these kinds; the fit check
# itself records each shape through its family (families/).
_RECORDERS = {MAMBA2: record_mamba2, MAMBA1: record_mamba1, SHORT_CONV: record_short_conv, MLA: record_mla}


def record_mixer(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    """Every launch one Mamba-2 or Mamba-1 mixer's, short convolution's or latent attention's ops make."""
    return _RECORDERS[shape.mixer](shape, dtype)


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
