"""Memory: RAM + swap available, and the container's cgroup limit, against the weight-staging need.
A 7.8 GB host without swap was OOM-killed staging a 4.6 GB bf16 model cast to fp16: RAM plus swap
peaked near twice the weights plus the process itself.

And the GPU: the server's share of each card it uses (GPU_MEMORY_UTILIZATION x the card's memory)
against what is free there now, as NVML reports it, so that a second server on a shared card is
refused with the numbers before vLLM's imports, instead of by vLLM's own free-memory error after them."""
from __future__ import annotations

import dataclasses
import math
import os

from contract.devices import SHARED_CARD_BUDGET, VLLM_DEFAULT_UTILIZATION
from contract.verdict import Result, failed, passed, warned
from contract.model_config import ModelConfig
from ..nvml import GpuMemory
from .model import gib
from door import files

NAME = "memory"
PROCESS_OVERHEAD = 3 * 2**30  # Python, torch, CUDA context, tokenizer
CGROUP_ROOT = "/sys/fs/cgroup"
MEMINFO = "/proc/meminfo"
NO_LIMIT = 2**60  # cgroup v1 reports "unlimited" as a number near 2**63


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo fields in bytes."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            values[key.strip()] = int(words[0]) * (1024 if words[1:2] == ["kB"] else 1)
    return values


def read_number(path: str) -> int | None:
    """A cgroup file's number; None when absent or "max" (no limit)."""
    raw = (files.read_system(path) or "").strip()
    return int(raw) if raw.isdigit() and int(raw) < NO_LIMIT else None


def cgroup_headroom(cgroup_root: str, swap_free: int) -> int | None:
    """Bytes the cgroup may still take (RAM and swap), v2 then v1; None when unlimited."""
    limit = read_number(os.path.join(cgroup_root, "memory.max"))
    if limit is not None:
        used = read_number(os.path.join(cgroup_root, "memory.current")) or 0
        swap_max = os.path.join(cgroup_root, "memory.swap.max")
        swap_limit = read_number(swap_max)
        swap = 0 if not os.path.exists(swap_max) else swap_free if swap_limit is None else min(swap_limit, swap_free)
        return max(limit - used, 0) + swap
    v1 = os.path.join(cgroup_root, "memory")
    limit = read_number(os.path.join(v1, "memory.memsw.limit_in_bytes")) or read_number(
        os.path.join(v1, "memory.limit_in_bytes"))
    if limit is not None:
        return max(limit - (read_number(os.path.join(v1, "memory.usage_in_bytes")) or 0), 0)
    return None


def staging_need(weight_bytes: int) -> int:
    return 2 * weight_bytes + PROCESS_OVERHEAD


def check_memory(weight_bytes: int | None, meminfo_text: str, cgroup_root: str = CGROUP_ROOT,
                 gpus: tuple[GpuMemory, ...] = (), utilization: float | None = None) -> Result:
    """The host's RAM for staging the weights, then the server's share of each of `gpus`."""
    host = check_host_memory(weight_bytes, meminfo_text, cgroup_root)
    share = judge_gpu_share(gpus, utilization)
    if host.failed or share is None:
        return host
    if share.failed:
        return share
    return dataclasses.replace(host, message=f"{host.message}; {share.message}")


def check_host_memory(weight_bytes: int | None, meminfo_text: str, cgroup_root: str = CGROUP_ROOT) -> Result:
    if weight_bytes is None:
        return warned(NAME, "the model's weights are not present, so the staging need is unknown",
                      "download the model first (see the model check)")
    info = parse_meminfo(meminfo_text)
    host = info.get("MemAvailable", info.get("MemFree", 0)) + info.get("SwapFree", 0)
    headroom = cgroup_headroom(cgroup_root, info.get("SwapFree", 0))
    available = host if headroom is None else min(host, headroom)
    where = "RAM + swap available" if headroom is None or headroom >= host else "the container's memory limit allows"
    need = staging_need(weight_bytes)
    floor = weight_bytes + PROCESS_OVERHEAD
    fix = (f"give the host or container at least {gib(need)} of RAM + swap (add swap, raise the memory limit) "
           "or serve a smaller model")
    if available < floor:
        return failed(NAME, f"{where} {gib(available)}: far below the {gib(need)} that staging "
                            f"{gib(weight_bytes)} of weights needs (the OOM killer ends the load)", fix)
    if available < need:
        return warned(NAME, f"{where} {gib(available)}: tight for staging {gib(weight_bytes)} of weights "
                            f"(up to {gib(need)})", fix)
    return passed(NAME, f"{where} {gib(available)} covers staging {gib(weight_bytes)} of weights ({gib(need)})")


