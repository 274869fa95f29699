"""The Mamba-1 mixers of Jamba, Mamba and Falcon Mamba (Mamba1Shape).

A Mamba-1 mixer (mamba_mixer.py) runs causal_conv1d_fn then the CUDA selective_scan_fn (vllm._C, not
Triton) in prefill, causal_conv1d_update and selective_state_update in decode (launches.record_mamba1);
its kernels are sized by the state size and the conv width, its channel count (intermediate size over
the ranks) sets the grid.
"""
from __future__ import annotations

from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import Family, RecordedShape

MAMBA1_FIELDS = ("mixer", "state_size", "conv_width")


# Mamba-1 config fields: the intermediate size (Jamba: its expansion of hidden_size), state size, conv
# width, as vLLM's jamba.py and mamba.py (Mamba and Falcon Mamba) pass them to MambaMixer, and
# transformers' defaults where a config leaves one out (JambaConfig, MambaConfig, FalconMambaConfig).
_MAMBA1_FIELDS = {
    "jamba": ("mamba_expand", "mamba_d_state", "mamba_d_conv"),
    "mamba": ("intermediate_size", "state_size", "conv_kernel"),
    "falcon_mamba": ("intermediate_size", "state_size", "conv_kernel"),
}
_MAMBA1_DEFAULTS = {"mamba_expand": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "state_size": 16, "conv_kernel": 4}
MAMBA1_TYPES = tuple(_MAMBA1_FIELDS)


@dataclass(frozen=True)
class Mamba1Shape(RecordedShape):
    """One Mamba-1 mixer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MAMBA1_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    channels: int  # one rank's share of the intermediate size: the conv's channels, the state's rows
    state_size: int
    conv_width: int
    tensor_parallel: int = 1
    mixer: str = "mamba1"
    layer: str = "mamba"

    @property
    def head_size(self) -> int:  # the report's column: a Mamba-1 mixer has no heads, its state rows are this
        return self.state_size

    @property
    def conv_dim(self) -> int:
        return self.channels


def mamba1_shape(text: Section, model_type: str, model: str, where: str, tensor_parallel: int = 1) -> Mamba1Shape:
    """The Mamba-1 mixer of a config's text part (ConfigProblem naming the field for a bad value)."""
    size_key, state_key, conv_key = _MAMBA1_FIELDS[model_type]
    size = text.positive_int(size_key, _MAMBA1_DEFAULTS.get(size_key))
    intermediate = size * text.positive_int("hidden_size") if size_key == "mamba_expand" else size
    state = text.positive_int(state_key, _MAMBA1_DEFAULTS[state_key])
    conv = text.positive_int(conv_key, _MAMBA1_DEFAULTS[conv_key])
    if intermediate % tensor_parallel:
        raise ConfigProblem(f"{where}: the Mamba intermediate size {intermediate} does not split over tensor parallel "
                          f"size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides it")
    return Mamba1Shape(model, intermediate // tensor_parallel, state, conv, tensor_parallel)


# The matrix's Mamba-1 models, shaped like the published checkpoints: Jamba's hybrid (attention 32/8 of
# 128, a 2x expansion of 4096), Falcon Mamba 7B and Mamba 2.8B (state-spaces/mamba-2.8b-hf), all with a
# 16-wide state and a width-4 conv.
BUILTIN_MAMBA1 = {
    "jamba-v0.1": {"model_type": "jamba", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "attn_layer_period": 8,
                   "attn_layer_offset": 4},
    "falcon-mamba-7b": {"model_type": "falcon_mamba", "hidden_size": 4096, "intermediate_size": 8192,
                        "state_size": 16, "conv_kernel": 4},
    "mamba-2.8b": {"model_type": "mamba", "hidden_size": 2560, "intermediate_size": 5120, "state_size": 16,
                   "conv_kernel": 4},
}



def record(shape: Mamba1Shape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.mamba1.launches import record_mamba1

    return record_mamba1(shape, dtype)


FAMILY = Family(
    name="mamba1", role="mixer", description="Mamba-1 mixer",
    proves="the Mamba-1 mixers of Jamba, Mamba and Falcon Mamba",
    reads_phrase=f"the Mamba-1 mixers of {', '.join(MAMBA1_TYPES)}", shape_type=Mamba1Shape,
    model_types=MAMBA1_TYPES, mixer_types=("mamba", "falcon_mamba"), attention_free_types=("mamba", "falcon_mamba"),
    read=lambda text, model_type, model, where, tp, dtype: mamba1_shape(text, model_type, model, where, tp),
    record=record, describe=lambda shape: f"Mamba-1 mixer: state {shape.state_size}, conv {shape.conv_width}",
    builtin=BUILTIN_MAMBA1,
    order=60)
