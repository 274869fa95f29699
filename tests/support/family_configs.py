"""config.json files of attention-only model families, made by transformers' own configuration
classes with the attention numbers of a published checkpoint of each (the rest are class defaults).

Each entry also names the fit check's family layer (patches/fitcheck/families/dense.py, FAMILY_LAYERS)
whose verdict must answer for it: same head size, query-per-KV ratio and window, other head counts.
"""
from __future__ import annotations

import json
from pathlib import Path

# name: (transformers class, keyword arguments, fields the Hub file carries that the class drops,
#        the family layer that covers it)
MODELS = {
    "llama-3.1-8b": ("LlamaConfig", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                         num_hidden_layers=32), {}, "head128-r4"),
    "llama-3.2-1b": ("LlamaConfig", dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                                         head_dim=64, num_hidden_layers=16), {}, "head64-r4"),
    # Qwen2.5's files name a window they do not use (use_sliding_window false); transformers 5 drops it.
    "qwen2.5-7b": ("Qwen2Config", dict(hidden_size=3584, num_attention_heads=28, num_key_value_heads=4,
                                       num_hidden_layers=28, use_sliding_window=False),
                   {"sliding_window": 131072, "max_window_layers": 28}, "head128-r7"),
    "qwen2.5-0.5b": ("Qwen2Config", dict(hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
                                         num_hidden_layers=24, use_sliding_window=False),
                     {"sliding_window": 32768, "max_window_layers": 21}, "head64-r7"),
    "qwen3-8b": ("Qwen3Config", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                     num_hidden_layers=36), {}, "head128-r4"),
    "mistral-7b-v0.1": ("MistralConfig", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                              num_hidden_layers=32, sliding_window=4096), {},
                        "head128-r4-window4096"),
    "mistral-7b-v0.3": ("MistralConfig", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                              num_hidden_layers=32, sliding_window=None), {}, "head128-r4"),
    "nemotron-mini-4b": ("NemotronConfig", dict(hidden_size=3072, num_attention_heads=24, num_key_value_heads=8,
                                                head_dim=128, num_hidden_layers=32), {}, "head128-r3"),
}


# Encoder (bidirectional) models vLLM runs through context_attention_fwd: name -> (class, keyword
# arguments, Hub-only fields, the matrix's encoder layers that cover it; patches/fitcheck/families/encoders.py ENCODER_LAYERS)
ENCODER_MODELS = {
    # google/embeddinggemma-300m: 3 query / 1 KV heads of 256, 512-token window, bidirectional
    "embeddinggemma-300m": ("Gemma3TextConfig", dict(hidden_size=768, num_hidden_layers=24, num_attention_heads=3,
                                                     num_key_value_heads=1, head_dim=256, sliding_window=512,
                                                     use_bidirectional_attention=True), {},
                            ("encoder-head256-r3-window512", "encoder-head256-r3")),
    "bert-base-uncased": ("BertConfig", dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=12), {},
                          ("encoder-head64-r1",)),
    "xlm-roberta-large": ("XLMRobertaConfig", dict(hidden_size=1024, num_attention_heads=16, num_hidden_layers=24),
                          {}, ("encoder-head64-r1",)),
    "modernbert-base": ("ModernBertConfig", dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=22), {},
                        ("encoder-head64-r1-window65", "encoder-head64-r1")),
    # nomic-ai/nomic-embed-text-v1.5: remote code (NomicBertConfig, GPT-2 field names), so a plain
    # PretrainedConfig carrying the Hub file's fields
    "nomic-embed-text-v1.5": ("PretrainedConfig", {}, dict(
        model_type="nomic_bert", architectures=["NomicBertModel"], n_embd=768, n_head=12, n_layer=12, n_inner=3072,
        rotary_emb_fraction=1.0, causal=False, activation_function="swiglu", qkv_proj_bias=False),
        ("encoder-head64-r1",)),
}


