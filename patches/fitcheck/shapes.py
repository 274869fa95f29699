"""Attention layer shapes the fit check launches (built-in Gemma 4 classes and HF config.json), and
the matrix of batches it feeds the launcher for each shape.

Pure standard library: the entrypoint and the unit tests read configs without torch.
"""
from __future__ import annotations

import dataclasses
import json
import reprlib
from dataclasses import dataclass
from pathlib import Path

from contract import devices

# vLLM's Triton backend accepts block sizes that are multiples of 16; hybrid models get a
# larger block on the layers with the smaller per-token KV size so every page has one size.
BASE_BLOCK_SIZE = 16
# A hybrid (attention + Mamba) model's attention block size is not known from config.json: vLLM sets it
# at start so that one attention page holds a Mamba state (platforms/interface.py,
# _align_hybrid_block_size: it follows the state sizes, dtypes, tensor parallelism and prefix caching).
# In vLLM 0.33.0's unified attention BLOCK_SIZE only indexes the block table on CUDA (no tile is sized
# by it: its one other use, USE_TD, is Intel's), so such a layer's verdict is keyed by this marker and
# the check launches it at HYBRID_LAUNCH_BLOCK_SIZES, the smallest block and one above any aligned one.
HYBRID_BLOCK_SIZE = 0
HYBRID_LAUNCH_BLOCK_SIZES = (BASE_BLOCK_SIZE, 2048)
GEMMA4_GLOBAL_HEAD_DIM = 512


# The layer kinds of `layer_types` that run the attention launcher; any other kind is not proven.
ATTENTION_LAYER_TYPES = ("sliding_attention", "full_attention")


class ConfigError(ValueError):
    """A model config that cannot be turned into attention shapes (exit 2)."""


class UnprovenLayers(ConfigError):
    """A model with layers that run kernels other than the attention launcher (Mamba/SSM mixers of
    hybrid models): the fit check proves only attention, so it must not say the model fits."""


# config.json fields that only hybrid state-space models carry (Nemotron-H, Jamba, Zamba, Falcon-H1,
# Granite 4 hybrids, Qwen3-Next's linear attention, LFM2's short convolutions, Kimi Linear's KDA ...).
SSM_FIELDS = ("ssm_state_size", "mamba_d_state", "mamba_num_heads", "mamba_expand", "linear_num_value_heads",
              "hybrid_override_pattern", "layers_block_type", "attn_layer_indices", "conv_L_cache",
              "linear_attn_config")


# The activations' dtype of the recorded launches: float16 by default (Turing has no bf16, and vLLM casts
# a bf16 checkpoint to it there); bfloat16 is what an Ampere GPU runs a bf16 checkpoint in.
DEFAULT_DTYPE = "float16"
DTYPES = ("float16", "bfloat16", "float32")
BF16_MIN_CC = devices.cc_number(devices.BF16_MIN_CC)


def run_dtype(config: object, cc: int, setting: str = "auto") -> str:
    """The dtype vLLM runs a model's activations in on a device of compute capability `cc` under the
    DTYPE setting (vLLM 0.33.0's config/model.py _resolve_auto_dtype): an explicit setting; else below
    8.0 float16; else the checkpoint's own dtype (`dtype`, formerly `torch_dtype`, top level or
    text_config), float32 and unknown ones going to bfloat16, the device's preferred one."""
    explicit = {"half": "float16", "float": "float32"}.get(setting, setting)
    if explicit in DTYPES:
        return explicit
    if cc < BF16_MIN_CC:
        return DEFAULT_DTYPE
    parts = [config, config.get("text_config")] if isinstance(config, dict) else []
    named = [part.get(key) for part in parts if isinstance(part, dict) for key in ("dtype", "torch_dtype")]
    checkpoint = next((value for value in named if isinstance(value, str)), None)
    return "float16" if checkpoint == "float16" else "bfloat16"


def hybrid_fields(text: dict) -> list[str]:
    """The SSM_FIELDS a (text) config carries: non-empty for a hybrid or state-space model."""
    return [name for name in SSM_FIELDS if text.get(name) is not None]


