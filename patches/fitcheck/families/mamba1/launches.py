"""The Triton launches of one Mamba-1 mixer (Mamba1Shape), made by vLLM's real ops on CPU tensors
(op_recording.py): MambaMixer (mamba_mixer.py) runs the causal conv ops and selective_state_update on a
state without heads; its prefill scan is CUDA (selective_scan_fn), not Triton."""
from __future__ import annotations

from patches.fitcheck.family import RecordedShape
from patches.fitcheck.op_recording import (DECODE_BATCH, DTYPE_NAME, MAMBA1_PREFILL_LEN, SSM_DEVICE_NAME, conv_calls,
                                           record_mamba_ops)
from patches.fitcheck.recorder import Launch
from patches.fitcheck.swap_and_write import swapped


def calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
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

    return conv_calls(dim, shape.conv_width, MAMBA1_PREFILL_LEN, ops["causal_conv1d"], dtype_name) + [
        ("ssm-decode", 1, batch, ((ssm, ("_selective_scan_update_kernel",)),), ssm_decode)]


def record_mamba1(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return record_mamba_ops(shape, calls, "Mamba-1 mixer", dtype)
