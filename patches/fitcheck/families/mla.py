"""Multi-head latent attention (DeepSeek V2 / V3, Kimi K2, GLM-4.7-Flash: `kv_lora_rank` set): on compute
capability 8.x vLLM decodes it with TRITON_MLA (decode_attention_fwd), whose tiles follow the latent rank
and the rope dim alone, and prefills it with FlashAttention 2 (CUDA). Below 8.0 vLLM cannot serve it;
from 9.0 it runs FlashAttention 3 / FlashMLA / FlashInfer, which the check does not record."""
from patches.fitcheck import mixer_shapes as m
from patches.fitcheck.base import ConfigError, Family, Refusal


def read(text, model_type: str, model: str, where: str, tensor_parallel: int, dtype: str) -> m.MlaShape:
    return m.mla_shape(text, model, where, tensor_parallel)


def record(shape: m.MlaShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck import mixer_launches

    return mixer_launches.record_mla(shape, dtype)


def refused_on(shape: m.MlaShape, cc: int) -> Refusal | None:
    if cc >= m.MLA_MIN_CC:
        return None
    return Refusal(
        f"{shape.label}: multi-head latent attention (kv_lora_rank {shape.kv_lora_rank}) needs compute "
        f"capability {m.MLA_MIN_CC // 10}.0 in vLLM: its prefill runs on FlashAttention alone and its Triton "
        f"decode (TRITON_MLA) does not fit this device's shared memory",
        f"serve it on a GPU of compute capability {m.MLA_MIN_CC // 10}.0 or newer (RTX 30xx, A10, ...), or pick a "
        "model without multi-head latent attention")


def unrecorded_on(shape: m.MlaShape, cc: int) -> str | None:
    if cc < m.MLA_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} vLLM runs multi-head latent "
            "attention with FlashAttention 3, FlashMLA or FlashInfer, which the fit check does not record (it "
            f"records TRITON_MLA's decode, run below {m.MLA_RECORDED_BELOW_CC // 10}.0)")


def config_refused_on(config, model: str, where: str, tensor_parallel: int, cc: int) -> Refusal | None:
    """Latent attention below 8.0, before the layers are read (None where it cannot be read)."""
    if not config.text.has("kv_lora_rank"):
        return None
    try:
        return refused_on(read(config.text, config.type_of_text, model, where, tensor_parallel, ""), cc)
    except ConfigError:
        return None


FAMILY = Family(
    name="mla", role="latent", description="multi-head latent attention",
    proves="multi-head latent attention on compute capability 8.x", shape_type=m.MlaShape,
    claims=lambda text: text.has("kv_lora_rank"), read=read, record=record,
    describe=lambda shape: f"multi-head latent attention: kv_lora_rank {shape.kv_lora_rank}, rope dim {shape.rope_dim}",
    refused_on=refused_on, unrecorded_on=unrecorded_on, config_refused_on=config_refused_on,
    builtin=m.BUILTIN_MLA, order=90)
