"""The Triton launches of one LFM2 short convolution (ShortConvShape), made by vLLM's real ops on CPU tensors
(op_recording.py): ShortConv (short_conv.py) runs the causal conv ops alone, without an activation."""
from __future__ import annotations

from patches.fitcheck.family import RecordedShape
from patches.fitcheck.op_recording import DTYPE_NAME, MAMBA1_PREFILL_LEN, conv_calls, record_mamba_ops
from patches.fitcheck.recorder import Launch


def calls(shape: RecordedShape, ops: dict, dtype_name: str) -> list[tuple[str, int, int, tuple, object]]:
    """LFM2's ShortConv ops: the conv's prefill and decode with no activation and, as LiquidAI's checkpoints
    have it (conv_bias false), no bias (with one the needs are the same: 1,024 and 0 bytes at width 3 on
    sm_75 and sm_86, measured with the image's Triton 3.8.0)."""
    return conv_calls(shape.channels, shape.conv_width, MAMBA1_PREFILL_LEN, ops["causal_conv1d"], dtype_name,
                       activation=None, bias=False)


def record_short_conv(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    return record_mamba_ops(shape, calls, "short convolution", dtype)
