"""Kimi Linear's KDA (mixer_shapes.KdaShape; kda_launches.record_kda records FLA's and vLLM's KDA kernels as
a device below compute capability 9.0 chooses them). Kimi Linear's attention is latent (mla.py), so vLLM
serves it from 8.0."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import Family


def record(shape: m.KdaShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import kda_launches

    return kda_launches.record_kda(shape, cc, limit, dtype)


def unrecorded_on(shape: m.KdaShape, cc: int) -> str | None:
    if cc < m.GDN_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} FLA and vLLM choose the KDA kernels' "
            "lists and launches otherwise (Hopper's warps, TMA, programmatic dependent launch) than the fit "
            f"check records (below {m.GDN_RECORDED_BELOW_CC // 10}.0)")


FAMILY = Family(
    name="kda", role="mixer", description="KDA", proves="Kimi Linear's KDA on compute capability 8.x",
    reads_phrase=f"the KDA of {', '.join(m.KDA_TYPES)}", shape_type=m.KdaShape,
    model_types=m.KDA_TYPES, mixer_types=m.KDA_TYPES,
    read=lambda text, model_type, model, where, tp, dtype: m.kda_shape(text, model, where, tp),
    record=record, host_dependent=True,
    describe=lambda shape: (f"KDA: head dim {shape.head_dim}, conv {shape.conv_width}"
                            f"{', gate lower bound' if shape.safe_gate else ''}"),
    unrecorded_on=unrecorded_on, builtin=m.BUILTIN_KDA, order=100)
