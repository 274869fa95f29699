"""The attention-only families vLLM serves through the unified attention launcher (Llama, Qwen, Mistral,
Phi, Gemma 2 / 3, ...), their configs read by the attention reader (attention.py)."""
from patches.fitcheck.attention import LayerShape, describe
from patches.fitcheck.family import Family

# The attention-only families vLLM serves through this launcher. vLLM's Triton backend lists no head
# sizes (it takes any head size >= 32), so the matrix takes them from the families' configs: per head
# size, the query-per-KV ratios their checkpoints use (the ratio, not the head counts, reaches the
# kernel's tiles: BLOCK_M and BLOCK_Q), full attention, and the windows that change vLLM's tile choice.
# (layer name, head size, query heads per KV head, sliding window): examples
FAMILY_LAYERS = (
    ("head64-r4", 64, 4, None),  # Llama 3.2 1B
    ("head64-r7", 64, 7, None),  # Qwen2.5 0.5B
    ("head80-r1", 80, 1, None),  # Phi-2, StableLM 2
    ("head96-r1", 96, 1, None),  # Phi-3 / Phi-3.5 mini
    ("head128-r1", 128, 1, None),  # Llama 2 7B, OLMo 2
    ("head128-r2", 128, 2, None),  # Qwen3 0.6B / 1.7B, Gemma 3 27B's global layers
    ("head128-r3", 128, 3, None),  # Llama 3.2 3B, Nemotron-Mini 4B, Minitron 4B
    ("head128-r4", 128, 4, None),  # Llama 3.x 8B, Mistral 7B v0.3 / Nemo / Small, Qwen3 4B / 8B, Phi-4
    ("head128-r5", 128, 5, None),  # Qwen2.5 14B / 32B, Qwen3 14B
    ("head128-r6", 128, 6, None),  # Qwen2.5 1.5B
    ("head128-r7", 128, 7, None),  # Qwen2.5 7B
    ("head128-r8", 128, 8, None),  # Llama 3.x 70B, Qwen2.5 3B / 72B, Qwen3 32B / 30B-A3B
    ("head128-r4-window4096", 128, 4, 4096),  # Mistral 7B v0.1
    ("head128-r2-window1024", 128, 2, 1024),  # Gemma 3 27B's sliding layers (vLLM's Gemma 3 tiles)
    ("head256-r2", 256, 2, None),  # Gemma 3 4B / 12B global layers (issue 36802's Gemma-3-4B base)
    ("head256-r4", 256, 4, None),  # Gemma 3 1B global layers
    ("head256-r8", 256, 8, None),
)
FAMILY_KV_HEADS = 2  # any count: the verdict is keyed by the ratio (table.SHAPE_FIELDS)
FAMILY_SHAPES = [LayerShape("family", name, ratio * FAMILY_KV_HEADS, FAMILY_KV_HEADS, head, window)
                 for name, head, ratio, window in FAMILY_LAYERS]

FAMILY = Family(name="dense", role="attention", description="attention layer", proves="vLLM's Triton attention kernels",
                shape_type=LayerShape, describe=describe, matrix=lambda dtype: list(FAMILY_SHAPES), order=30)
