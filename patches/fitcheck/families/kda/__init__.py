"""Kimi Linear's KDA (KdaShape): launches.record_kda records FLA's and vLLM's KDA kernels as a device
below compute capability 9.0 chooses them. Kimi Linear's attention is latent (mla.py), so vLLM serves it
from 8.0.
"""
from __future__ import annotations

from dataclasses import dataclass

from contract.model_config import ConfigProblem, Section
from patches.fitcheck.family import Family, RecordedShape
from patches.fitcheck.families.gated_delta_net import GDN_RECORDED_BELOW_CC

# What sizes a KDA layer's kernels: its head dim (K = V), the conv width and whether the gate has a lower
# bound (vLLM's "safe gate": another intra-chunk kernel). The recurrent state is fp32 whatever the model
# (MambaStateDtypeCalculator.kda_state_dtype, the layer passing no SSM cache dtype). Head counts set the
# grid and offsets only, but for the spec-decode recurrent kernel, whose BV and stages follow heads x
# sequences: launches.py records each of its four choices, so the verdict holds for any head count.
# vLLM's kimi_gdn_linear_attn.py: a gate lower bound lies in [-5, 0) (_KDA_GATE_LOGBOUND_MIN)
KDA_GATE_LOWER_BOUND_MIN = -5.0
KDA_FIELDS = ("mixer", "head_dim", "conv_width", "safe_gate")


# config.json model types whose linear attention is vLLM's KimiGatedDeltaNetAttention (KDA).
KDA_TYPES = ("kimi_linear",)
# transformers' KimiLinearConfig (5.24) takes each field from the checkpoint's `linear_attn_config` (the
# sub-dict's name second), else the top-level field, else its default; vLLM's layer reads the same three.
KDA_SUBFIELDS = {"linear_head_dim": "head_dim", "linear_num_heads": "num_heads",
                 "linear_conv_kernel_dim": "short_conv_kernel_size"}
KDA_DEFAULTS = {"linear_head_dim": 128, "linear_num_heads": 32, "linear_conv_kernel_dim": 4}


@dataclass(frozen=True)
class KdaShape(RecordedShape):
    """One Kimi Linear KDA layer, as one rank of `tensor_parallel` ranks runs it."""

    FIELDS = KDA_FIELDS  # what sizes its kernels: its verdict's key (fit_table.py)
    model: str
    heads: int  # one rank's (query, key and value heads alike)
    head_dim: int
    conv_width: int
    safe_gate: bool  # linear_attn_config's gate_lower_bound set
    tensor_parallel: int = 1
    mixer: str = "kda"
    layer: str = "linear_attention"

    @property
    def conv_dim(self) -> int:
        """One rank's q, k and v channels: the packed convolution's width."""
        return 3 * self.heads * self.head_dim


def kda_shape(text: Section, model: str, where: str, tensor_parallel: int = 1) -> KdaShape:
    """The KDA layer of a Kimi Linear config's text part (ConfigProblem naming the field for a bad value)."""
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
        raise ConfigProblem(f"{where}: {heads} KDA heads ('{name}') do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    return KdaShape(model, heads // tensor_parallel, values["linear_head_dim"], values["linear_conv_kernel_dim"],
                    bound is not None, tensor_parallel)


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



def record(shape: KdaShape, cc: int, limit: int, dtype: str) -> list:
    from patches.fitcheck.families.kda.launches import record_kda

    return record_kda(shape, cc, limit, dtype)


def unrecorded_on(shape: KdaShape, cc: int) -> str | None:
    if cc < GDN_RECORDED_BELOW_CC:
        return None
    return (f"{shape.label}: on compute capability {cc // 10}.{cc % 10} FLA and vLLM choose the KDA kernels' "
            "lists and launches otherwise (Hopper's warps, TMA, programmatic dependent launch) than the fit "
            f"check records (below {GDN_RECORDED_BELOW_CC // 10}.0)")


FAMILY = Family(
    name="kda", role="mixer", description="KDA", proves="Kimi Linear's KDA on compute capability 8.x",
    reads_phrase=f"the KDA of {', '.join(KDA_TYPES)}", shape_type=KdaShape,
    model_types=KDA_TYPES, mixer_types=KDA_TYPES,
    read=lambda text, model_type, model, where, tp, dtype: kda_shape(text, model, where, tp),
    record=record, host_dependent=True,
    describe=lambda shape: (f"KDA: head dim {shape.head_dim}, conv {shape.conv_width}"
                            f"{', gate lower bound' if shape.safe_gate else ''}"),
    unrecorded_on=unrecorded_on, builtin=BUILTIN_KDA, order=100,
    replayssm_unproven=lambda model_type, buffer_len: (
        "Kimi Linear's ReplaySSM recovery kernels (--use-replayssm with speculative decoding)"
        if model_type in KDA_TYPES else None))
