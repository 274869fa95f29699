"""The Triton launches of one multi-head latent attention (MlaShape): TRITON_MLA's decode, made by vLLM's real
ops on CPU tensors (op_recording.py)."""
from __future__ import annotations

from patches.fitcheck.family import RecordedShape
from patches.fitcheck.op_recording import DECODE_BATCH, DTYPE_NAME, record_mamba_ops
from patches.fitcheck.recorder import Launch


# TRITON_MLA's decode (triton_mla.py forward_mqa): a page of the latent cache, the splits of the KV
# (its _compute_num_kv_splits; constexprs that set no tile) and a batch of decoding sequences
MLA_PAGE_SIZE = 16
MLA_KV_SPLITS = 4


def calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
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


def record_mla(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return record_mamba_ops(shape, calls, "multi-head latent attention", dtype)
