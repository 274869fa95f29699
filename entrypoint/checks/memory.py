"""Memory: RAM + swap available, and the container's cgroup limit, against the weight-staging need.
A 7.8 GB host without swap was OOM-killed staging a 4.6 GB bf16 model cast to fp16: RAM plus swap
peaked near twice the weights plus the process itself."""
from __future__ import annotations

import os

from contract.verdict import Result, failed, passed, warned
from contract.model_config import ModelConfig
from .model import gib

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
    try:
        with open(path, encoding="ascii") as handle:
            raw = handle.read().strip()
    except OSError:
        return None
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


def check_memory(weight_bytes: int | None, meminfo_text: str, cgroup_root: str = CGROUP_ROOT) -> Result:
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
