"""The Mamba-2 mixers of Nemotron-H, Granite 4.0-H, Falcon-H1, Bamba, Zamba 2 and Mamba-2 models (MixerShape).

What such a mixer launches on a Turing or Ampere GPU (vLLM 0.33.0, model_executor/layers/mamba/
mamba_mixer2.py), each kernel's shared memory set by these fields alone (launches.record_mamba2
records them):
  prefill  causal_conv1d_fn (conv width), mamba_chunk_scan_combined_varlen's five autotuned kernels
           (head dim, state size, chunk size), the gated RMS norm when the mixer has one group and one
           rank (its width), the prefix-caching checkpoint copy (vLLM's default "align" mode)
  decode   causal_conv1d_update (conv width), selective_state_update (head dim, state size)
Head and group counts only set the grid, so one verdict holds for every model with such a mixer.
"""
from __future__ import annotations

from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import DEFAULT_DTYPE, Family, RecordedShape

# The history length the build records ReplaySSM's Mamba-2 decode at (`--use-replayssm`): vLLM's default
# `--replayssm-buffer-len`. Its kernels' tiles grow with the length (measured on sm_75 / sm_86: at most
# 4,096 / 6,656 bytes at 16, 16,384 / 20,480 at 64), so the preflight names another length as not proven.
REPLAYSSM_HISTORY = 16
MIXER_FIELDS = ("mixer", "head_dim", "state_size", "chunk_size", "conv_width", "norm_width")


# config.json field names per model type: heads, head dim, state size, groups, chunk size, conv width
# (vLLM's model classes read these: nemotron_h.py, granitemoehybrid.py, falcon_h1.py, bamba.py, zamba2.py).
_FIELDS = {
    "nemotron_h": ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "chunk_size", "conv_kernel"),
    "granitemoehybrid": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size",
                         "mamba_d_conv"),
    "bamba": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size", "mamba_d_conv"),
    "falcon_h1": ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_chunk_size",
                  "mamba_d_conv"),
    "zamba2": ("n_mamba_heads", "mamba_headdim", "mamba_d_state", "mamba_ngroups", "chunk_size", "mamba_d_conv"),
    "mamba2": ("num_heads", "head_dim", "state_size", "n_groups", "chunk_size", "conv_kernel"),  # mamba2.py
}
MAMBA2_HYBRID_TYPES = tuple(_FIELDS)


