"""The gated delta net of Qwen3-Next and Qwen3.5 (mixer_shapes.GdnShape; gdn_launches.record_gdn records
FLA's Triton kernels as vLLM calls them, below compute capability 9.0: from 9.0 vLLM runs its prefill with
FlashInfer or CuteDSL, which the check does not record)."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import Family


def record(shape: m.GdnShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import gdn_launches

    return gdn_launches.record_gdn(shape, dtype)


def unrecorded_on(shape: m.GdnShape, cc: int) -> str | None:
    if cc < m.GDN_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} vLLM runs the gated delta net's "
            "prefill with FlashInfer or CuteDSL, which the fit check does not record (it records FLA's "
            f"Triton kernels, run below {m.GDN_RECORDED_BELOW_CC // 10}.0)")


def _describe(shape: m.GdnShape) -> str:
    return (f"gated delta net: key/value head dims {shape.key_head_dim}/{shape.value_head_dim}, conv "
            f"{shape.conv_width}, {shape.state_dtype} state")


FAMILY = Family(
    name="gated_delta_net", role="mixer", description="gated delta net",
    proves="the gated delta net of Qwen3-Next and Qwen3.5",
    reads_phrase=f"the gated delta net of {', '.join(m.GDN_TYPES)}", shape_type=m.GdnShape,
    model_types=(*m.GDN_TYPES, *m.GDN_TEXT_TYPES),
    read=lambda text, model_type, model, where, tp, dtype: m.gdn_shape(text, model_type, model, where, tp, dtype),
    record=record, host_dependent=True, describe=_describe, unrecorded_on=unrecorded_on, builtin=m.BUILTIN_GDN,
    order=80)