# State-space models without attention layers (vLLM's mamba.py and mamba2.py): their configs name
# their state in fields (state_size, conv_kernel) that other models use for other things.
ATTENTION_FREE_TYPES = ("mamba", "falcon_mamba", "mamba2")


def has_mixer(text: dict, model_type: object) -> bool:
    """Whether a (text) config's model has Mamba / linear-attention mixers."""
    from patches.fitcheck.mixers import KDA_TYPES, UNREAD_MIXERS

    return (model_type in ATTENTION_FREE_TYPES or model_type in UNREAD_MIXERS or model_type in KDA_TYPES
            or bool(hybrid_fields(text)))


# Attention fields that checkpoints of these model types may leave out of config.json, because
# transformers fills them in from its configuration class (Google's gemma-3-4b-it names neither
# its heads nor its head size). The class defaults of transformers 5.24, held equal to the classes
# by tests/unit/test_fitcheck_families.py.
CLASS_DEFAULTS = {
    "gemma3_text": {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096,
                    "sliding_window_pattern": 6},
    "gemma2": {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096,
               "sliding_window_pattern": 2, "attn_logit_softcapping": 50.0},
}
CLASS_DEFAULTS["gemma3"] = CLASS_DEFAULTS["gemma3_text"]  # a text_config saved without its model_type


# Models whose every attention layer is bidirectional (encoder-only): vLLM's Triton backend runs them
# through context_attention_fwd (the clamp's encoder site). These carry the standard attention fields.
ENCODER_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "nomic_bert", "modernbert")
# Encoder types whose config.json names the standard attention fields otherwise (NomicBERT's GPT-2 style
# n_head / n_embd, which vLLM's NomicBertModelConfig reads as heads and hidden size): canonical name per
# alias, taken where the canonical field is absent.
FIELD_ALIASES = {"nomic_bert": {"n_head": "num_attention_heads", "n_embd": "hidden_size"}}
# Encoder-only types whose attention the fit check does not read (yet): their configs name heads and
# windows in fields of their own, so their shapes are not known here. Each is "not proven", named.
UNREAD_ENCODER_TYPES = {
    "distilbert": "DistilBERT is a model class vLLM 0.33.0 does not have (its registry lists none), and it "
                  "names its heads n_heads / dim, which the fit check does not read",
    "deberta-v2": "DeBERTa-v2 is a model class vLLM 0.33.0 does not have (its registry lists none), and its "
                  "relative-position attention is not one vLLM's Triton kernels run",
}
# How a layer's attention reaches vLLM's Triton kernels (LayerShape.attention):
DECODER = "decoder"  # causal, paged KV cache: the unified-attention launcher
ENCODER = "encoder"  # bidirectional, encoder-only layers: context_attention_fwd via the Triton backend
MM_ENCODER = "mm-encoder"  # a multimodal tower under --mm-encoder-attn-backend TRITON_ATTN (vit wrapper)
ENCODER_KINDS = (ENCODER, MM_ENCODER)
TENSOR_PARALLEL_SIZES = (1, 2, 4)  # the per-rank shapes the built-in matrix proves


def _encoder_attention(text: dict, model_type: str | None) -> str | None:
    """Why the model's attention is bidirectional (encoder-only), None when it is causal. Gemma 4's
    `use_bidirectional_attention: "vision"` (image tokens only) runs in the launcher and is checked."""
    if text.get("use_bidirectional_attention") is True:
        return "bidirectional attention (use_bidirectional_attention: true, an embedding model)"
    if text.get("is_causal") is False:
        return "bidirectional attention (is_causal: false)"
    if model_type in ENCODER_MODEL_TYPES or model_type in UNREAD_ENCODER_TYPES:
        return f"an encoder-only model ({model_type})"
    return None


