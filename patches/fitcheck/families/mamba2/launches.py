"""The Triton launches of one Mamba-2 mixer (MixerShape), made by vLLM's real mixer ops on CPU tensors
(op_recording.py).

The ops are the ones vLLM 0.33.0's MambaMixer2 calls on CUDA (model_executor/layers/mamba/
mamba_mixer2.py): a prefill of two chunks (causal_conv1d_fn, mamba_chunk_scan_combined_varlen,
rms_norm_gated where the mixer uses it, store_prefill_checkpoint) and a decode step of four sequences
(causal_conv1d_update, selective_state_update on its Triton backend), and the same step under ReplaySSM
(`--use-replayssm`, opt-in: selective_state_update_replayssm_output_only's precompute and update
kernels over a history of REPLAYSSM_HISTORY inputs; FlashInfer's variant with `--mamba-backend
flashinfer` is CUDA, outside the check).
"""
from __future__ import annotations

from patches.fitcheck.families.mamba2 import REPLAYSSM_HISTORY
from patches.fitcheck.family import RecordedShape
from patches.fitcheck.op_recording import (DECODE_BATCH, DTYPE_NAME, REPLAYSSM, SSM_DEVICE_NAME, conv_calls,
                                           record_mamba_ops)
from patches.fitcheck.recorder import Launch
from patches.fitcheck.swap_and_write import swapped


def calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """(kind, query_len, num_seqs, kernels, call) for each op the mixer runs."""
    import torch

    dtype = getattr(torch, dtype_name)
    heads, head_dim, state, groups, chunk = shape.heads, shape.head_dim, shape.state_size, shape.groups, shape.chunk_size
    dim, width = shape.conv_dim, shape.conv_width
    seqlen = 2 * chunk  # one sequence of two chunks
    ssm = ops["mamba_ssm"]
    conv_prefill, conv_decode = conv_calls(dim, width, seqlen, ops["causal_conv1d"], dtype_name)

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


def record_mamba2(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    """Every launch one Mamba-2 mixer's ops make (autotuned kernels: one per configuration)."""
    return record_mamba_ops(shape, calls, "Mamba-2 mixer", dtype)
