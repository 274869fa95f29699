"""The mixers of hybrid and state-space models and latent attention, the shape of one as vLLM's Triton
kernels see it, read from the typed config's text section (pure standard library; which of them a model
has is the family registry's, families/): the Mamba-2 mixers of Nemotron-H, Granite 4.0-H, Falcon-H1,
Bamba, Zamba 2 and Mamba-2 models (MixerShape), the Mamba-1 mixers of Jamba, Mamba and Falcon Mamba
(Mamba1Shape), LFM2's short convolutions (ShortConvShape), the gated delta net of Qwen3-Next and
Qwen3.5 (GdnShape; gdn_launches.py records it) and Kimi Linear's KDA (KdaShape; kda_launches.py records it).

What a mixer launches on a Turing or Ampere GPU (vLLM 0.33.0, model_executor/layers/mamba/
mamba_mixer2.py), each kernel's shared memory set by these fields alone (patches/fitcheck/
mixer_launches.py records and compiles them):
  prefill  causal_conv1d_fn (conv width), mamba_chunk_scan_combined_varlen's five autotuned kernels
           (head dim, state size, chunk size), the gated RMS norm when the mixer has one group and one
           rank (its width), the prefix-caching checkpoint copy (vLLM's default "align" mode)
  decode   causal_conv1d_update (conv width), selective_state_update (head dim, state size)
Head and group counts only set the grid, so one verdict holds for every model with such a mixer.

A Mamba-1 mixer (mamba_mixer.py) runs causal_conv1d_fn then the CUDA selective_scan_fn (vllm._C, not
Triton) in prefill, causal_conv1d_update and selective_state_update in decode; its kernels are sized by
the state size and the conv width, its channel count (intermediate size over the ranks) sets the grid.

Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-4.7-Flash: `kv_lora_rank` set; MlaShape) is
not a mixer but is keyed the same way: on compute capability 8.x vLLM decodes it with TRITON_MLA
(v1/attention/ops/triton_decode_attention.py, decode_attention_fwd), whose tiles follow the latent
rank and the rope dim alone (heads set the grid), and prefills it with FlashAttention 2 (CUDA).

LFM2's short convolution (short_conv.py, ShortConv) runs causal_conv1d_fn in prefill and
causal_conv1d_update in decode, both without an activation, over `conv_dim` channels split over the
ranks; its width (`conv_L_cache`) is all that sizes them.
"""
from __future__ import annotations

import reprlib
from dataclasses import dataclass

from contract.model_config import Section
from patches.fitcheck.base import DEFAULT_DTYPE, ConfigError, UnprovenLayers