@dataclass(frozen=True)
class LayerShape:
    """One distinct attention layer kind of a model, as the attention launcher sees it."""

    model: str
    layer: str  # "sliding" or "global"
    num_query_heads: int
    num_kv_heads: int
    head_size: int
    sliding_window: int | None  # tokens, as in config.json; None = full attention
    softcap: float = 0.0
    block_size: int = BASE_BLOCK_SIZE
    # vLLM sizes its Triton backend by the whole model's KV heads (the largest over its layers),
    # not the layer's: the split-K threshold of a 16:1 global layer is that of its 8-head
    # sliding layers. 0 = this layer's own.
    model_kv_heads: int = 0
    attention: str = DECODER  # DECODER, ENCODER or MM_ENCODER: which kernel runs the layer
    tensor_parallel: int = 1  # the heads are one rank's of this tensor-parallel size

    @property
    def label(self) -> str:
        return f"{self.model}/{self.layer}"

    @property
    def queries_per_kv(self) -> int:
        return self.num_query_heads // self.num_kv_heads

    @property
    def seq_threshold_3d(self) -> int:
        return seq_threshold_3d(self.model_kv_heads or self.num_kv_heads)


def rank_heads(heads: int, kv_heads: int, tensor_parallel: int, where: str = "the model") -> tuple[int, int]:
    """(query heads, KV heads) one rank holds under tensor parallelism, as vLLM splits them: the query
    heads evenly, the KV heads evenly when there are at least as many as ranks, else each rank holds
    one replicated KV head (vLLM's QKVParallelLinear). ConfigError where vLLM refuses the split."""
    if heads % tensor_parallel:
        raise ConfigError(f"{where}: {heads} attention heads do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    if kv_heads >= tensor_parallel and kv_heads % tensor_parallel:
        raise ConfigError(f"{where}: {kv_heads} KV heads do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {kv_heads}")
    return heads // tensor_parallel, max(1, kv_heads // tensor_parallel)


def model_shapes(model: str, layers: list[tuple], softcap: float = 0.0, attention: str = DECODER,
                 tensor_parallel: int = 1, where: str = "the model") -> list[LayerShape]:
    """Layer kinds (layer, heads, kv_heads, head_size, window) -> one rank's shapes with unified
    page size (the page is sized by the rank's KV heads, as vLLM's KV cache of that rank is)."""
    layers = [(layer, *rank_heads(heads, kv_heads, tensor_parallel, where), head, window)
              for layer, heads, kv_heads, head, window in layers]
    per_token = [kv_heads * head for _, _, kv_heads, head, _ in layers]
    largest = max(per_token)
    model_kv_heads = max(kv_heads for _, _, kv_heads, _, _ in layers)
    encoder = attention in ENCODER_KINDS  # no KV cache pages, no softcap in context_attention_fwd
    shapes = []
    for (layer, heads, kv_heads, head, window), size in zip(layers, per_token):
        scale = largest // size if largest % size == 0 and not encoder else 1
        shapes.append(LayerShape(model, layer, heads, kv_heads, head, window, 0.0 if encoder else softcap,
                                 BASE_BLOCK_SIZE * scale, model_kv_heads, attention, tensor_parallel))
    return shapes


def _positive_int(config: dict, key: str, where: str, default=None) -> int:
    value = config.get(key)
    value = default if value is None else value  # transformers writes null for "derive it"
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: '{key}' is {reprlib.repr(value)}, expected a positive integer")
    return value


def shapes_from_config(config: object, model: str, where: str, tensor_parallel: int = 1) -> list[LayerShape]:
    """The distinct attention layer kinds of a HF config dict (text_config honoured), as one rank of
    `tensor_parallel` ranks holds them."""
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: top level is {type(config).__name__}, expected a JSON object")
    text = config.get("text_config", config)
    if not isinstance(text, dict):
        raise ConfigError(f"{where}: 'text_config' is {type(text).__name__}, expected a JSON object")
    model_type = text.get("model_type") or config.get("model_type")
    text = {**CLASS_DEFAULTS.get(model_type, {}), **text}
    for alias, canonical in FIELD_ALIASES.get(model_type, {}).items():
        if text.get(canonical) is None and alias in text:
            text[canonical] = text[alias]
    if model_type == "modernbert":
        text = _modernbert_layers(text, where)
    hybrid = has_mixer(text, model_type)
    if hybrid:
        from patches.fitcheck import mixers

        mixers.mixer_shape(text, model_type, model, where, tensor_parallel)  # UnprovenLayers unless read
        if model_type in ATTENTION_FREE_TYPES:
            return []
        # The mixer's layers are not attention layers: the attention ones are full attention, their
        # block size aligned by vLLM to the Mamba page at start (HYBRID_BLOCK_SIZE).
        text = {key: value for key, value in text.items() if key != "layer_types"}  # mixer / attention names
        if text.get("head_dim") is None and text.get("attention_head_dim") is not None:
            text["head_dim"] = text["attention_head_dim"]  # Zamba 2's shared attention block
    encoder = _encoder_attention(text, model_type)
    if model_type in UNREAD_ENCODER_TYPES:
        raise UnprovenLayers(
            f"{where}: {encoder}: {UNREAD_ENCODER_TYPES[model_type]}, so its encoder attention launches "
            "(context_attention_fwd) are not known to the fit check")
    if text.get("kv_lora_rank") is not None:  # every attention layer is latent: mixers.MlaShape
        from patches.fitcheck import mixers

        mixers.mla_shape(text, model, where, tensor_parallel)
        if isinstance(text.get("layer_types"), list):
            _attention_kinds_only([str(kind) for kind in text["layer_types"]], where)
        return []
    heads = _positive_int(text, "num_attention_heads", where)
    kv_heads = _positive_int(text, "num_key_value_heads", where, heads)
    head_dim = _positive_int(text, "head_dim", where, _derived_head_dim(text, heads, where))
    window = text.get("sliding_window")
    if text.get("use_sliding_window") is False:
        window = None  # Qwen2 configs name a window they do not use; vLLM ignores it too
    if window is not None:
        window = _positive_int(text, "sliding_window", where)
    layer_types = text.get("layer_types")
    pattern = text.get("sliding_window_pattern")  # Gemma 3 configs before layer_types: every Nth is full
    if layer_types is None and window and isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 1:
        layer_types = ["sliding_attention"] * (pattern - 1) + ["full_attention"]
    if layer_types is None:
        layer_types = ["sliding_attention" if window else "full_attention"]
    if not isinstance(layer_types, list) or not layer_types or not all(isinstance(t, str) for t in layer_types):
        raise ConfigError(
            f"{where}: 'layer_types' is {reprlib.repr(layer_types)}, expected a non-empty list of "
            "'sliding_attention' / 'full_attention'"
        )
    _attention_kinds_only(layer_types, where)
    if "sliding_attention" in layer_types and window is None:
        raise ConfigError(f"{where}: sliding layers without 'sliding_window', expected a positive integer")
    softcap = text.get("attn_logit_softcapping") or 0.0
    if not isinstance(softcap, (int, float)) or isinstance(softcap, bool) or softcap < 0:
        raise ConfigError(f"{where}: 'attn_logit_softcapping' is {reprlib.repr(softcap)}, expected a number >= 0")

    base = {"num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim}
    if "per_layer_config" in text:
        layers = _per_layer_kinds(text["per_layer_config"], layer_types, base, window, where)
    else:
        layers = _global_field_kinds(text, layer_types, base, window, where)
    for _, layer_heads, layer_kv, _, _ in layers:
        if layer_heads % layer_kv:
            raise ConfigError(
                f"{where}: {layer_heads} attention heads are not a multiple of {layer_kv} KV heads"
            )
    shapes = model_shapes(model, layers, float(softcap), ENCODER if encoder else DECODER, tensor_parallel, where)
    if hybrid:
        shapes = [dataclasses.replace(shape, block_size=HYBRID_BLOCK_SIZE) for shape in shapes]
    return shapes


# transformers' ModernBertConfig defaults: a local window of 128 tokens, every third layer global
MODERNBERT_DEFAULTS = {"local_attention": 128, "global_attn_every_n_layers": 3}


def _modernbert_layers(text: dict, where: str) -> dict:
    """A ModernBERT config with the window vLLM's modernbert.py gives its local layers (ModernBertConfig's
    sliding_window, local_attention // 2, plus one: the boundary is inclusive) and its layer kinds
    (`layer_types`, else every `global_attn_every_n_layers`-th layer global from the first)."""
    local = _positive_int(text, "local_attention", where, MODERNBERT_DEFAULTS["local_attention"])
    layer_types = text.get("layer_types")
    if layer_types is None:
        every = _positive_int(text, "global_attn_every_n_layers", where, MODERNBERT_DEFAULTS["global_attn_every_n_layers"])
        layers = _positive_int(text, "num_hidden_layers", where, every)
        layer_types = ["sliding_attention" if i % every else "full_attention" for i in range(layers)]
    return {**text, "sliding_window": local // 2 + 1, "layer_types": layer_types}


def _attention_kinds_only(layer_types: list, where: str) -> None:
    """UnprovenLayers when `layer_types` names kinds other than attention (linear attention, convolutions,
    ...: kernels other than the attention launcher's)."""
    others = sorted(set(layer_types) - set(ATTENTION_LAYER_TYPES))
    if others:
        counted = ", ".join(f"{reprlib.repr(kind)} ({layer_types.count(kind)} of {len(layer_types)})" for kind in others[:3])
        more = f" and {len(others) - 3} more kinds" if len(others) > 3 else ""
        raise UnprovenLayers(f"{where}: 'layer_types' names layers that are not attention: {counted}{more}; "
                             "the fit check does not record their kernels")


def _global_field_kinds(text: dict, layer_types: list, base: dict, window, where: str) -> list[tuple]:
    """Layer kinds of a config that names the global layers' values in fields of their own
    (`global_head_dim`, `num_global_key_value_heads`: what transformers wrote before 5.20)."""
    global_head, global_kv = base["head_dim"], base["num_key_value_heads"]
    if "global_head_dim" in text or text.get("model_type", "").startswith("gemma4"):
        global_head = _positive_int(text, "global_head_dim", where, GEMMA4_GLOBAL_HEAD_DIM)
    # Transformers' Gemma 4 config gives global layers their own KV heads when
    # attention_k_eq_v holds (or the flag is absent).
    if text.get("num_global_key_value_heads") is not None and text.get("attention_k_eq_v", True):
        global_kv = _positive_int(text, "num_global_key_value_heads", where)
    layers = []
    if "sliding_attention" in layer_types:
        layers.append(("sliding", base["num_attention_heads"], base["num_key_value_heads"], base["head_dim"], window))
    if "full_attention" in layer_types:
        layers.append(("global", base["num_attention_heads"], global_kv, global_head, None))
    return layers


def _per_layer_kinds(per_layer: object, layer_types: list, base: dict, window, where: str) -> list[tuple]:
    """Layer kinds of a config whose `per_layer_config` maps a layer's index ("05") to the fields
    it overrides (transformers 5.20 and later re-save Gemma 4 configs so)."""
    if not isinstance(per_layer, dict):
        raise ConfigError(f"{where}: 'per_layer_config' is {type(per_layer).__name__}, expected a JSON "
                          "object of layer index -> overrides")
    overrides = {}
    for key, fields in per_layer.items():
        if not str(key).isdigit() or not isinstance(fields, dict) or int(key) >= len(layer_types):
            raise ConfigError(f"{where}: 'per_layer_config' entry {reprlib.repr(key)}: {reprlib.repr(fields)}, "
                              f"expected a layer index below {len(layer_types)} mapped to a JSON object")
        overrides[int(key)] = fields
    kinds: dict[tuple, str] = {}
    for index, layer_type in enumerate(layer_types):
        fields = dict(base, **overrides.get(index, {}))
        where_layer = f"{where}: per_layer_config[{index}]"
        kind = (layer_type,
                _positive_int(fields, "num_attention_heads", where_layer),
                _positive_int(fields, "num_key_value_heads", where_layer),
                _positive_int(fields, "head_dim", where_layer))
        if kind not in kinds:
            name = "sliding" if layer_type == "sliding_attention" else "global"
            same = sum(1 for k in kinds if k[0] == layer_type)
            kinds[kind] = name if not same else f"{name}-{same + 1}"
    ordered = sorted(kinds.items(), key=lambda item: item[0][0] != "sliding_attention")
    return [(name, heads, kv, head, window if layer_type == "sliding_attention" else None)
            for (layer_type, heads, kv, head), name in ordered]


def _derived_head_dim(text: dict, heads: int, where: str):
    hidden = text.get("hidden_size")
    if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden > 0 and hidden % heads == 0:
        return hidden // heads
    return None


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
    name: shapes_from_config(config, name, f"built-in {name}") for name, config in BUILTIN_CONFIGS.items()
}
# One rank's shapes under tensor parallelism 2 and 4 (vLLM issue 36802 is TP 4 on four T4s): the
# query heads split, the KV heads split or, fewer than ranks, are replicated, so the query-per-KV
# ratio (BLOCK_M, BLOCK_Q) and the unified page size change per rank.
BUILTIN_TP_MODELS: dict[str, list[LayerShape]] = {
    f"{name}-tp{tp}": shapes_from_config(config, f"{name}-tp{tp}", f"built-in {name}", tp)
    for tp in TENSOR_PARALLEL_SIZES[1:] for name, config in BUILTIN_CONFIGS.items()
}


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


def tower_shapes(config: object, model: str, where: str) -> list[LayerShape]:
    """One MM_ENCODER shape per multimodal tower of a parsed config.json (a tower's heads are its own:
    one KV head per query head, no window); UnprovenLayers naming a tower whose head size it cannot read."""
    shapes = []
    for key, widths, counts in TOWER_FIELDS:
        tower = config.get(key) if isinstance(config, dict) else None
        if not isinstance(tower, dict):
            continue
        head = tower.get("head_dim")
        width = next((tower[f] for f in widths if tower.get(f) is not None), None)
        heads = next((tower[f] for f in counts if tower.get(f) is not None), None)
        if head is None and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, heads)):
            head = width // heads if width % heads == 0 else None
        if isinstance(head, bool) or not isinstance(head, int) or head <= 0:
            raise UnprovenLayers(f"{where}: '{key}': no head size to read ('head_dim', or {' / '.join(widths)} over "
                                 f"{' / '.join(counts)}), so its tower's encoder attention under TRITON_ATTN is unknown")
        count = heads if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0 else 1
        shapes.append(LayerShape(model, f"{key.split('_')[0]}-tower", count, count, head, None, attention=MM_ENCODER))
    return shapes


