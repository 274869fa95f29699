"""Which batches the fit check feeds the attention launcher for each layer shape (pure)."""
from __future__ import annotations

from dataclasses import dataclass

from patches.shapes import LayerShape

MAX_3D_QUERY_LEN_UPSTREAM = 8  # vLLM 0.33: longest query the split-K (3D) path runs
SPEC_QUERY_LENS = tuple(range(2, MAX_3D_QUERY_LEN_UPSTREAM + 1))  # 1 + speculative tokens (MTP / EAGLE)
PREFILL_QUERY_LEN = 32  # above MAX_3D_QUERY_LEN, so the launcher takes the 2D path
CONTEXT_LEN = 48  # tokens already in the KV cache; any value > 0 exercises the same code


@dataclass(frozen=True)
class Case:
    """One call of unified_attention(): a batch shape on one layer kind."""

    shape: LayerShape
    kind: str  # prefill | decode | decode-batch | spec | mm-prefix
    query_len: int
    num_seqs: int = 1
    mm_prefix: bool = False


def seq_threshold_3d(shape: LayerShape, min_grid_2d: int = 128) -> int:
    """vLLM's Triton backend: batches up to this many sequences take the split-K (3D) path."""
    return max(1, min_grid_2d // shape.num_kv_heads)


def build_matrix(shapes: list[LayerShape], mm_prefix: bool) -> list[Case]:
    """Every call the check makes: prefill, decode (single and over the 3D threshold),
    speculative verify lengths and, where the release supports it, a multimodal prefix."""
    cases = []
    for shape in shapes:
        cases.append(Case(shape, "prefill", PREFILL_QUERY_LEN))
        cases.append(Case(shape, "decode", 1))
        cases.append(Case(shape, "decode-batch", 1, num_seqs=seq_threshold_3d(shape) + 1))
        cases.extend(Case(shape, "spec", n) for n in SPEC_QUERY_LENS)
        if mm_prefix:
            cases.append(Case(shape, "mm-prefix", PREFILL_QUERY_LEN, mm_prefix=True))
    return cases
