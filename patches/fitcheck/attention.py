"""Attention layer shapes the fit check launches, read from a model's typed config (its text section), and
the matrix of batches it feeds the launcher for each shape. Which families a model has, their fixed shapes
and the matrix's models are the registry's (families/).

Pure standard library: the entrypoint and the unit tests read configs without torch.
"""
from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import dataclass
from pathlib import Path

from contract.model_config import ConfigProblem, ModelConfig, Section, parse_config
from patches.fitcheck.family import BF16_MIN_CC, DEFAULT_DTYPE, DTYPES, UnprovenLayers  # noqa: F401
from door import files
from door.problem import Problem

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


# config.json fields that only hybrid state-space models carry (Nemotron-H, Jamba, Zamba, Falcon-H1,
# Granite 4 hybrids, Qwen3-Next's linear attention, LFM2's short convolutions, Kimi Linear's KDA ...).
SSM_FIELDS = ("ssm_state_size", "mamba_d_state", "mamba_num_heads", "mamba_expand", "linear_num_value_heads",
              "hybrid_override_pattern", "layers_block_type", "attn_layer_indices", "conv_L_cache",
              "linear_attn_config")


def run_dtype(config: ModelConfig | None, cc: int, setting: str = "auto") -> str:
    """The dtype vLLM runs a model's activations in on a device of compute capability `cc` under the
    DTYPE setting (vLLM 0.33.0's config/model.py _resolve_auto_dtype): an explicit setting; else below
    8.0 float16; else the checkpoint's own dtype (`dtype`, formerly `torch_dtype`, top level or
    text_config), float32 and unknown ones going to bfloat16, the device's preferred one."""
    explicit = {"half": "float16", "float": "float32"}.get(setting, setting)
    if explicit in DTYPES:
        return explicit
    if cc < BF16_MIN_CC:
        return DEFAULT_DTYPE
    parts = [] if config is None else [config.top] + ([config.text] if config.text is not config.top else [])
    named = [part.value(key) for part in parts for key in ("dtype", "torch_dtype")]
    checkpoint = next((value for value in named if isinstance(value, str)), None)
    return "float16" if checkpoint == "float16" else "bfloat16"


def hybrid_fields(text: Section) -> list[str]:
    """The SSM_FIELDS a text section carries: non-empty for a hybrid or state-space model."""
    return [name for name in SSM_FIELDS if text.has(name)]


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