MATRICES = ("all", "attention", "gemma4")  # what the fit check runs without --model-config


def builtin_shapes(matrix: str = "all", dtype: str = DEFAULT_DTYPE) -> list:
    """The Gemma 4 classes at tensor parallel 1, 2 and 4, and with "all" the attention-only families'
    layers, the encoder layers and the hybrids' attention layers and mixers (the Mamba-2 ones of
    mixers.BUILTIN_HYBRIDS, the Mamba-1 and pure Mamba-2 models of mixers.BUILTIN_STATE_SPACE, LFM2's
    short convolutions, the gated delta nets of mixers.BUILTIN_GDN) at tensor parallel 1, 2 and 4
    too (where vLLM accepts the split);
    "attention" is "all" without the mixers, whose ops import vLLM's runtime (a bare GPU site of vLLM's
    Python files, tooling/gpu_site.py, lacks its dependencies)."""
    gemma4 = [shape for models in (BUILTIN_MODELS, BUILTIN_TP_MODELS) for shapes in models.values()
              for shape in shapes]
    if matrix == "gemma4":
        return gemma4
    from patches.fitcheck import mixers

    hybrids = []
    for name, config in mixers.BUILTIN_MIXER_MODELS.items():
        for tp in TENSOR_PARALLEL_SIZES:
            model, where = (name if tp == 1 else f"{name}-tp{tp}"), f"built-in {name}"
            try:
                hybrids += model_layers(config, model, where, tp, dtype)
            except ConfigError:
                continue  # a split vLLM refuses (heads that do not divide): nothing to prove
    if matrix == "attention":
        hybrids = [shape for shape in hybrids if not mixers.is_mixer(shape)]
    return gemma4 + FAMILY_SHAPES + ENCODER_SHAPES + hybrids


