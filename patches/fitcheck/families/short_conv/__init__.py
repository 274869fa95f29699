"""LFM2's short convolutions (ShortConvShape).

LFM2's short convolution (short_conv.py, ShortConv) runs causal_conv1d_fn in prefill and causal_conv1d_update
in decode, both without an activation, over `conv_dim` channels split over the ranks
(launches.record_short_conv); its width (`conv_L_cache`) is all that sizes them.
"""
from __future__ import annotations

from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import Family, RecordedShape

SHORT_CONV_FIELDS = ("mixer", "conv_width")


# LFM2's short convolutions: the field vLLM takes the channels from (lfm2.py: `conv_dim`, which LiquidAI's
# checkpoints carry, the hidden size where one does not; lfm2_moe.py: the hidden size) and the width,
# `conv_L_cache` (transformers' default 3).
_SHORT_CONV_CHANNELS = {"lfm2": "conv_dim", "lfm2_moe": "hidden_size"}
SHORT_CONV_TYPES = tuple(_SHORT_CONV_CHANNELS)
SHORT_CONV_DEFAULT_WIDTH = 3


@dataclass(frozen=True)
class ShortConvShape(RecordedShape):
    """One LFM2 short convolution, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = SHORT_CONV_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    channels: int  # one rank's share of conv_dim: the conv's channels (the grid)
    conv_width: int
    tensor_parallel: int = 1
    mixer: str = "short_conv"
    layer: str = "conv"

    @property
    def head_size(self) -> int:  # the report's column: a convolution has no heads, its width sizes it
        return self.conv_width

    @property
    def conv_dim(self) -> int:
        return self.channels


def short_conv_shape(text: Section, model_type: str, model: str, where: str,
                     tensor_parallel: int = 1) -> ShortConvShape:
    """The short convolution of an LFM2 config's text part (ConfigProblem naming the field for a bad value)."""
    channels_key = _SHORT_CONV_CHANNELS[model_type]
    channels = text.positive_int(channels_key, text.optional_int("hidden_size"))
    width = text.positive_int("conv_L_cache", SHORT_CONV_DEFAULT_WIDTH)
    if channels % tensor_parallel:
        raise ConfigProblem(f"{where}: the short convolution's {channels} channels ('{channels_key}') do not split over "
                          f"tensor parallel size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE "
                          f"that divides {channels}")
    return ShortConvShape(model, channels // tensor_parallel, width, tensor_parallel)


# The matrix's LFM2 models, shaped like LiquidAI's checkpoints: LFM2-1.2B (attention 32/8 of head 64),
# LFM2-700M (24/8: three queries per KV head) and the MoE LFM2-8B-A1B, each with width-3 convolutions
# over the hidden size, six attention layers in sixteen.
def _lfm2(model_type: str, hidden: int, heads: int, **extra) -> dict:
    return {"model_type": model_type, "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": 8,
            "conv_L_cache": SHORT_CONV_DEFAULT_WIDTH, "conv_bias": False,
            "layer_types": ["conv", "conv", "full_attention"] * 5 + ["conv"], **extra}


BUILTIN_SHORT_CONV = {
    "lfm2-1.2b": _lfm2("lfm2", 2048, 32, conv_dim=2048),
    "lfm2-700m": _lfm2("lfm2", 1536, 24, conv_dim=1536),
    "lfm2-8b-a1b": _lfm2("lfm2_moe", 2048, 32, num_experts=32, num_experts_per_tok=4),
}



def record(shape: ShortConvShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.short_conv.launches import record_short_conv

    return record_short_conv(shape, dtype)


FAMILY = Family(
    name="short_conv", role="mixer", description="short convolution", proves="LFM2's short convolutions",
    reads_phrase=f"the short convolutions of {', '.join(SHORT_CONV_TYPES)}", shape_type=ShortConvShape,
    model_types=SHORT_CONV_TYPES,
    read=lambda text, model_type, model, where, tp, dtype: short_conv_shape(text, model_type, model, where, tp),
    record=record, describe=lambda shape: f"short convolution: width {shape.conv_width}",
    builtin=BUILTIN_SHORT_CONV, order=70)
