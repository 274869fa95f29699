"""The Mamba-2 mixers of hybrid models (Nemotron-H, Granite 4.0-H, Falcon-H1, Bamba, Zamba 2): the
shape of one mixer as vLLM's Triton kernels see it, read from config.json (pure standard library).

What a mixer launches on a Turing or Ampere GPU (vLLM 0.33.0, model_executor/layers/mamba/
mamba_mixer2.py), each kernel's shared memory set by these fields alone (patches/fitcheck/
mixer_launches.py records and compiles them):
  prefill  causal_conv1d_fn (conv width), mamba_chunk_scan_combined_varlen's five autotuned kernels
           (head dim, state size, chunk size), the gated RMS norm when the mixer has one group and one
           rank (its width), the prefix-caching checkpoint copy (vLLM's default "align" mode)
  decode   causal_conv1d_update (conv width), selective_state_update (head dim, state size)
Head and group counts only set the grid, so one verdict holds for every model with such a mixer.
"""
from __future__ import annotations

from dataclasses import dataclass

from patches.fitcheck.shapes import ConfigError, UnprovenLayers, _positive_int

MAMBA2 = "mamba2"
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
}
MAMBA2_HYBRID_TYPES = tuple(_FIELDS)
# Hybrid and state-space types whose mixers run kernels the fit check does not record: each stays
# "not proven", named.
UNREAD_MIXERS = {
    "jamba": "Jamba's Mamba-1 mixers (selective_scan_fn prefill)",
    "mamba": "Mamba-1 mixers (selective_scan_fn prefill)",
    "falcon_mamba": "Mamba-1 mixers (selective_scan_fn prefill)",
    "mamba2": "a pure Mamba-2 model without attention layers (not in the checked matrix)",
    "qwen3_next": "Qwen3-Next's gated delta net (fla chunk_gated_delta_rule kernels)",
    "qwen3_5_text": "Qwen3.5's gated delta net (fla chunk_gated_delta_rule kernels)",
    "qwen3_5_moe_text": "Qwen3.5's gated delta net (fla chunk_gated_delta_rule kernels)",
    "plamo2": "PLaMo 2's Mamba mixers",
    "lfm2": "LFM2's short convolutions",
    "minimax_m1": "MiniMax's lightning attention kernels",
}


@dataclass(frozen=True)
class MixerShape:
    """One hybrid model's Mamba-2 mixer, as one rank of `tensor_parallel` ranks runs it."""

    model: str
    heads: int  # one rank's
    groups: int  # one rank's
    head_dim: int
    state_size: int
    chunk_size: int
    conv_width: int
    norm_width: int  # the gated RMS norm's row (Triton kernel), 0 where vLLM normalises in PyTorch
    tensor_parallel: int = 1
    mixer: str = MAMBA2
    layer: str = "mamba"

    @property
    def label(self) -> str:
        return f"{self.model}/{self.layer}"

    @property
    def head_size(self) -> int:  # the report's column
        return self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.heads * self.head_dim + 2 * self.groups * self.state_size


def mixer_fields(shape: MixerShape) -> dict:
    return {name: getattr(shape, name) for name in MIXER_FIELDS}


def mixer_shape(text: dict, model_type: str | None, model: str, where: str, tensor_parallel: int = 1) -> MixerShape:
    """The Mamba-2 mixer of a hybrid config's text part (UnprovenLayers for a type not read here;
    ConfigError naming the field for a bad value)."""
    if model_type not in _FIELDS:
        what = UNREAD_MIXERS.get(model_type, f"model type {model_type!r}: its state-space layers")
        raise UnprovenLayers(f"{where}: a hybrid model with {what}: the fit check does not record these kernels "
                             f"for this device (it reads the Mamba-2 mixers of {', '.join(MAMBA2_HYBRID_TYPES)})")
    heads_key, head_key, state_key, groups_key, chunk_key, conv_key = _FIELDS[model_type]
    heads = _positive_int(text, heads_key, where)
    head_dim = _positive_int(text, head_key, where)
    state = _positive_int(text, state_key, where)
    groups = _positive_int(text, groups_key, where, 1)
    chunk = _positive_int(text, chunk_key, where, 256)
    conv = _positive_int(text, conv_key, where, 4)
    if heads % groups:
        raise ConfigError(f"{where}: {heads} Mamba heads ('{heads_key}') are not a multiple of {groups} groups "
                          f"('{groups_key}')")
    if heads % tensor_parallel:
        raise ConfigError(f"{where}: {heads} Mamba heads ('{heads_key}') do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    # vLLM replicates groups so that each rank holds whole groups (mamba_utils.extra_groups_for_head_shards)
    rank_groups = groups // tensor_parallel if groups % tensor_parallel == 0 else 1
    intermediate = heads * head_dim
    # Mixer2RMSNormGated.forward_cuda runs the Triton norm for one group on one rank; Falcon-H1 may turn
    # the norm off (mamba_rms_norm: false)
    normed = text.get("mamba_rms_norm", True) is not False
    norm_width = intermediate if normed and groups == 1 and tensor_parallel == 1 else 0
    return MixerShape(model, heads // tensor_parallel, rank_groups, head_dim, state, chunk, conv, norm_width,
                      tensor_parallel)


def mixer_from_config(config: dict, model: str, where: str, tensor_parallel: int = 1) -> MixerShape | None:
    """The mixer of a parsed config.json (text_config honoured), None for a model without one."""
    from patches.fitcheck.shapes import hybrid_fields

    text = config.get("text_config", config) if isinstance(config, dict) else None
    if not isinstance(text, dict) or not hybrid_fields(text):
        return None
    return mixer_shape(text, text.get("model_type") or config.get("model_type"), model, where, tensor_parallel)


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