# The history length the build records ReplaySSM's Mamba-2 decode at (`--use-replayssm`): vLLM's default
# `--replayssm-buffer-len`. Its kernels' tiles grow with the length (measured on sm_75 / sm_86: at most
# 4,096 / 6,656 bytes at 16, 16,384 / 20,480 at 64), so the preflight names another length as not proven.
REPLAYSSM_HISTORY = 16
MAMBA2 = "mamba2"
MAMBA1 = "mamba1"
SHORT_CONV = "short_conv"
MLA = "mla"
GATED_DELTA_NET = "gated_delta_net"
KDA = "kda"
MIXER_FIELDS = ("mixer", "head_dim", "state_size", "chunk_size", "conv_width", "norm_width")
# What sizes a gated delta net's kernels: the head dims (K and V of FLA's tiles), the conv width, the
# recurrent state's dtype and the projection layout. Head counts reach the kernels only as offsets and
# strides (FLA's H / Hg), so they are left out as the Mamba-2 mixer's are; the image's fit report
# holds the needs equal over the head counts of tensor parallel 1, 2 and 4
# (tests/image/test_fitcheck.py).
GDN_FIELDS = ("mixer", "key_head_dim", "value_head_dim", "conv_width", "state_dtype", "interleaved")
MAMBA1_FIELDS = ("mixer", "state_size", "conv_width")
SHORT_CONV_FIELDS = ("mixer", "conv_width")
MLA_FIELDS = ("mixer", "kv_lora_rank", "rope_dim")
# What sizes a KDA layer's kernels: its head dim (K = V), the conv width and whether the gate has a lower
# bound (vLLM's "safe gate": another intra-chunk kernel). The recurrent state is fp32 whatever the model
# (MambaStateDtypeCalculator.kda_state_dtype, the layer passing no SSM cache dtype). Head counts set the
# grid and offsets only, but for the spec-decode recurrent kernel, whose BV and stages follow heads x
# sequences: kda_launches.py records each of its four choices, so the verdict holds for any head count.
KDA_FIELDS = ("mixer", "head_dim", "conv_width", "safe_gate")
MODEL_DTYPE = DEFAULT_DTYPE  # the activations' dtype in the recorded launches unless a run says another

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
# LFM2's short convolutions: the field vLLM takes the channels from (lfm2.py: `conv_dim`, which LiquidAI's
# checkpoints carry, the hidden size where one does not; lfm2_moe.py: the hidden size) and the width,
# `conv_L_cache` (transformers' default 3).
_SHORT_CONV_CHANNELS = {"lfm2": "conv_dim", "lfm2_moe": "hidden_size"}
SHORT_CONV_TYPES = tuple(_SHORT_CONV_CHANNELS)
SHORT_CONV_DEFAULT_WIDTH = 3
# Hybrid and state-space types whose mixers run kernels the fit check does not record: each stays
# "not proven", named. vLLM 0.33.0's registry lists PLaMo 2 and MiniMax-Text-01 / M1 as supported only
# until 0.26.0 and 0.23.0 (_PREVIOUSLY_SUPPORTED_MODELS), as it does Bamba (0.23.0), whose mixer the
# check reads like the other Mamba-2 hybrids'.
UNREAD_MIXERS = {
    "plamo2": "PLaMo 2's Mamba mixers (a model class vLLM 0.33.0 no longer has: its last release with one is 0.26.0)",
    "minimax_m1": "MiniMax's lightning attention kernels (a model class vLLM 0.33.0 no longer has: its last release "
                  "with one is 0.23.0)",
}


class RecordedShape:
    """What every shape a family records itself (a mixer, latent attention) has: a model and a layer name
    (fields of its dataclass), `mixer`, its kind's name, and FIELDS, the names of the fields that size its
    kernels (the first `mixer`): its verdicts' key in the fit table (table.py)."""

    model: str
    layer: str
    mixer: str
    FIELDS: tuple = ()

    @property
    def label(self) -> str:
        return f"{self.model}/{self.layer}"

    @property
    def head_size(self) -> int:  # the report's column: the head dim where the shape has one
        return self.head_dim


@dataclass(frozen=True)
class MixerShape(RecordedShape):
    """One hybrid model's Mamba-2 mixer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MIXER_FIELDS  # what sizes its kernels: its verdict's key (table.py)
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
    def conv_dim(self) -> int:
        return self.heads * self.head_dim + 2 * self.groups * self.state_size


@dataclass(frozen=True)
class Mamba1Shape(RecordedShape):
    """One Mamba-1 mixer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MAMBA1_FIELDS  # what sizes its kernels: its verdict's key (table.py)
    model: str
    channels: int  # one rank's share of the intermediate size: the conv's channels, the state's rows
    state_size: int
    conv_width: int
    tensor_parallel: int = 1
    mixer: str = MAMBA1
    layer: str = "mamba"

    @property
    def head_size(self) -> int:  # the report's column: a Mamba-1 mixer has no heads, its state rows are this
        return self.state_size

    @property
    def conv_dim(self) -> int:
        return self.channels


@dataclass(frozen=True)
class ShortConvShape(RecordedShape):
    """One LFM2 short convolution, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = SHORT_CONV_FIELDS  # what sizes its kernels: its verdict's key (table.py)
    model: str
    channels: int  # one rank's share of conv_dim: the conv's channels (the grid)
    conv_width: int
    tensor_parallel: int = 1
    mixer: str = SHORT_CONV
    layer: str = "conv"

    @property
    def head_size(self) -> int:  # the report's column: a convolution has no heads, its width sizes it
        return self.conv_width

    @property
    def conv_dim(self) -> int:
        return self.channels


@dataclass(frozen=True)
class MlaShape(RecordedShape):
    """One model's multi-head latent attention, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MLA_FIELDS  # what sizes its kernels: its verdict's key (table.py)
    model: str
    heads: int  # one rank's query heads
    kv_lora_rank: int
    rope_dim: int
    tensor_parallel: int = 1
    mixer: str = MLA
    layer: str = "mla"

    @property
    def head_size(self) -> int:  # the report's column: the latent rank is the width the decode's tiles follow
        return self.kv_lora_rank


