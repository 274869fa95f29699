"""The attention-only families vLLM serves through the unified attention launcher (Llama, Qwen, Mistral,
Phi, Gemma 2 / 3, ...): per head size, the query-per-KV ratios and windows their checkpoints use
(attention.FAMILY_LAYERS)."""
from patches.fitcheck import attention
from patches.fitcheck.base import Family

FAMILY = Family(name="dense", role="attention", description="attention layer", proves="vLLM's Triton attention kernels",
                shape_type=attention.LayerShape, describe=attention.describe,
                matrix=lambda dtype: list(attention.FAMILY_SHAPES), order=30)
