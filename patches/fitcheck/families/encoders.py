"""Encoder (bidirectional) attention: encoder-only and embedding models through the Triton backend (their
configs read by the attention reader, attention.py), and multimodal towers under
--mm-encoder-attn-backend TRITON_ATTN (tower_shapes)."""
from __future__ import annotations

from contract.model_config import ModelConfig
from patches.fitcheck.attention import ENCODER, MM_ENCODER, LayerShape, describe
from patches.fitcheck.family import Family, UnprovenLayers

# Encoder (bidirectional) attention: what reaches vLLM's context_attention_fwd. ENCODER layers are
# encoder-only and embedding models through the Triton backend (TritonAttentionImpl: window
# (w - 1, w - 1) or none); MM_ENCODER layers are multimodal towers under
# `--mm-encoder-attn-backend TRITON_ATTN` (vit_attn_wrappers: no window, one KV head per query head).
# (layer name, head size, query heads per KV head, sliding window, attention): examples
ENCODER_LAYERS = (
    ("encoder-head64-r1", 64, 1, None, ENCODER),  # BERT base / large, RoBERTa, XLM-R, MiniLM, BGE, E5, NomicBERT
    ("encoder-head64-r1-window65", 64, 1, 65, ENCODER),  # ModernBERT base / large local layers (128-token window)
    ("encoder-head256-r3-window512", 256, 3, 512, ENCODER),  # EmbeddingGemma 300M sliding layers (3 / 1 heads)
    ("encoder-head256-r3", 256, 3, None, ENCODER),  # EmbeddingGemma 300M full-attention layers
    # no checkpoint we know; the largest head the kernel takes here, so the clamp's head-512 tile is proven
    ("encoder-head512-r8", 512, 8, None, ENCODER),  # a bidirectional Gemma 4 global layer (E2B-like 8 / 1)
    ("mm-encoder-head64", 64, 1, None, MM_ENCODER),  # Gemma 4 E2B / E4B vision tower, SigLIP base
    ("mm-encoder-head72", 72, 1, None, MM_ENCODER),  # Gemma 4 26B / 31B vision tower (SigLIP so400m)
    ("mm-encoder-head80", 80, 1, None, MM_ENCODER),  # Qwen2-VL / Qwen2.5-VL vision tower
    ("mm-encoder-head128", 128, 1, None, MM_ENCODER),  # Gemma 4 audio tower (8 heads of 128)
)
ENCODER_KV_HEADS = 2  # any count: the verdict is keyed by the ratio, as for the families
ENCODER_SHAPES = [LayerShape("encoder", name, ratio * ENCODER_KV_HEADS, ENCODER_KV_HEADS, head, window,
                             attention=attention)
                  for name, head, ratio, window, attention in ENCODER_LAYERS]
# The multimodal towers a config describes, which run the encoder kernel under
# `--mm-encoder-attn-backend TRITON_ATTN` (MM_ENCODER): (config field, the tower's width fields, its
# head-count fields), first present wins. Qwen2-VL's vision `hidden_size` is the language model's and its
# own width is `embed_dim`; the others name their width `hidden_size`.
TOWER_FIELDS = (("vision_config", ("embed_dim", "hidden_size"), ("num_heads", "num_attention_heads")),
                ("audio_config", ("hidden_size",), ("num_attention_heads", "num_heads")))
BUILTIN_TOWER_HEADS = tuple(head for _, head, _, _, kind in ENCODER_LAYERS if kind == MM_ENCODER)


def tower_shapes(config: ModelConfig, model: str, where: str) -> list[LayerShape]:
    """One MM_ENCODER shape per multimodal tower of a model's config (a tower's heads are its own: one KV
    head per query head, no window); UnprovenLayers naming a tower whose head size it cannot read."""
    shapes = []
    for key, widths, counts in TOWER_FIELDS:
        tower = config.top.object(key)
        if tower is None:
            continue
        head = tower.value("head_dim")
        width = next((tower.value(f) for f in widths if tower.has(f)), None)
        heads = next((tower.value(f) for f in counts if tower.has(f)), None)
        if head is None and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, heads)):
            head = width // heads if width % heads == 0 else None
        if isinstance(head, bool) or not isinstance(head, int) or head <= 0:
            raise UnprovenLayers(f"{where}: '{key}': no head size to read ('head_dim', or {' / '.join(widths)} over "
                                 f"{' / '.join(counts)}), so its tower's encoder attention under TRITON_ATTN is unknown")
        count = heads if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0 else 1
        shapes.append(LayerShape(model, f"{key.split('_')[0]}-tower", count, count, head, None, attention=MM_ENCODER))
    return shapes


FAMILY = Family(name="encoders", role="attention", description="encoder attention layer", shape_type=LayerShape,
                describe=describe, matrix=lambda dtype: list(ENCODER_SHAPES), order=40)
