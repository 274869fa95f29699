"""The Mamba-2 mixers of Nemotron-H, Granite 4.0-H, Falcon-H1, Bamba, Zamba 2 and Mamba-2 models
(mixer_shapes.MixerShape; mixer_launches.record_mamba2 records vLLM's MambaMixer2 ops)."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import Family


def record(shape: m.MixerShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import mixer_launches

    return mixer_launches.record_mamba2(shape, dtype)


def _describe(shape: m.MixerShape) -> str:
    return (f"Mamba-2 mixer: head dim {shape.head_dim}, state {shape.state_size}, chunk {shape.chunk_size}, "
            f"conv {shape.conv_width}, norm {shape.norm_width or 'in PyTorch'}")


FAMILY = Family(
    name="mamba2", role="mixer", description="Mamba-2 mixer",
    proves="the Mamba-2 mixers of Nemotron-H, Granite 4.0-H, Falcon-H1, Zamba 2 and Mamba-2 models",
    reads_phrase=f"the Mamba-2 mixers of {', '.join(m.MAMBA2_HYBRID_TYPES)}", shape_type=m.MixerShape,
    model_types=m.MAMBA2_HYBRID_TYPES, mixer_types=("mamba2",), attention_free_types=("mamba2",),
    read=lambda text, model_type, model, where, tp, dtype: m.mamba2_shape(text, model_type, model, where, tp),
    record=record, describe=_describe,
    builtin={**m.BUILTIN_HYBRIDS, **{name: config for name, config in m.BUILTIN_STATE_SPACE.items()
                                     if config["model_type"] in m.MAMBA2_HYBRID_TYPES}},
    order=50)