def read_config(path: str | Path) -> dict:
    """The parsed config.json at `path` (ConfigError: one-line reason)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror or error}); pass an HF config.json") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path}: not JSON ({error.msg} at line {error.lineno}); pass the model's HF config.json"
        ) from None


def model_layers(config: object, model: str, where: str, tensor_parallel: int = 1, dtype: str = DEFAULT_DTYPE) -> list:
    """One rank's attention layer shapes of a parsed config.json, its latent attention (mixers.MlaShape)
    and its mixer (a mixers.MixerShape, mixers.GdnShape, mixers.KdaShape ...) last where it has them: what
    the fit check proves for the model."""
    from patches.fitcheck import mixers

    shapes = shapes_from_config(config, model, where, tensor_parallel)
    mixer = mixers.mixer_from_config(config, model, where, tensor_parallel, dtype)
    # A hybrid whose attention is latent (Kimi Linear: KDA beside multi-head latent attention) has both
    latent = None if isinstance(mixer, (mixers.MlaShape, type(None))) else mixers.latent_attention(
        config, model, where, tensor_parallel)
    return shapes + [shape for shape in (latent, mixer) if shape]


def load_model_config(path: str | Path, tensor_parallel: int = 1, dtype: str = DEFAULT_DTYPE) -> list:
    """model_layers() of the config.json at `path` (ConfigError: one-line reason)."""
    path = Path(path)
    return model_layers(read_config(path), path.parent.name or path.stem, str(path), tensor_parallel, dtype)


# The matrix: which batches the fit check feeds the attention launcher for each layer shape.
MAX_3D_QUERY_LEN_UPSTREAM = 8  # vLLM 0.33: longest query the split-K (3D) path runs
SPEC_QUERY_LENS = tuple(range(2, MAX_3D_QUERY_LEN_UPSTREAM + 1))  # 1 + speculative tokens (MTP / EAGLE)
PREFILL_QUERY_LEN = 32  # above MAX_3D_QUERY_LEN, so the launcher takes the 2D path
CONTEXT_LEN = 48  # tokens already in the KV cache; any value > 0 exercises the same code


@dataclass(frozen=True)
class Case:
    """One call of unified_attention(): a batch shape on one layer kind."""

    shape: LayerShape
    kind: str  # prefill | decode | decode-batch | spec | mm-prefix
    query_len: int
    num_seqs: int = 1
    mm_prefix: bool = False


MIN_LAUNCH_GRID_SIZE_2D = 128  # vLLM's Triton backend


def seq_threshold_3d(num_kv_heads: int) -> int:
    """vLLM's Triton backend: batches up to this many sequences take the split-K (3D) path."""
    return max(1, MIN_LAUNCH_GRID_SIZE_2D // num_kv_heads)


ENCODER_QUERY_LEN = 64  # tokens per sequence of an encoder batch; only the grid follows it


def build_matrix(shapes: list[LayerShape], mm_prefix: bool) -> list[Case]:
    """Every call the check makes: prefill, decode (single and over the 3D threshold),
    speculative verify lengths and, where the release supports it, a multimodal prefix; an
    encoder layer is one bidirectional batch (its kernel has no decode path). A hybrid's attention
    layer runs at each of HYBRID_LAUNCH_BLOCK_SIZES (its verdict holds all of them). Mixers
    (mixers.is_mixer) are not attention: their ops are called by mixer_launches.py and gdn_launches.py."""
    cases = []
    launched = [dataclasses.replace(shape, block_size=block) for shape in shapes if isinstance(shape, LayerShape)
                for block in (HYBRID_LAUNCH_BLOCK_SIZES if shape.block_size == HYBRID_BLOCK_SIZE else (shape.block_size,))]
    for shape in launched:
        if shape.attention in ENCODER_KINDS:
            cases.append(Case(shape, shape.attention, ENCODER_QUERY_LEN, num_seqs=2))
            continue
        cases.append(Case(shape, "prefill", PREFILL_QUERY_LEN))
        cases.append(Case(shape, "decode", 1))
        cases.append(Case(shape, "decode-batch", 1, num_seqs=shape.seq_threshold_3d + 1))
        cases.extend(Case(shape, "spec", n) for n in SPEC_QUERY_LENS)
        if mm_prefix:
            cases.append(Case(shape, "mm-prefix", PREFILL_QUERY_LEN, mm_prefix=True))
    return cases