@dataclass(frozen=True)
class MixerShape(RecordedShape):
    """One hybrid model's Mamba-2 mixer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MIXER_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    heads: int  # one rank's
    groups: int  # one rank's
    head_dim: int
    state_size: int
    chunk_size: int
    conv_width: int
    norm_width: int  # the gated RMS norm's row (Triton kernel), 0 where vLLM normalises in PyTorch
    tensor_parallel: int = 1
    mixer: str = "mamba2"
    layer: str = "mamba"

    @property
    def conv_dim(self) -> int:
        return self.heads * self.head_dim + 2 * self.groups * self.state_size


def mamba2_shape(text: Section, model_type: str, model: str, where: str, tensor_parallel: int = 1,
                 model_dtype: str = DEFAULT_DTYPE) -> MixerShape:
    """The Mamba-2 mixer of a config's text part (ConfigProblem naming the field for a bad value)."""
    heads_key, head_key, state_key, groups_key, chunk_key, conv_key = _FIELDS[model_type]
    heads = text.positive_int(heads_key)
    head_dim = text.positive_int(head_key)
    state = text.positive_int(state_key)
    groups = text.positive_int(groups_key, 1)
    chunk = text.positive_int(chunk_key, 256)
    conv = text.positive_int(conv_key, 4)
    if heads % groups:
        raise ConfigProblem(f"{where}: {heads} Mamba heads ('{heads_key}') are not a multiple of {groups} groups "
                          f"('{groups_key}')")
    if heads % tensor_parallel:
        raise ConfigProblem(f"{where}: {heads} Mamba heads ('{heads_key}') do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    # vLLM replicates groups so that each rank holds whole groups (mamba_utils.extra_groups_for_head_shards)
    rank_groups = groups // tensor_parallel if groups % tensor_parallel == 0 else 1
    intermediate = heads * head_dim
    # Mixer2RMSNormGated.forward_cuda runs the Triton norm for one group on one rank; Falcon-H1 may turn
    # the norm off (mamba_rms_norm: false)
    normed = text.value("mamba_rms_norm", True) is not False
    norm_width = intermediate if normed and groups == 1 and tensor_parallel == 1 else 0
    return MixerShape(model, heads // tensor_parallel, rank_groups, head_dim, state, chunk, conv, norm_width,
                      tensor_parallel)


def _hybrid(model_type: str, attention: tuple, mixer: tuple, **extra) -> dict:
    """A hybrid config: (query heads, KV heads, head dim) of its attention layers and its mixer's
    (heads, head dim, state size, groups, chunk size, conv width) under the type's field names."""
    heads, kv_heads, head_dim = attention
    config = {"model_type": model_type, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
              "head_dim": head_dim}
    config.update(zip(_FIELDS[model_type], mixer))
    config.update(extra)
    return config


# The matrix's hybrids, shaped like the families' published checkpoints (attention heads, mixer
# fields); a unit test reads each back through the same readers the preflight uses.
BUILTIN_HYBRIDS = {
    "nemotron-h-8b": _hybrid("nemotron_h", (32, 8, 128), (128, 64, 128, 8, 128, 4), hybrid_override_pattern="M-M*-"),
    "nemotron-nano-9b-v2": _hybrid("nemotron_h", (40, 8, 128), (128, 80, 128, 8, 128, 4),
                                   hybrid_override_pattern="M-M*-"),
    "granite-4.0-h-tiny": _hybrid("granitemoehybrid", (12, 4, 128), (48, 64, 128, 1, 256, 4),
                                  layer_types=["mamba", "attention"]),
    "falcon-h1-1.5b": _hybrid("falcon_h1", (8, 2, 128), (24, 64, 256, 1, 256, 4)),
    "zamba2-1.2b": _hybrid("zamba2", (32, 32, 128), (64, 64, 64, 1, 256, 4)),
}


# The matrix's pure Mamba-2 model (no attention layers), shaped like Mamba-Codestral 7B.
BUILTIN_STATE_SPACE_MAMBA2 = {
    "mamba-codestral-7b": {"model_type": "mamba2", "hidden_size": 4096, "num_heads": 128, "head_dim": 64,
                           "state_size": 128, "n_groups": 8, "chunk_size": 256, "conv_kernel": 4},
}



def record(shape: MixerShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.mamba2.launches import record_mamba2

    return record_mamba2(shape, dtype)


def replayssm_unproven(model_type: str, buffer_len: object) -> str | None:
    """ReplaySSM's Mamba-2 decode at a history length the build did not record (REPLAYSSM_HISTORY)."""
    if buffer_len is not None and str(buffer_len).strip() != str(REPLAYSSM_HISTORY):
        return (f"ReplaySSM's Mamba-2 decode at --replayssm-buffer-len {buffer_len}: the build proves it at "
                f"{REPLAYSSM_HISTORY} (the default), and its tiles grow with the length")
    return None


def _describe(shape: MixerShape) -> str:
    return (f"Mamba-2 mixer: head dim {shape.head_dim}, state {shape.state_size}, chunk {shape.chunk_size}, "
            f"conv {shape.conv_width}, norm {shape.norm_width or 'in PyTorch'}")


FAMILY = Family(
    name="mamba2", role="mixer", description="Mamba-2 mixer",
    proves="the Mamba-2 mixers of Nemotron-H, Granite 4.0-H, Falcon-H1, Zamba 2 and Mamba-2 models",
    reads_phrase=f"the Mamba-2 mixers of {', '.join(MAMBA2_HYBRID_TYPES)}", shape_type=MixerShape,
    model_types=MAMBA2_HYBRID_TYPES, mixer_types=("mamba2",), attention_free_types=("mamba2",),
    read=lambda text, model_type, model, where, tp, dtype: mamba2_shape(text, model_type, model, where, tp),
    record=record, describe=_describe, replayssm_unproven=replayssm_unproven,
    builtin={**BUILTIN_HYBRIDS, **BUILTIN_STATE_SPACE_MAMBA2},
    order=50)
