"""Gemma 4: the built-in classes' attention layers at tensor parallel 1, 2 and 4 (its configs as transformers'
conversion scripts make them); a Gemma 4 config.json is read by the attention reader like any attention
model's (attention.py: global layers' own head size and KV heads, per_layer_config)."""
from contract.model_config import parse_config
from patches.fitcheck.attention import GEMMA4_GLOBAL_HEAD_DIM, LayerShape, config_shapes, describe
from patches.fitcheck.family import TENSOR_PARALLEL_SIZES, Family


def _gemma4_text(model_type: str, layers: int, pattern: int, heads: int, kv_heads: int, window: int,
                 global_kv_heads: int | None = None, k_eq_v: bool = False) -> dict:
    """The attention fields of a Gemma 4 text config: `pattern` - 1 sliding layers, then one global."""
    return {"model_type": model_type, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": 256, "global_head_dim": GEMMA4_GLOBAL_HEAD_DIM, "sliding_window": window,
            "layer_types": (["sliding_attention"] * (pattern - 1) + ["full_attention"]) * (layers // pattern),
            "num_global_key_value_heads": global_kv_heads, "attention_k_eq_v": k_eq_v}


# The Gemma 4 variants as transformers' conversion scripts configure them (models/gemma4/
# convert_gemma4_weights.py; the 12B: models/gemma4_unified/convert_gemma4_unified_weights.py),
# class defaults written out; a unit test holds each equal to what the classes produce.
BUILTIN_CONFIGS = {
    "gemma4-e2b": _gemma4_text("gemma4_text", 35, 5, 8, 1, 512),
    "gemma4-e4b": _gemma4_text("gemma4_text", 42, 6, 8, 2, 512),
    "gemma4-12b": _gemma4_text("gemma4_unified_text", 48, 6, 16, 8, 1024, 1, k_eq_v=True),
    "gemma4-26b-a4b": _gemma4_text("gemma4_text", 30, 6, 16, 8, 1024, 2, k_eq_v=True),
    "gemma4-31b": _gemma4_text("gemma4_text", 60, 6, 32, 16, 1024, 4, k_eq_v=True),
}


BUILTIN_MODELS: dict[str, list[LayerShape]] = {
    name: config_shapes(parse_config(config, f"built-in {name}"), name) for name, config in BUILTIN_CONFIGS.items()
}
# One rank's shapes under tensor parallelism 2 and 4 (vLLM issue 36802 is TP 4 on four T4s): the
# query heads split, the KV heads split or, fewer than ranks, are replicated, so the query-per-KV
# ratio (BLOCK_M, BLOCK_Q) and the unified page size change per rank.
BUILTIN_TP_MODELS: dict[str, list[LayerShape]] = {
    f"{name}-tp{tp}": config_shapes(parse_config(config, f"built-in {name}"), f"{name}-tp{tp}", tp)
    for tp in TENSOR_PARALLEL_SIZES[1:] for name, config in BUILTIN_CONFIGS.items()
}


def _matrix(dtype: str) -> list:
    return [shape for models in (BUILTIN_MODELS, BUILTIN_TP_MODELS) for shapes in models.values() for shape in shapes]


FAMILY = Family(name="gemma4", role="attention", description="Gemma 4 attention layer", shape_type=LayerShape,
                describe=describe, matrix=_matrix, order=20)
