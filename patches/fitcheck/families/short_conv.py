"""LFM2's short convolutions (mixer_shapes.ShortConvShape; mixer_launches.record_short_conv records vLLM's
ShortConv ops: causal_conv1d_fn and causal_conv1d_update without an activation)."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import Family


def record(shape: m.ShortConvShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import mixer_launches

    return mixer_launches.record_short_conv(shape, dtype)


FAMILY = Family(
    name="short_conv", role="mixer", description="short convolution", proves="LFM2's short convolutions",
    reads_phrase=f"the short convolutions of {', '.join(m.SHORT_CONV_TYPES)}", shape_type=m.ShortConvShape,
    model_types=m.SHORT_CONV_TYPES,
    read=lambda text, model_type, model, where, tp, dtype: m.short_conv_shape(text, model_type, model, where, tp),
    record=record, describe=lambda shape: f"short convolution: width {shape.conv_width}",
    builtin=m.BUILTIN_SHORT_CONV, order=70)