# What one server takes of its GPU beyond weights and KV cache: the CUDA context, activations at
# the profiling run's peak, CUDA graphs (none with ENFORCE_EAGER). A planning figure, used only to
# weigh servers against each other when they share a card.
GPU_RUNTIME_ALLOWANCE = 2**30
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}  # anything else: 2 (fp16/bf16 on these GPUs)


def kv_bytes_per_token(config: ModelConfig, kv_cache_dtype: str | None) -> int:
    """Key and value bytes one token takes over every layer, from the text config's attention
    shape (an upper bound for sliding-window and hybrid models, whose some layers keep less);
    ConfigProblem when the config lacks the shape."""
    text = config.text
    layers = text.positive_int("num_hidden_layers")
    heads = text.positive_int("num_attention_heads")
    kv_heads = text.positive_int("num_key_value_heads", heads)
    head_dim = text.positive_int("head_dim", max(text.positive_int("hidden_size") // heads, 1))
    return 2 * layers * kv_heads * head_dim * KV_DTYPE_BYTES.get(kv_cache_dtype or "", 2)


def gpu_need(weight_bytes: int, kv_per_token: int, tokens: int) -> int:
    """GPU bytes a server wants: its weights, a KV cache of `tokens`, the runtime's allowance."""
    return weight_bytes + kv_per_token * tokens + GPU_RUNTIME_ALLOWANCE


GPU_MEMORY = "gpu memory"  # the fetch's judgment of a named card (the preflight reads the card itself)


def judge_card_memory(weight_bytes: int, card: str, memory: int, cards: int = 1) -> Result:
    """The weights, split over `cards` named cards of `memory` bytes each, against vLLM's default share
    of a card less the runtime's allowance: what is left is the KV cache's."""
    share = VLLM_DEFAULT_UTILIZATION * memory
    per_card = weight_bytes / cards
    left = share - per_card - GPU_RUNTIME_ALLOWANCE
    where = f"{cards} x {card}" if cards > 1 else card
    if left <= 0:
        return failed(GPU_MEMORY, f"{gib(per_card)} of weights per card and the runtime's {gib(GPU_RUNTIME_ALLOWANCE)} exceed "
                            f"{VLLM_DEFAULT_UTILIZATION:g} of the {gib(memory)} of a {card}: no room for a KV cache",
                      "serve a smaller or quantized checkpoint, or more cards (TENSOR_PARALLEL_SIZE), or a larger card")
    return passed(GPU_MEMORY, f"{where}: {gib(per_card)} of weights per card leaves {gib(left)} for the KV cache "
                        f"(of {VLLM_DEFAULT_UTILIZATION:g} x {gib(memory)})")


MAX_LISTED = 4  # processes named in a refusal


def _process_use(processes: tuple[tuple[int, int | None], ...]) -> str:
    listed = [f"pid {pid}: {gib(used) if used is not None else 'size not reported'}" for pid, used in processes[:MAX_LISTED]]
    more = len(processes) - MAX_LISTED
    return ", ".join(listed + ([f"{more} more"] if more > 0 else [])) or "no process NVML can see: another container's"


def judge_gpu_share(gpus: tuple[GpuMemory, ...], utilization: float | None) -> Result | None:
    """Whether the server's share of each card fits in what is free there (vLLM's own condition at its
    start); None when no card was read (no NVML: the driver check says why)."""
    if not gpus:
        return None
    fraction = VLLM_DEFAULT_UTILIZATION if utilization is None else utilization
    setting = f"GPU_MEMORY_UTILIZATION {fraction:g}" + (" (unset: vLLM's default)" if utilization is None else "")
    for gpu in gpus:
        share = fraction * gpu.total
        if share <= gpu.free:
            continue
        fits = math.floor(gpu.free / gpu.total * 100) / 100 if gpu.total else 0.0
        lower = (f"set GPU_MEMORY_UTILIZATION to at most {fits:.2f} in the env file, or stop what else uses GPU "
                 f"{gpu.index}" if fits >= 0.01 else f"GPU {gpu.index} is full: stop what else uses it")
        return failed(NAME, f"GPU {gpu.index}: {setting} asks {gib(share)} of its {gib(gpu.total)}, but only "
                            f"{gib(gpu.free)} is free: {gib(gpu.total - gpu.free)} is in use by other processes "
                            f"({_process_use(gpu.processes)})",
                      f"{lower}; servers sharing a card are rendered together (`python3 build.py units --env-file A "
                      f"--env-file B`) so that their fractions sum to at most {SHARED_CARD_BUDGET}")
    shown = ", ".join(f"GPU {g.index} {gib(fraction * g.total)} of {gib(g.free)} free" for g in gpus)
    return passed(NAME, f"{setting} fits: {shown}")
