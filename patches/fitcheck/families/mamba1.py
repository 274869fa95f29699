"""The Mamba-1 mixers of Jamba, Mamba and Falcon Mamba (mixer_shapes.Mamba1Shape; mixer_launches.record_mamba1
records vLLM's MambaMixer ops: its prefill scan is CUDA, not Triton)."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import Family


def record(shape: m.Mamba1Shape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import mixer_launches

    return mixer_launches.record_mamba1(shape, dtype)


FAMILY = Family(
    name="mamba1", role="mixer", description="Mamba-1 mixer",
    proves="the Mamba-1 mixers of Jamba, Mamba and Falcon Mamba",
    reads_phrase=f"the Mamba-1 mixers of {', '.join(m.MAMBA1_TYPES)}", shape_type=m.Mamba1Shape,
    model_types=m.MAMBA1_TYPES, mixer_types=("mamba", "falcon_mamba"), attention_free_types=("mamba", "falcon_mamba"),
    read=lambda text, model_type, model, where, tp, dtype: m.mamba1_shape(text, model_type, model, where, tp),
    record=record, describe=lambda shape: f"Mamba-1 mixer: state {shape.state_size}, conv {shape.conv_width}",
    builtin={name: config for name, config in m.BUILTIN_STATE_SPACE.items() if config["model_type"] in m.MAMBA1_TYPES},
    order=60)
