"""Gemma 4 attention batches in vLLM's paged layout, and a float32 reference of what
vLLM's `unified_attention` must compute on them (torch only; runs on CPU or GPU).

A batch is rebuilt bit-for-bit from its case and seed in any process (the random
numbers come from a CPU generator), so the kernel can run in one process and the
reference in another.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from tooling.attention_cases import BLOCK_SIZE, Case, Layer

# Queries are scaled so that softmax(scale * q.k) is peaked (score std ~3): the outputs
# are then O(0.1..1) instead of averages near zero, and an absolute tolerance means something.
QUERY_GAIN = 3.0


@dataclasses.dataclass
class Batch:
    """Inputs of one unified_attention() call, laid out as vLLM's Triton backend holds them."""

    q: torch.Tensor  # [tokens, query heads, head] fp16
    key_cache: torch.Tensor  # [blocks, BLOCK_SIZE, KV heads, head] fp16
    value_cache: torch.Tensor
    block_table: torch.Tensor  # [seqs, max blocks per seq] int32
    cu_seqlens_q: torch.Tensor  # [seqs + 1] int32
    seq_lens: torch.Tensor  # [seqs] int32
    query_lens: tuple[int, ...]
    scale: float

    @property
    def max_query_len(self) -> int:
        return max(self.query_lens)

    @property
    def max_seq_len(self) -> int:
        return int(self.seq_lens.max())

    def to(self, device) -> "Batch":
        moved = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, value in moved.items():
            if isinstance(value, torch.Tensor):
                moved[name] = value.to(device)
        return Batch(**moved)


def make_batch(case: Case, device="cpu", dtype=torch.float16) -> Batch:
    """The case's batch: random q/k/v, KV pages scattered over the cache in random order."""
    layer = case.layer
    gen = torch.Generator().manual_seed(case.seed)
    query_lens = tuple(q for q, _ in case.batch)
    seq_lens = [s for _, s in case.batch]
    blocks_per_seq = [math.ceil(s / BLOCK_SIZE) for s in seq_lens]
    num_blocks = sum(blocks_per_seq) + 1  # a spare page nobody uses
    order = torch.randperm(num_blocks, generator=gen)
    block_table = torch.zeros((len(seq_lens), max(blocks_per_seq)), dtype=torch.int32)
    start = 0
    for row, count in enumerate(blocks_per_seq):
        block_table[row, :count] = order[start:start + count]
        start += count
    cache_shape = (num_blocks, BLOCK_SIZE, layer.num_kv_heads, layer.head_size)
    q = torch.randn((sum(query_lens), layer.num_query_heads, layer.head_size), generator=gen) * QUERY_GAIN
    cu = torch.zeros(len(query_lens) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(query_lens), 0)
    batch = Batch(
        q=q.to(dtype),
        key_cache=torch.randn(cache_shape, generator=gen).to(dtype),
        value_cache=torch.randn(cache_shape, generator=gen).to(dtype),
        block_table=block_table,
        cu_seqlens_q=cu,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        query_lens=query_lens,
        scale=layer.head_size ** -0.5,
    )
    return batch.to(device)


def gather_sequence(cache: torch.Tensor, block_row: torch.Tensor, seq_len: int) -> torch.Tensor:
    """[seq_len, KV heads, head] of one sequence, read back through its block-table row."""
    pages = cache[block_row[: math.ceil(seq_len / BLOCK_SIZE)].long()]
    return pages.reshape(-1, *cache.shape[2:])[:seq_len]


def visible_keys(query_len: int, seq_len: int, sliding_window: int | None, device) -> torch.Tensor:
    """[query_len, seq_len] bool: causal (key <= query position), within the window if any."""
    positions = torch.arange(seq_len - query_len, seq_len, device=device)[:, None]
    keys = torch.arange(seq_len, device=device)[None, :]
    mask = keys <= positions
    if sliding_window:
        mask &= positions - keys < sliding_window
    return mask


def reference_attention(batch: Batch, layer: Layer, heads_per_step: int = 8) -> torch.Tensor:
    """Float32 paged attention: [tokens, query heads, head], computed head group by head group."""
    group = layer.num_query_heads // layer.num_kv_heads
    out = torch.empty(batch.q.shape, dtype=torch.float32, device=batch.q.device)
    for seq, query_len in enumerate(batch.query_lens):
        start = int(batch.cu_seqlens_q[seq])
        seq_len = int(batch.seq_lens[seq])
        keys = gather_sequence(batch.key_cache, batch.block_table[seq], seq_len).float()
        values = gather_sequence(batch.value_cache, batch.block_table[seq], seq_len).float()
        mask = visible_keys(query_len, seq_len, layer.sliding_window, batch.q.device)
        for head in range(0, layer.num_query_heads, heads_per_step):
            heads = range(head, min(head + heads_per_step, layer.num_query_heads))
            kv = torch.tensor([h // group for h in heads], device=batch.q.device)
            q = batch.q[start:start + query_len, heads.start:heads.stop].float().transpose(0, 1)
            k = keys[:, kv].transpose(0, 1)
            v = values[:, kv].transpose(0, 1)
            scores = (q @ k.transpose(1, 2)) * batch.scale
            scores = scores.masked_fill(~mask, float("-inf"))
            out[start:start + query_len, heads.start:heads.stop] = (scores.softmax(-1) @ v).transpose(0, 1)
    return out


def error_figures(output: torch.Tensor, reference: torch.Tensor) -> dict:
    """Max and mean absolute error of `output` against `reference`, and the reference's scale."""
    diff = (output.float() - reference.float()).abs()
    return {"max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
            "ref_max_abs": float(reference.abs().max()), "ref_std": float(reference.float().std())}
