"""Multi-head latent attention (DeepSeek V2 / V3, Kimi K2, GLM-4.7-Flash: `kv_lora_rank` set; MlaShape).

Not a mixer but recorded and keyed the same way: on compute capability 8.x vLLM decodes it with TRITON_MLA
(v1/attention/ops/triton_decode_attention.py, decode_attention_fwd; launches.record_mla), whose
tiles follow the latent rank and the rope dim alone (heads set the grid), and prefills it with
FlashAttention 2 (CUDA). Below 8.0 vLLM cannot serve it; from 9.0 it runs FlashAttention 3 / FlashMLA /
FlashInfer, which the check does not record.
"""
from __future__ import annotations

import reprlib
from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import Family, RecordedShape, Refusal, UnprovenLayers

MLA_FIELDS = ("mixer", "kv_lora_rank", "rope_dim")


@dataclass(frozen=True)
class MlaShape(RecordedShape):
    """One model's multi-head latent attention, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = MLA_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    heads: int  # one rank's query heads
    kv_lora_rank: int
    rope_dim: int
    tensor_parallel: int = 1
    mixer: str = "mla"
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


def mla_shape(text: Section, model: str, where: str, tensor_parallel: int = 1) -> MlaShape:
    """The multi-head latent attention of a config's text part (UnprovenLayers for DeepSeek V3.2's
    sparse attention, ConfigProblem naming the field for a bad value)."""
    if text.has("index_topk"):
        raise UnprovenLayers(f"{where}: sparse multi-head latent attention (index_topk {reprlib.repr(text.value('index_topk'))}, "
                             "DeepSeek V3.2's indexer): vLLM runs it only with FlashMLA / FlashInfer sparse kernels "
                             "(compute capability 9.0 and newer), which the fit check does not record")
    rank = text.positive_int("kv_lora_rank")
    rope = text.count("qk_rope_head_dim", MLA_DEFAULT_ROPE_DIM)
    heads = text.positive_int("num_attention_heads")
    if heads % tensor_parallel:
        raise ConfigProblem(f"{where}: {heads} attention heads ('num_attention_heads') do not split over tensor parallel "
                          f"size {tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    return MlaShape(model, heads // tensor_parallel, rank, rope, tensor_parallel)


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



def read(text, model_type: str, model: str, where: str, tensor_parallel: int, dtype: str) -> MlaShape:
    return mla_shape(text, model, where, tensor_parallel)


def record(shape: MlaShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.mla.launches import record_mla

    return record_mla(shape, dtype)


def refused_on(shape: MlaShape, cc: int) -> Refusal | None:
    if cc >= MLA_MIN_CC:
        return None
    return Refusal(
        f"{shape.label}: multi-head latent attention (kv_lora_rank {shape.kv_lora_rank}) needs compute "
        f"capability {MLA_MIN_CC // 10}.0 in vLLM: its prefill runs on FlashAttention alone and its Triton "
        f"decode (TRITON_MLA) does not fit this device's shared memory",
        f"serve it on a GPU of compute capability {MLA_MIN_CC // 10}.0 or newer (RTX 30xx, A10, ...), or pick a "
        "model without multi-head latent attention")


def unrecorded_on(shape: MlaShape, cc: int) -> str | None:
    if cc < MLA_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} vLLM runs multi-head latent "
            "attention with FlashAttention 3, FlashMLA or FlashInfer, which the fit check does not record (it "
            f"records TRITON_MLA's decode, run below {MLA_RECORDED_BELOW_CC // 10}.0)")


def config_refused_on(config, model: str, where: str, tensor_parallel: int, cc: int) -> Refusal | None:
    """Latent attention below 8.0, before the layers are read (None where it cannot be read)."""
    if not config.text.has("kv_lora_rank"):
        return None
    try:
        return refused_on(read(config.text, config.type_of_text, model, where, tensor_parallel, ""), cc)
    except ConfigProblem:
        return None


FAMILY = Family(
    name="mla", role="latent", description="multi-head latent attention",
    proves="multi-head latent attention on compute capability 8.x", shape_type=MlaShape,
    claims=lambda text: text.has("kv_lora_rank"), read=read, record=record,
    describe=lambda shape: f"multi-head latent attention: kv_lora_rank {shape.kv_lora_rank}, rope dim {shape.rope_dim}",
    refused_on=refused_on, unrecorded_on=unrecorded_on, config_refused_on=config_refused_on,
    builtin=BUILTIN_MLA, order=90)