def _encoder_attention(text: Section, model_type: str) -> str | None:
    """Why the model's attention is bidirectional (encoder-only), None when it is causal. Gemma 4's
    `use_bidirectional_attention: "vision"` (image tokens only) runs in the launcher and is checked."""
    if text.value("use_bidirectional_attention") is True:
        return "bidirectional attention (use_bidirectional_attention: true, an embedding model)"
    if text.value("is_causal") is False:
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
    one replicated KV head (vLLM's QKVParallelLinear). ConfigProblem where vLLM refuses the split."""
    if heads % tensor_parallel:
        raise ConfigProblem(f"{where}: {heads} attention heads do not split over tensor parallel size "
                          f"{tensor_parallel}; vLLM refuses it: pick a TENSOR_PARALLEL_SIZE that divides {heads}")
    if kv_heads >= tensor_parallel and kv_heads % tensor_parallel:
        raise ConfigProblem(f"{where}: {kv_heads} KV heads do not split over tensor parallel size "
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


def text_section(config: ModelConfig) -> tuple[Section, str]:
    """A model's text section as the attention readers take it, and its model type: the model class's
    defaults under the file's values, field aliases resolved, ModernBERT's layers derived."""
    model_type = config.type_of_text
    text = config.text.under(CLASS_DEFAULTS.get(model_type, {}))
    for alias, canonical in FIELD_ALIASES.get(model_type, {}).items():
        if not text.has(canonical) and alias in text.keys():
            text = text.with_values(**{canonical: text.value(alias)})
    if model_type == "modernbert":
        text = _modernbert_layers(text)
    return text, model_type


def hybrid_attention(text: Section) -> Section:
    """The text section of a hybrid model as its attention layers see it: the mixer's layers are not
    attention layers, so `layer_types` (mixer / attention names) is left out and the attention ones are
    full attention, their block size aligned by vLLM to the Mamba page at start (HYBRID_BLOCK_SIZE)."""
    text = text.with_values(layer_types=None)
    if not text.has("head_dim") and text.has("attention_head_dim"):
        text = text.with_values(head_dim=text.positive_int("attention_head_dim"))  # Zamba 2's shared block
    return text


def refuse_unread_encoder(text: Section, model_type: str) -> None:
    """UnprovenLayers for an encoder-only type whose attention fields the check does not read."""
    if model_type in UNREAD_ENCODER_TYPES:
        raise UnprovenLayers(
            f"{text.where}: {_encoder_attention(text, model_type)}: {UNREAD_ENCODER_TYPES[model_type]}, so its "
            "encoder attention launches (context_attention_fwd) are not known to the fit check")


def attention_kinds_only(text: Section) -> None:
    """UnprovenLayers when the section's `layer_types` names kinds other than attention."""
    layer_types = text.strings("layer_types")
    if layer_types is not None:
        _attention_kinds_only(list(layer_types), text.where)


def attention_shapes(text: Section, model_type: str, model: str, tensor_parallel: int = 1,
                     hybrid: bool = False) -> list[LayerShape]:
    """The distinct attention layer kinds of a text section (text_section's; a hybrid's through
    hybrid_attention), as one rank of `tensor_parallel` ranks holds them."""
    where = text.where
    encoder = _encoder_attention(text, model_type)
    heads = text.positive_int("num_attention_heads")
    kv_heads = text.positive_int("num_key_value_heads", heads)
    head_dim = text.positive_int("head_dim", _derived_head_dim(text, heads))
    window = None
    if text.value("use_sliding_window") is not False:  # Qwen2 configs name a window they do not use; vLLM too
        window = text.optional_int("sliding_window")
    layer_types = text.strings("layer_types", "a non-empty list of 'sliding_attention' / 'full_attention'")
    pattern = text.count("sliding_window_pattern", 0)  # Gemma 3 configs before layer_types: every Nth is full
    if layer_types is None and window and pattern > 1:
        layer_types = ["sliding_attention"] * (pattern - 1) + ["full_attention"]
    if layer_types is None:
        layer_types = ["sliding_attention" if window else "full_attention"]
    if not layer_types:
        raise text.problem("layer_types", "a non-empty list of 'sliding_attention' / 'full_attention'")
    layer_types = list(layer_types)
    _attention_kinds_only(layer_types, where)
    if "sliding_attention" in layer_types and window is None:
        raise ConfigProblem(f"{where}: sliding layers without 'sliding_window', expected a positive integer")
    softcap = text.number("attn_logit_softcapping", 0.0, inclusive=True)

    base = {"num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim}
    per_layer = text.object("per_layer_config")
    if per_layer is not None:
        layers = _per_layer_kinds(per_layer, layer_types, base, window)
    else:
        layers = _global_field_kinds(text, layer_types, base, window)
    for _, layer_heads, layer_kv, _, _ in layers:
        if layer_heads % layer_kv:
            raise ConfigProblem(
                f"{where}: {layer_heads} attention heads are not a multiple of {layer_kv} KV heads"
            )
    shapes = model_shapes(model, layers, float(softcap), ENCODER if encoder else DECODER, tensor_parallel, where)
    if hybrid:
        shapes = [dataclasses.replace(shape, block_size=HYBRID_BLOCK_SIZE) for shape in shapes]
    return shapes


# transformers' ModernBertConfig defaults: a local window of 128 tokens, every third layer global
MODERNBERT_DEFAULTS = {"local_attention": 128, "global_attn_every_n_layers": 3}


def _modernbert_layers(text: Section) -> Section:
    """A ModernBERT config with the window vLLM's modernbert.py gives its local layers (ModernBertConfig's
    sliding_window, local_attention // 2, plus one: the boundary is inclusive) and its layer kinds
    (`layer_types`, else every `global_attn_every_n_layers`-th layer global from the first)."""
    local = text.positive_int("local_attention", MODERNBERT_DEFAULTS["local_attention"])
    layer_types = text.strings("layer_types")
    if layer_types is None:
        every = text.positive_int("global_attn_every_n_layers", MODERNBERT_DEFAULTS["global_attn_every_n_layers"])
        layers = text.positive_int("num_hidden_layers", every)
        layer_types = ["sliding_attention" if i % every else "full_attention" for i in range(layers)]
    return text.with_values(sliding_window=local // 2 + 1, layer_types=list(layer_types))


def _attention_kinds_only(layer_types: list, where: str) -> None:
    """UnprovenLayers when `layer_types` names kinds other than attention (linear attention, convolutions,
    ...: kernels other than the attention launcher's)."""
    others = sorted(set(layer_types) - set(ATTENTION_LAYER_TYPES))
    if others:
        counted = ", ".join(f"{reprlib.repr(kind)} ({layer_types.count(kind)} of {len(layer_types)})" for kind in others[:3])
        more = f" and {len(others) - 3} more kinds" if len(others) > 3 else ""
        raise UnprovenLayers(f"{where}: 'layer_types' names layers that are not attention: {counted}{more}; "
                             "the fit check does not record their kernels")


def _global_field_kinds(text: Section, layer_types: list, base: dict, window) -> list[tuple]:
    """Layer kinds of a config that names the global layers' values in fields of their own
    (`global_head_dim`, `num_global_key_value_heads`: what transformers wrote before 5.20)."""
    global_head, global_kv = base["head_dim"], base["num_key_value_heads"]
    if "global_head_dim" in text.keys() or text.string("model_type").startswith("gemma4"):
        global_head = text.positive_int("global_head_dim", GEMMA4_GLOBAL_HEAD_DIM)
    # Transformers' Gemma 4 config gives global layers their own KV heads when
    # attention_k_eq_v holds (or the flag is absent).
    if text.has("num_global_key_value_heads") and text.value("attention_k_eq_v", True):
        global_kv = text.positive_int("num_global_key_value_heads")
    layers = []
    if "sliding_attention" in layer_types:
        layers.append(("sliding", base["num_attention_heads"], base["num_key_value_heads"], base["head_dim"], window))
    if "full_attention" in layer_types:
        layers.append(("global", base["num_attention_heads"], global_kv, global_head, None))
    return layers


def _per_layer_kinds(per_layer: Section, layer_types: list, base: dict, window) -> list[tuple]:
    """Layer kinds of a config whose `per_layer_config` maps a layer's index ("05") to the fields
    it overrides (transformers 5.20 and later re-save Gemma 4 configs so)."""
    overrides = {}
    for key in per_layer.keys():
        fields = per_layer.value(key)
        if not str(key).isdigit() or not isinstance(fields, dict) or int(key) >= len(layer_types):
            raise ConfigProblem(f"{per_layer.where}: 'per_layer_config' entry {reprlib.repr(key)}: {reprlib.repr(fields)}, "
                              f"expected a layer index below {len(layer_types)} mapped to a JSON object")
        overrides[int(key)] = per_layer.object(key)
    kinds: dict[tuple, str] = {}
    for index, layer_type in enumerate(layer_types):
        override = overrides.get(index)
        fields = override.under(base) if override is not None else Section(base, per_layer.prefix, per_layer.where)
        kind = (layer_type,
                fields.positive_int("num_attention_heads"),
                fields.positive_int("num_key_value_heads"),
                fields.positive_int("head_dim"))
        if kind not in kinds:
            name = "sliding" if layer_type == "sliding_attention" else "global"
            same = sum(1 for k in kinds if k[0] == layer_type)
            kinds[kind] = name if not same else f"{name}-{same + 1}"
    ordered = sorted(kinds.items(), key=lambda item: item[0][0] != "sliding_attention")
    return [(name, heads, kv, head, window if layer_type == "sliding_attention" else None)
            for (layer_type, heads, kv, head), name in ordered]


def _derived_head_dim(text: Section, heads: int):
    hidden = text.optional_int("hidden_size")
    if hidden is not None and hidden % heads == 0:
        return hidden // heads
    return None


def config_shapes(config: ModelConfig, model: str, tensor_parallel: int = 1) -> list[LayerShape]:
    """The attention shapes of a model with attention layers alone (no mixer, no latent attention)."""
    text, model_type = text_section(config)
    return attention_shapes(text, model_type, model, tensor_parallel)


def read_config(path: str | Path) -> ModelConfig:
    """The typed config.json at `path` (ConfigProblem: one-line reason naming the file)."""
    path = Path(path)
    try:  # a regular file, capped, strict UTF-8 JSON: a FIFO, a device or a deep nest is refused
        found = files.read_json(str(path), str(path))
    except Problem as problem:
        raise ConfigProblem(f"{problem}; pass the model's HF config.json") from None
    return parse_config(found, str(path))


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
    (families.is_mixer) are not attention: their ops are called by their families (families/<family>/launches.py)."""
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


def describe(shape: LayerShape) -> str:
    """What sizes an attention layer's kernels, for a miss."""
    kind = "" if shape.attention == DECODER else f"{shape.attention} attention, "
    return f"{kind}head {shape.head_size}, {shape.num_query_heads}/{shape.num_kv_heads} heads"
