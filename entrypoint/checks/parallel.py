"""Parallel: a tensor/pipeline-parallel start has what it needs, before the load.

- enough GPUs visible for TENSOR_PARALLEL_SIZE x PIPELINE_PARALLEL_SIZE (vLLM takes the first ones);
- those GPUs share one compute capability (vLLM builds one kernel set for all ranks);
- the tensor-parallel size splits every attention layer type's heads the way vLLM requires;
- a short NCCL all-reduce across them (P2P broken under a VM hangs the start, vLLM issue 51513).
/dev/shm is judged by the shm check, which counts the workers.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Callable

from contract.model_config import ConfigProblem, ModelConfig
from contract.verdict import Result, failed, passed

from ..device import Device
from door import files

NAME = "parallel"
PROBE_MIB = 8
PROBE_TIMEOUT_S = 60.0
P2P_FIX = "set NCCL_P2P_DISABLE=1 in the env file (P2P is broken on this host, as under many VMs) and start again"


@dataclasses.dataclass(frozen=True)
class LayerHeads:
    layer: str  # "sliding", "global", ...
    heads: int
    kv_heads: int


def tp_split_error(tp: int, layer: LayerHeads) -> str | None:
    """vLLM's rule (QKVParallelLinear): query heads divide by tp; KV heads divide by tp when there
    are at least tp of them, else tp must be a multiple of them (each KV head is replicated)."""
    if layer.heads % tp:
        return f"its {layer.heads} attention heads do not divide by {tp}"
    if layer.kv_heads >= tp and layer.kv_heads % tp:
        return f"its {layer.kv_heads} KV heads do not divide by {tp}"
    if layer.kv_heads < tp and tp % layer.kv_heads:
        return f"{tp} is not a multiple of its {layer.kv_heads} KV heads (vLLM replicates KV heads only whole)"
    return None


def valid_sizes(layers: list[LayerHeads], limit: int) -> list[int]:
    return [tp for tp in range(1, limit + 1) if all(tp_split_error(tp, layer) is None for layer in layers)]


def decide(tp: int, pp: int, gpus: list[Device], layers: list[LayerHeads] | None) -> Result | None:
    """The verdict on everything but the NCCL probe; None when the probe should decide."""
    if tp * pp == 1:
        return passed(NAME, "TENSOR_PARALLEL_SIZE=1, PIPELINE_PARALLEL_SIZE=1: one GPU per server, nothing to split")
    need = tp * pp
    sizes = f"TENSOR_PARALLEL_SIZE={tp} x PIPELINE_PARALLEL_SIZE={pp}"
    if len(gpus) < need:
        return failed(NAME, f"{sizes} needs {need} GPUs; {len(gpus)} visible",
                      "pass every GPU's device node (build.py units --gpus all), check CUDA_VISIBLE_DEVICES, "
                      f"or lower TENSOR_PARALLEL_SIZE to {max(len(gpus), 1)}")
    used = gpus[:need]
    kinds = sorted({gpu.cc for gpu in used})
    if len(kinds) > 1:
        listing = ", ".join(f"GPU {gpu.ordinal} {gpu.name} ({gpu.cc[0]}.{gpu.cc[1]})" for gpu in used)
        return failed(NAME, f"the {need} GPUs mix compute capabilities: {listing}; vLLM runs one kernel set on "
                      "every rank, so the newer cards would run the older one's or fail",
                      "choose GPUs of one generation with CUDA_VISIBLE_DEVICES (or build.py units --gpus)")
    for layer in layers or []:
        why = tp_split_error(tp, layer)
        if why:
            fits = [size for size in valid_sizes(layers, len(gpus)) if size > 1] or [1]
            return failed(NAME, f"TENSOR_PARALLEL_SIZE={tp} cannot split the model's {layer.layer} layers: {why}",
                          "set TENSOR_PARALLEL_SIZE to one of " + ", ".join(map(str, fits))
                          + " (or scale by replicas instead)")
    return None


def nccl_defaults(cc: tuple[int, int], tp: int, env) -> dict[str, str]:
    """Turing defaults the user can override: NCCL's cuMem host buffers fail on T4 with error 217
    (NCCL issue 1838; Ray's T4 CI sets NCCL_CUMEM_HOST_ENABLE=0, ray PR 64109)."""
    if tp > 1 and cc < (8, 0) and "NCCL_CUMEM_HOST_ENABLE" not in env:
        return {"NCCL_CUMEM_HOST_ENABLE": "0"}
    return {}


def plan_parallel(tp: int, pp: int, devices: list[Device], config: ModelConfig | None, env):
    """The check as preflight runs it, over the model's config.json as the model check read it: a
    verdict now, or a callable that starts the NCCL probe."""
    from patches.fitcheck.families import attention_layers

    layers = None
    if config is not None:
        try:
            layers = layer_heads(attention_layers(config, "model", "config.json"))
        except ConfigProblem:
            layers = None  # the model check reports a bad config.json
    verdict = decide(tp, pp, devices, layers)
    if verdict is not None:
        return verdict
    return lambda: start_probe(tp * pp, dict(env))


def layer_heads(shapes) -> list[LayerHeads]:
    """From the fit check's layer shapes (patches' families.attention_layers): one entry per layer type."""
    return [LayerHeads(shape.layer, shape.num_query_heads, shape.num_kv_heads) for shape in shapes]


def probe_verdict(world: int, outcome: dict | None, elapsed_s: float, timeout_s: float) -> Result:
    """The NCCL probe's run -> verdict. `outcome` is the probe's JSON, None when it hung or died."""
    if outcome is None:
        return failed(NAME, f"NCCL all-reduce across {world} GPUs did not finish in {timeout_s:.0f} s (a hang)", P2P_FIX)
    if not outcome.get("ok"):
        return failed(NAME, f"NCCL all-reduce across {world} GPUs failed: {outcome.get('error', 'no reason given')}",
                      P2P_FIX)
    return passed(NAME, f"NCCL all-reduce of {outcome['mib']} MiB across {world} GPUs gave the right sum "
                  f"in {elapsed_s:.1f} s")


def probe_argv(world: int, mib: int = PROBE_MIB) -> list[str]:
    return [sys.executable, "-m", "entrypoint.nccl_probe", "--world", str(world), "--mib", str(mib)]


def run_probe(world: int, env: dict, timeout_s: float = PROBE_TIMEOUT_S, argv: list[str] | None = None) -> Result:
    return start_probe(world, env, timeout_s, argv)()


def start_probe(world: int, env: dict, timeout_s: float = PROBE_TIMEOUT_S,
                argv: list[str] | None = None) -> Callable[[], Result]:
    """Effect: starts the probe in its own process group; the returned callable waits for it and
    kills the whole group when it outlasts `timeout_s`."""
    started = time.perf_counter()
    child = subprocess.Popen(argv or probe_argv(world), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
    return lambda: _collect(child, world, started, timeout_s)


def _collect(child: subprocess.Popen, world: int, started: float, timeout_s: float) -> Result:
    try:
        out, err = child.communicate(timeout=max(timeout_s - (time.perf_counter() - started), 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return probe_verdict(world, None, time.perf_counter() - started, timeout_s)
    elapsed = time.perf_counter() - started
    try:
        outcome = files.own_json(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (err.strip().splitlines() or ["no output"])[-1]
        outcome = {"ok": False, "error": f"exit {child.returncode}: {tail}"}
    return probe_verdict(world, outcome, elapsed, timeout_s)
