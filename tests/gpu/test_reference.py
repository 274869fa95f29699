"""The float32 paged-attention reference agrees with torch's own attention on dense tensors
(small shapes; windows short enough to cut into every sequence)."""
from __future__ import annotations

import pytest

from tooling.attention_cases import Case, Layer

DEVICE = "cuda"
SMALL = ((1, 1), (3, 77), (16, 16), (40, 90), (1, 70))


@pytest.mark.parametrize("window", [None, 8, 32])
def test_reference_matches_dense_sdpa(window):
    import torch
    import torch.nn.functional as F

    from tooling.paged_attention import gather_sequence, make_batch, reference_attention

    layer = Layer("small", 8, 2, 64, window)
    batch = make_batch(Case(layer, "prefill", SMALL, seed=11), device=DEVICE)
    paged = reference_attention(batch, layer, heads_per_step=3)
    group = layer.num_query_heads // layer.num_kv_heads
    for seq, query_len in enumerate(batch.query_lens):
        start, seq_len = int(batch.cu_seqlens_q[seq]), int(batch.seq_lens[seq])
        keys, values = (gather_sequence(cache, batch.block_table[seq], seq_len).float()
                        .repeat_interleave(group, dim=1).transpose(0, 1)
                        for cache in (batch.key_cache, batch.value_cache))
        q = batch.q[start:start + query_len].float().transpose(0, 1)
        mask = torch.ones(query_len, seq_len, dtype=torch.bool, device=q.device).tril(seq_len - query_len)
        if window:
            mask = mask.triu(seq_len - query_len - window + 1)
        dense = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=batch.scale)
        torch.testing.assert_close(paged[start:start + query_len], dense.transpose(0, 1), atol=1e-5, rtol=1e-5)