# Hybrid and state-space models: name -> (class, keyword arguments with the numbers of the matrix's
# model of that name (patches/fitcheck/families builtin_models()),
# Hub-only fields, that model's name).
HYBRID_MODELS = {
    "nemotron-h-8b": ("NemotronHConfig", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                              head_dim=128, mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128,
                                              n_groups=8, chunk_size=128, conv_kernel=4), {}, "nemotron-h-8b"),
    "granite-4.0-h-tiny": ("GraniteMoeHybridConfig", dict(hidden_size=1536, num_attention_heads=12,
                                                          num_key_value_heads=4, mamba_n_heads=48, mamba_d_head=64,
                                                          mamba_d_state=128, mamba_n_groups=1, mamba_chunk_size=256,
                                                          mamba_d_conv=4), {}, "granite-4.0-h-tiny"),
    "falcon-h1-1.5b": ("FalconH1Config", dict(hidden_size=1024, num_attention_heads=8, num_key_value_heads=2,
                                              head_dim=128, mamba_n_heads=24, mamba_d_head=64, mamba_d_ssm=1536,
                                              mamba_d_state=256, mamba_n_groups=1, mamba_chunk_size=256,
                                              mamba_d_conv=4, mamba_rms_norm=True), {}, "falcon-h1-1.5b"),
    # gated delta net hybrids (families/gated_delta_net.py BUILTIN_GDN): Qwen3-Next's own class, Qwen3.5's multimodal ones
    "qwen3-next-80b-a3b": ("Qwen3NextConfig", dict(num_attention_heads=16, num_key_value_heads=2, head_dim=256,
                                                   linear_num_key_heads=16, linear_num_value_heads=32), {},
                           "qwen3-next-80b-a3b"),
    "qwen3.5-35b-a3b": ("Qwen3_5MoeConfig", dict(text_config=dict(num_attention_heads=16, num_key_value_heads=2,
                                                                  head_dim=256, linear_num_key_heads=16,
                                                                  linear_num_value_heads=32)), {}, "qwen3.5-35b-a3b"),
    "qwen3.5-27b": ("Qwen3_5Config", dict(text_config=dict(num_attention_heads=24, num_key_value_heads=4, head_dim=256,
                                                           linear_num_key_heads=16, linear_num_value_heads=48,
                                                           mamba_ssm_dtype="float32")), {}, "qwen3.5-27b"),
    # Mamba-1 and pure Mamba-2 models (families/mamba1.py BUILTIN_MAMBA1, families/mamba2.py BUILTIN_STATE_SPACE_MAMBA2)
    "jamba-v0.1": ("JambaConfig", dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                       mamba_d_state=16, mamba_d_conv=4, mamba_expand=2), {}, "jamba-v0.1"),
    "falcon-mamba-7b": ("FalconMambaConfig", dict(hidden_size=4096, intermediate_size=8192, state_size=16,
                                                  conv_kernel=4), {}, "falcon-mamba-7b"),
    "mamba-2.8b": ("MambaConfig", dict(hidden_size=2560, intermediate_size=5120, state_size=16, conv_kernel=4), {},
                   "mamba-2.8b"),
    "mamba-codestral-7b": ("Mamba2Config", dict(hidden_size=4096, num_heads=128, head_dim=64, state_size=128,
                                                n_groups=8, chunk_size=256, conv_kernel=4), {}, "mamba-codestral-7b"),
    # LFM2 (families/short_conv.py BUILTIN_SHORT_CONV): LiquidAI's checkpoints add conv_dim, which transformers' class lacks
    "lfm2-1.2b": ("Lfm2Config", dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                                     num_hidden_layers=16, full_attn_idxs=[2, 5, 8, 10, 12, 14]), {"conv_dim": 2048},
                  "lfm2-1.2b"),
    "lfm2-700m": ("Lfm2Config", dict(hidden_size=1536, num_attention_heads=24, num_key_value_heads=8,
                                     num_hidden_layers=16, full_attn_idxs=[2, 5, 8, 10, 12, 14]), {"conv_dim": 1536},
                  "lfm2-700m"),
    "lfm2-8b-a1b": ("Lfm2MoeConfig", dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                                          num_hidden_layers=24, layer_types=["conv", "conv", "full_attention"] * 8),
                    {}, "lfm2-8b-a1b"),
}


# Models with multi-head latent attention: name -> (class, keyword arguments with the numbers of the
# matrix's model of that name (patches/fitcheck/families/mla.py BUILTIN_MLA), Hub-only fields, that name).
MLA_MODELS = {
    "deepseek-v2-lite": ("DeepseekV2Config", dict(num_attention_heads=16, kv_lora_rank=512, qk_rope_head_dim=64,
                                                  qk_nope_head_dim=128, v_head_dim=128), {}, "deepseek-v2-lite"),
    "glm-4.7-flash": ("Glm4MoeLiteConfig", dict(num_attention_heads=20, kv_lora_rank=512, qk_rope_head_dim=64,
                                                qk_nope_head_dim=192, v_head_dim=256), {}, "glm-4.7-flash"),
}


def config_dict(name: str) -> dict:
    import transformers

    cls, kwargs, hub_fields, _ = (MODELS.get(name) or ENCODER_MODELS.get(name) or HYBRID_MODELS.get(name)
                                  or MLA_MODELS[name])
    return dict(getattr(transformers, cls)(**kwargs).to_dict(), **hub_fields)


def save_model_dir(name: str, folder: Path) -> Path:
    """Writes the model's config.json into folder; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(config_dict(name), indent=1))
    return path
