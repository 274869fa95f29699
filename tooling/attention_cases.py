"""The Gemma 4 attention batches the GPU tier runs through vLLM's unified_attention
(standard library only, so tests can be parametrized by them on hosts without torch)."""
from __future__ import annotations

import dataclasses
import itertools

from patches.fitcheck.attention import seq_threshold_3d

BLOCK_SIZE = 16
# (query_len, seq_len) per sequence: query lengths from 1 to 2,048 in one batch, with
# and without cached context, sequences up to 8,192 tokens.
PREFILL_BATCH = ((1, 1), (1, 8192), (3, 77), (16, 16), (100, 1100), (513, 513),
                 (1000, 5000), (2048, 2048), (2048, 8192))
# One new token per sequence; 8 sequences stay within the split-K threshold
# (128 // KV heads) of every layer below, so the launcher takes the 3D path.
DECODE_BATCH = tuple((1, n) for n in (1, 17, 512, 1025, 2049, 4096, 7777, 8192))
PHASES = (("prefill", PREFILL_BATCH), ("decode", DECODE_BATCH))
# vLLM 0.33.0's Triton backend (vllm/v1/attention/backends/triton_attn.py)
NUM_PAR_SOFTMAX_SEGMENTS = 16
# The activations' dtypes a case runs in (bench/clamp_gpu --dtype): fp16, what Turing runs every
# checkpoint in, and bf16, what an Ampere GPU runs a bf16 checkpoint in.
DTYPES = ("float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Layer:
    """One Gemma 4 attention layer kind (heads as in the unsharded model)."""

    name: str
    num_query_heads: int
    num_kv_heads: int
    head_size: int
    sliding_window: int | None  # tokens; None = global attention

    @property
    def window_size(self) -> tuple[int, int]:
        """vLLM's (left, right) window argument for a causal layer."""
        return (self.sliding_window - 1, 0) if self.sliding_window else (-1, -1)

    @property
    def seq_threshold_3d(self) -> int:
        """Batches of up to this many sequences take the split-K (3D) kernel in vLLM's backend."""
        return seq_threshold_3d(self.num_kv_heads)


# Gemma 4 31B global layers; 31B / 12B sliding layers (window 1024); E4B sliding (window 512).
LAYERS = (
    Layer("global-h512", 32, 4, 512, None),
    Layer("sliding-h256-w1024", 32, 16, 256, 1024),
    Layer("sliding-h256-w512", 8, 2, 256, 512),
)


@dataclasses.dataclass(frozen=True)
class Case:
    layer: Layer
    phase: str  # "prefill" (2D kernel) or "decode" (3D split-K kernel)
    batch: tuple[tuple[int, int], ...]
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.layer.name}-{self.phase}"


CASES = tuple(
    Case(layer, phase, batch, seed=index)
    for index, (layer, (phase, batch)) in enumerate(itertools.product(LAYERS, PHASES))
)
CASE_NAMES = tuple(case.name for case in CASES)

# Attention-only families' layers (patches/fitcheck/families/dense.py FAMILY_LAYERS), where vLLM's own launch
# fits Turing: bench/clamp_gpu --cases ranks them (is vLLM's launch the fastest that fits?; its
# default stays the Gemma 4 cases, to keep a run within one device call); the GPU tier's numerics
# run them all (ALL_CASE_NAMES), ranked launches included.
FAMILY_LAYERS = (
    Layer("family-h128-r4", 32, 8, 128, None),  # Llama 3.1 8B, Mistral 7B v0.3, Qwen3 8B
    Layer("family-h64-r4", 32, 8, 64, None),  # Llama 3.2 1B
    Layer("family-h256-r2", 8, 4, 256, None),  # Gemma 3 4B / 12B global layers
)
FAMILY_CASES = tuple(
    Case(layer, phase, batch, seed=len(CASES) + index)
    for index, (layer, (phase, batch)) in enumerate(itertools.product(FAMILY_LAYERS, PHASES))
)
FAMILY_CASE_NAMES = tuple(case.name for case in FAMILY_CASES)
ALL_CASE_NAMES = CASE_NAMES + FAMILY_CASE_NAMES  # what the GPU tier's numerics run


def case_named(name: str) -> Case:
    for case in CASES + FAMILY_CASES:
        if case.name == name:
            return case
    raise KeyError(f"no case {name!r}; known: {', '.join(ALL_CASE_NAMES)}")