# vLLM 0.33.0's MLA below compute capability 8.0: its prefill backends below 10.0 are FlashAttention
# alone (platforms/interface.py get_mla_prefill_backend_cls), and FlashAttention 2 needs 8.0; its
# TRITON_MLA decode does not fit Turing's shared memory at a latent rank of 512 (tests/image/
# test_fitcheck.py measures it). From 9.0 on it runs FlashAttention 3 / FlashMLA, which the check
# does not record.
MLA_MIN_CC = 80
MLA_RECORDED_BELOW_CC = 90
MLA_DEFAULT_ROPE_DIM = 64  # transformers' DeepseekV2Config / DeepseekV3Config default


def mla_shape(text: Section | dict, model: str, where: str, tensor_parallel: int = 1) -> MlaShape:
    """The multi-head latent attention of a config's text part (UnprovenLayers for DeepSeek V3.2's
    sparse attention, ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    if text.has("index_topk"):
        raise UnprovenLayers(f"{where}: sparse multi-head latent attention (index_topk {reprlib.repr(text.value('index_topk'))}, "
                             "DeepSeek V3.2's indexer): vLLM runs it only with FlashMLA / FlashInfer sparse kernels "
                             "(compute capability 9.0 and newer), which the fit check does not record")
    rank = text.positive_int("kv_lora_rank")
    rope = text.count("qk_rope_head_dim", MLA_DEFAULT_ROPE_DIM)
    heads = text.positive_int("num_attention_heads")
    if heads % tensor_parallel:
        raise ConfigError(f"{where}: {heads} attention heads ('num_attention_heads') do not split over tensor parallel "
                          f"size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    return MlaShape(model, heads // tensor_parallel, rank, rope, tensor_parallel)


def short_conv_shape(text: Section | dict, model_type: str, model: str, where: str,
                     tensor_parallel: int = 1) -> ShortConvShape:
    """The short convolution of an LFM2 config's text part (ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    channels_key = _SHORT_CONV_CHANNELS[model_type]
    channels = text.positive_int(channels_key, text.optional_int("hidden_size"))
    width = text.positive_int("conv_L_cache", SHORT_CONV_DEFAULT_WIDTH)
    if channels % tensor_parallel:
        raise ConfigError(f"{where}: the short convolution's {channels} channels ('{channels_key}') do not split over "
                          f"tensor parallel size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE "
                          f"that divides {channels}")
    return ShortConvShape(model, channels // tensor_parallel, width, tensor_parallel)


def mamba1_shape(text: Section | dict, model_type: str, model: str, where: str, tensor_parallel: int = 1) -> Mamba1Shape:
    """The Mamba-1 mixer of a config's text part (ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    size_key, state_key, conv_key = _MAMBA1_FIELDS[model_type]
    size = text.positive_int(size_key, _MAMBA1_DEFAULTS.get(size_key))
    intermediate = size * text.positive_int("hidden_size") if size_key == "mamba_expand" else size
    state = text.positive_int(state_key, _MAMBA1_DEFAULTS[state_key])
    conv = text.positive_int(conv_key, _MAMBA1_DEFAULTS[conv_key])
    if intermediate % tensor_parallel:
        raise ConfigError(f"{where}: the Mamba intermediate size {intermediate} does not split over tensor parallel "
                          f"size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides it")
    return Mamba1Shape(model, intermediate // tensor_parallel, state, conv, tensor_parallel)


def fields_by_kind() -> dict[str, tuple]:
    """{kind: FIELDS} of every RecordedShape class defined (a family's module defines its own)."""
    found, pending = {}, [RecordedShape]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.FIELDS and isinstance(getattr(cls, "mixer", None), str):
            found.setdefault(cls.mixer, cls.FIELDS)
    return found


def as_section(text: Section | dict, where: str) -> Section:
    """A text section as the readers take it (a caller's dict: its fields read as the section's)."""
    return text.at(where) if isinstance(text, Section) else Section(text, "", where)


def mamba2_shape(text: Section | dict, model_type: str, model: str, where: str, tensor_parallel: int = 1,
                 model_dtype: str = MODEL_DTYPE) -> MixerShape:
    """The Mamba-2 mixer of a config's text part (ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    heads_key, head_key, state_key, groups_key, chunk_key, conv_key = _FIELDS[model_type]
    heads = text.positive_int(heads_key)
    head_dim = text.positive_int(head_key)
    state = text.positive_int(state_key)
    groups = text.positive_int(groups_key, 1)
    chunk = text.positive_int(chunk_key, 256)
    conv = text.positive_int(conv_key, 4)
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
    normed = text.value("mamba_rms_norm", True) is not False
    norm_width = intermediate if normed and groups == 1 and tensor_parallel == 1 else 0
    return MixerShape(model, heads // tensor_parallel, rank_groups, head_dim, state, chunk, conv, norm_width,
                      tensor_parallel)


# config.json model types whose linear attention is vLLM's QwenGatedDeltaNetAttention, and whether the
# model class builds it with gqa_interleaved_layout (Qwen3-Next: q, k, v gathered out of one interleaved
# projection into a fresh tensor; Qwen3.5: views of the projection).
GDN_TYPES = {"qwen3_next": True, "qwen3_5_text": False, "qwen3_5_moe_text": False}
# A multimodal Qwen3.5's top-level type names the text part's.
GDN_TEXT_TYPES = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
# vLLM's Qwen3_5ForConditionalGenerationConfig makes the config's mamba_ssm_dtype the recurrent state's
# dtype (model_executor/models/config.py); other types keep the model's.
_STATE_DTYPE_FROM_CONFIG = ("qwen3_5_text", "qwen3_5_moe_text")
STATE_DTYPES = ("float16", "bfloat16", "float32")
# transformers' defaults for these fields, the same for the three classes (Qwen3NextConfig, Qwen3_5TextConfig,
# Qwen3_5MoeTextConfig, transformers 5.24); tests/unit/test_gdn_launches.py holds them to the classes.
GDN_DEFAULTS = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}
# Below compute capability 9.0 vLLM runs the gated delta net's chunked prefill on FLA's Triton kernels
# and FLA's import-time choices are those a CPU host makes (gdn_launches.host_choices_differ); sm_90
# and newer run FlashInfer or CuteDSL there, which the check does not record.
GDN_RECORDED_BELOW_CC = 90


@dataclass(frozen=True)
class GdnShape(RecordedShape):
    """One gated delta net layer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = GDN_FIELDS  # what sizes its kernels: its verdict's key (table.py)
    model: str
    key_heads: int  # one rank's
    value_heads: int  # one rank's
    key_head_dim: int
    value_head_dim: int
    conv_width: int
    state_dtype: str  # the recurrent state's (the KV cache's second tensor)
    interleaved: bool  # Qwen3-Next's qkvz layout (see GDN_TYPES)
    tensor_parallel: int = 1
    mixer: str = GATED_DELTA_NET
    layer: str = "linear_attention"

    @property
    def head_size(self) -> int:  # the report's column
        return self.key_head_dim

    @property
    def conv_dim(self) -> int:
        """One rank's q, k and v channels: the convolution's width."""
        return 2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim

    @property
    def gate_dim(self) -> int:
        return self.value_heads * self.value_head_dim


def gdn_shape(text: Section | dict, model_type: str | None, model: str, where: str, tensor_parallel: int = 1,
              model_dtype: str = MODEL_DTYPE) -> GdnShape:
    """The gated delta net of a config's text part (UnprovenLayers for another linear attention,
    ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    model_type = GDN_TEXT_TYPES.get(model_type, model_type)
    if model_type not in GDN_TYPES:
        what = UNREAD_MIXERS.get(model_type, f"model type {reprlib.repr(model_type)}: its linear attention layers")
        raise UnprovenLayers(f"{where}: a hybrid model with {what}: the fit check does not record these kernels "
                             f"(it reads the gated delta net of {', '.join(GDN_TYPES)})")
    key_heads, value_heads, key_dim, value_dim, width = (
        text.positive_int(name, GDN_DEFAULTS[name]) for name in GDN_DEFAULTS)
    if value_heads % key_heads:
        raise ConfigError(f"{where}: {value_heads} value heads ('linear_num_value_heads') are not a multiple of "
                          f"{key_heads} key heads ('linear_num_key_heads')")
    for count, name in ((key_heads, "linear_num_key_heads"), (value_heads, "linear_num_value_heads")):
        if count % tensor_parallel:
            raise ConfigError(f"{where}: {count} heads ('{name}') do not split over tensor parallel size "
                              f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {count}")
    state_dtype = model_dtype
    if model_type in _STATE_DTYPE_FROM_CONFIG and text.has("mamba_ssm_dtype"):
        state_dtype = text.string("mamba_ssm_dtype")
        if state_dtype not in STATE_DTYPES:
            raise text.problem("mamba_ssm_dtype", f"one of {', '.join(STATE_DTYPES)}")
    return GdnShape(model, key_heads // tensor_parallel, value_heads // tensor_parallel, key_dim, value_dim, width,
                    state_dtype, GDN_TYPES[model_type], tensor_parallel)


# config.json model types whose linear attention is vLLM's KimiGatedDeltaNetAttention (KDA).
KDA_TYPES = ("kimi_linear",)
# transformers' KimiLinearConfig (5.24) takes each field from the checkpoint's `linear_attn_config` (the
# sub-dict's name second), else the top-level field, else its default; vLLM's layer reads the same three.
KDA_SUBFIELDS = {"linear_head_dim": "head_dim", "linear_num_heads": "num_heads",
                 "linear_conv_kernel_dim": "short_conv_kernel_size"}
KDA_DEFAULTS = {"linear_head_dim": 128, "linear_num_heads": 32, "linear_conv_kernel_dim": 4}
# vLLM's kimi_gdn_linear_attn.py: a gate lower bound lies in [-5, 0) (_KDA_GATE_LOGBOUND_MIN)
KDA_GATE_LOWER_BOUND_MIN = -5.0


@dataclass(frozen=True)
class KdaShape(RecordedShape):
    """One Kimi Linear KDA layer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = KDA_FIELDS  # what sizes its kernels: its verdict's key (table.py)
    model: str
    heads: int  # one rank's (query, key and value heads alike)
    head_dim: int
    conv_width: int
    safe_gate: bool  # linear_attn_config's gate_lower_bound set
    tensor_parallel: int = 1
    mixer: str = KDA
    layer: str = "linear_attention"

    @property
    def conv_dim(self) -> int:
        """One rank's q, k and v channels: the packed convolution's width."""
        return 3 * self.heads * self.head_dim


def kda_shape(text: Section | dict, model: str, where: str, tensor_parallel: int = 1) -> KdaShape:
    """The KDA layer of a Kimi Linear config's text part (ConfigError naming the field for a bad value)."""
    text = as_section(text, where)
    linear = text.object("linear_attn_config") or Section({}, text.prefix + "linear_attn_config.", where)
    values = {}
    for field, sub in KDA_SUBFIELDS.items():
        values[field] = linear.positive_int(sub) if linear.has(sub) else text.positive_int(field, KDA_DEFAULTS[field])
    heads = values["linear_num_heads"]
    bound = linear.value("gate_lower_bound")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                              or not KDA_GATE_LOWER_BOUND_MIN <= bound < 0):
        raise linear.problem("gate_lower_bound", f"a number in [{KDA_GATE_LOWER_BOUND_MIN}, 0) or null")
    if heads % tensor_parallel:
        name = "linear_attn_config.num_heads" if linear.has("num_heads") else "linear_num_heads"
        raise ConfigError(f"{where}: {heads} KDA heads ('{name}') do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    return KdaShape(model, heads // tensor_parallel, values["linear_head_dim"], values["linear_conv_kernel_dim"],
                    bound is not None, tensor_parallel)


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


def _gdn_hybrid(model_type: str, attention: tuple, heads: tuple, **extra) -> dict:
    """A gated delta net hybrid: (query heads, KV heads, head dim) of its full attention layers and its
    linear attention's (key heads, value heads), head dims of 128 (every published Qwen3-Next and
    Qwen3.5 checkpoint's), three linear attention layers to one full."""
    query_heads, kv_heads, head_dim = attention
    key_heads, value_heads = heads
    return {"model_type": model_type, "num_attention_heads": query_heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, **GDN_DEFAULTS, "linear_num_key_heads": key_heads,
            "linear_num_value_heads": value_heads, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            **extra}


# The matrix's Mamba-1 models, shaped like the published checkpoints: Jamba's hybrid (attention 32/8 of
# 128, a 2x expansion of 4096), Falcon Mamba 7B and Mamba 2.8B (state-spaces/mamba-2.8b-hf), all with a
# 16-wide state and a width-4 conv; and a pure Mamba-2 model, Mamba-Codestral 7B.
BUILTIN_STATE_SPACE = {
    "jamba-v0.1": {"model_type": "jamba", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "attn_layer_period": 8,
                   "attn_layer_offset": 4},
    "falcon-mamba-7b": {"model_type": "falcon_mamba", "hidden_size": 4096, "intermediate_size": 8192,
                        "state_size": 16, "conv_kernel": 4},
    "mamba-2.8b": {"model_type": "mamba", "hidden_size": 2560, "intermediate_size": 5120, "state_size": 16,
                   "conv_kernel": 4},
    "mamba-codestral-7b": {"model_type": "mamba2", "hidden_size": 4096, "num_heads": 128, "head_dim": 64,
                           "state_size": 128, "n_groups": 8, "chunk_size": 256, "conv_kernel": 4},
}


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


# The matrix's gated delta net hybrids, shaped like the published checkpoints: Qwen3-Next's interleaved
# projection, Qwen3.5 MoE's views of it with the model's state dtype, and the dense Qwen3.5's fp32
# recurrent state (mamba_ssm_dtype).
BUILTIN_GDN = {
    "qwen3-next-80b-a3b": _gdn_hybrid("qwen3_next", (16, 2, 256), (16, 32)),
    "qwen3.5-35b-a3b": _gdn_hybrid("qwen3_5_moe_text", (16, 2, 256), (16, 32)),
    "qwen3.5-27b": _gdn_hybrid("qwen3_5_text", (24, 4, 256), (16, 48), mamba_ssm_dtype="float32"),
}

# The matrix's models with multi-head latent attention, shaped like the published checkpoints (latent
# rank 512 and rope dim 64 in each): DeepSeek-V2-Lite (16 heads), GLM-4.7-Flash (20) and DeepSeek-V3 /
# Kimi K2 (128). vLLM serves them from compute capability 8.0 (families/mla.py).
def _mla(model_type: str, heads: int, nope: int, value: int) -> dict:
    return {"model_type": model_type, "num_attention_heads": heads, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": nope, "v_head_dim": value}


BUILTIN_MLA = {
    "deepseek-v2-lite": _mla("deepseek_v2", 16, 128, 128),
    "glm-4.7-flash": _mla("glm4_moe_lite", 20, 192, 256),
    "deepseek-v3": _mla("deepseek_v3", 128, 128, 128),
}


# The matrix's Kimi Linear, shaped like the published Kimi-Linear-48B-A3B checkpoint as transformers'
# KimiLinearConfig (5.24) defaults describe it, which we take to be that checkpoint's values (assumed, not
# read from its config.json): 32 attention heads with latent rank 512 and rope dim 64, KDA of 32 heads of
# 128 with width-4 convolutions and no gate lower bound, full attention every fourth layer of 27 (the
# class's layer rule, 1-indexed as the checkpoint's linear_attn_config lists it). vLLM serves it from
# compute capability 8.0 (its latent attention: refused_on), so the matrix proves it on sm_86.
BUILTIN_KDA = {
    "kimi-linear-48b-a3b": {
        "model_type": "kimi_linear", "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "linear_attn_config": {"head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
                               "full_attn_layers": list(range(5, 28, 4)),
                               "kda_layers": [n for n in range(1, 28) if n not in range(5, 28, 4)]}},
}
