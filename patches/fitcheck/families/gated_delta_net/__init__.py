"""The gated delta net of Qwen3-Next and Qwen3.5 (GdnShape): launches.record_gdn records FLA's Triton
kernels as vLLM calls them below compute capability 9.0; from 9.0 vLLM runs its prefill with FlashInfer
or CuteDSL, which the check does not record.
"""
from __future__ import annotations

import reprlib
from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import DEFAULT_DTYPE, Family, RecordedShape, UNREAD_MIXERS, UnprovenLayers

# What sizes a gated delta net's kernels: the head dims (K and V of FLA's tiles), the conv width, the
# recurrent state's dtype and the projection layout. Head counts reach the kernels only as offsets and
# strides (FLA's H / Hg), so they are left out as the Mamba-2 mixer's are; the image's fit report
# holds the needs equal over the head counts of tensor parallel 1, 2 and 4
# (tests/image/test_fitcheck.py).
GDN_FIELDS = ("mixer", "key_head_dim", "value_head_dim", "conv_width", "state_dtype", "interleaved")


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
# and FLA's import-time choices are those a CPU host makes (launches.host_choices_differ); sm_90
# and newer run FlashInfer or CuteDSL there, which the check does not record.
GDN_RECORDED_BELOW_CC = 90


@dataclass(frozen=True)
class GdnShape(RecordedShape):
    """One gated delta net layer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = GDN_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    key_heads: int  # one rank's
    value_heads: int  # one rank's
    key_head_dim: int
    value_head_dim: int
    conv_width: int
    state_dtype: str  # the recurrent state's (the KV cache's second tensor)
    interleaved: bool  # Qwen3-Next's qkvz layout (see GDN_TYPES)
    tensor_parallel: int = 1
    mixer: str = "gated_delta_net"
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


def gdn_shape(text: Section, model_type: str | None, model: str, where: str, tensor_parallel: int = 1,
              model_dtype: str = DEFAULT_DTYPE) -> GdnShape:
    """The gated delta net of a config's text part (UnprovenLayers for another linear attention,
    ConfigProblem naming the field for a bad value)."""
    model_type = GDN_TEXT_TYPES.get(model_type, model_type)
    if model_type not in GDN_TYPES:
        what = UNREAD_MIXERS.get(model_type, f"model type {reprlib.repr(model_type)}: its linear attention layers")
        raise UnprovenLayers(f"{where}: a hybrid model with {what}: the fit check does not record these kernels "
                             f"(it reads the gated delta net of {', '.join(GDN_TYPES)})")
    key_heads, value_heads, key_dim, value_dim, width = (
        text.positive_int(name, GDN_DEFAULTS[name]) for name in GDN_DEFAULTS)
    if value_heads % key_heads:
        raise ConfigProblem(f"{where}: {value_heads} value heads ('linear_num_value_heads') are not a multiple of "
                          f"{key_heads} key heads ('linear_num_key_heads')")
    for count, name in ((key_heads, "linear_num_key_heads"), (value_heads, "linear_num_value_heads")):
        if count % tensor_parallel:
            raise ConfigProblem(f"{where}: {count} heads ('{name}') do not split over tensor parallel size "
                              f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {count}")
    state_dtype = model_dtype
    if model_type in _STATE_DTYPE_FROM_CONFIG and text.has("mamba_ssm_dtype"):
        state_dtype = text.string("mamba_ssm_dtype")
        if state_dtype not in STATE_DTYPES:
            raise text.problem("mamba_ssm_dtype", f"one of {', '.join(STATE_DTYPES)}")
    return GdnShape(model, key_heads // tensor_parallel, value_heads // tensor_parallel, key_dim, value_dim, width,
                    state_dtype, GDN_TYPES[model_type], tensor_parallel)


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


# The matrix's gated delta net hybrids, shaped like the published checkpoints: Qwen3-Next's interleaved
# projection, Qwen3.5 MoE's views of it with the model's state dtype, and the dense Qwen3.5's fp32
# recurrent state (mamba_ssm_dtype).
BUILTIN_GDN = {
    "qwen3-next-80b-a3b": _gdn_hybrid("qwen3_next", (16, 2, 256), (16, 32)),
    "qwen3.5-35b-a3b": _gdn_hybrid("qwen3_5_moe_text", (16, 2, 256), (16, 32)),
    "qwen3.5-27b": _gdn_hybrid("qwen3_5_text", (24, 4, 256), (16, 48), mamba_ssm_dtype="float32"),
}



def record(shape: GdnShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.gated_delta_net.launches import record_gdn

    return record_gdn(shape, dtype)


def unrecorded_on(shape: GdnShape, cc: int) -> str | None:
    if cc < GDN_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} vLLM runs the gated delta net's "
            "prefill with FlashInfer or CuteDSL, which the fit check does not record (it records FLA's "
            f"Triton kernels, run below {GDN_RECORDED_BELOW_CC // 10}.0)")


def _describe(shape: GdnShape) -> str:
    return (f"gated delta net: key/value head dims {shape.key_head_dim}/{shape.value_head_dim}, conv "
            f"{shape.conv_width}, {shape.state_dtype} state")


FAMILY = Family(
    name="gated_delta_net", role="mixer", description="gated delta net",
    proves="the gated delta net of Qwen3-Next and Qwen3.5",
    reads_phrase=f"the gated delta net of {', '.join(GDN_TYPES)}", shape_type=GdnShape,
    model_types=(*GDN_TYPES, *GDN_TEXT_TYPES),
    read=lambda text, model_type, model, where, tp, dtype: gdn_shape(text, model_type, model, where, tp, dtype),
    record=record, host_dependent=True, describe=_describe, unrecorded_on=unrecorded_on, builtin=BUILTIN_GDN,
    order=80)


def gdn_from_config(config, model: str, where: str, tensor_parallel: int = 1) -> GdnShape | None:
    """The gated delta net of a model's typed config, None for a model of another type."""
    if GDN_TEXT_TYPES.get(config.type_of_text, config.type_of_text) not in GDN_TYPES:
        return None
    return gdn_shape(config.text, config.type_of_text, model, where, tensor_parallel)
