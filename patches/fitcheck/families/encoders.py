"""Encoder (bidirectional) attention: encoder-only and embedding models through the Triton backend, and
multimodal towers under --mm-encoder-attn-backend TRITON_ATTN (attention.ENCODER_LAYERS, tower_shapes)."""
from patches.fitcheck import attention
from patches.fitcheck.base import Family

FAMILY = Family(name="encoders", role="attention", description="encoder attention layer",
                shape_type=attention.LayerShape, describe=attention.describe,
                matrix=lambda dtype: list(attention.ENCODER_SHAPES), order=40)
