"""Gemma 4 config.json files made by transformers' own configuration classes, as a checkpoint's
config.json is: the text config of each variant built with the keyword arguments transformers'
conversion scripts give it (models/gemma4/convert_gemma4_weights.py, and for the 12B
models/gemma4_unified/convert_gemma4_unified_weights.py; attention fields only, the rest are
the class defaults), wrapped in the multimodal config the scripts save.

Two forms: `per_layer_config` (what transformers 5.20 and later write: the global layers'
head width and KV heads as per-layer overrides) and `old` (what earlier releases wrote:
`global_head_dim` and `num_global_key_value_heads` fields), derived from the same object.
"""
from __future__ import annotations

import json
from pathlib import Path

from tooling.gemma4_towers import TOWERS

SLIDING, FULL = "sliding_attention", "full_attention"

# variant: (unified class?, text config keyword arguments of the conversion script)
VARIANTS = {
    "gemma4-e2b": (False, dict(num_hidden_layers=35, layer_types=([SLIDING] * 4 + [FULL]) * 7,
                               num_attention_heads=8, num_key_value_heads=1, num_global_key_value_heads=None,
                               attention_k_eq_v=False, num_kv_shared_layers=20)),
    "gemma4-e4b": (False, dict(num_hidden_layers=42, layer_types=([SLIDING] * 5 + [FULL]) * 7,
                               num_attention_heads=8, num_key_value_heads=2, num_global_key_value_heads=None,
                               global_head_dim=512, attention_k_eq_v=False, num_kv_shared_layers=18)),
    "gemma4-12b": (True, dict(num_hidden_layers=48, layer_types=([SLIDING] * 5 + [FULL]) * 8,
                              num_attention_heads=16, num_key_value_heads=8, num_global_key_value_heads=1,
                              attention_k_eq_v=True, num_kv_shared_layers=0)),
    "gemma4-26b-a4b": (False, dict(num_hidden_layers=30, layer_types=([SLIDING] * 5 + [FULL]) * 5,
                                   num_attention_heads=16, num_key_value_heads=8, num_global_key_value_heads=2,
                                   attention_k_eq_v=True, num_kv_shared_layers=0, sliding_window=1024)),
    "gemma4-31b": (False, dict(num_hidden_layers=60, layer_types=([SLIDING] * 5 + [FULL]) * 10,
                               num_attention_heads=32, num_key_value_heads=16, num_global_key_value_heads=4,
                               attention_k_eq_v=True, num_kv_shared_layers=0, sliding_window=1024)),
}
FORMS = ("per_layer_config", "old")
CHECKPOINTS = {"gemma4-e2b": "gemma-4-E2B-it", "gemma4-e4b": "gemma-4-E4B-it", "gemma4-12b": "gemma-4-12B-it",
               "gemma4-26b-a4b": "gemma-4-26B-A4B-it", "gemma4-31b": "gemma-4-31B-it"}


def config_object(variant: str, towers: bool = False):
    """The multimodal config object (Gemma4Config, or Gemma4UnifiedConfig for the 12B); with
    `towers`, the audio and vision configs the published checkpoint carries."""
    import transformers

    unified, text = VARIANTS[variant]
    prefix = "Gemma4Unified" if unified else "Gemma4"
    text_config = getattr(transformers, f"{prefix}TextConfig")(**text)
    kwargs = {f"{kind}_config": getattr(transformers, f"{prefix}{kind.title()}Config")(**fields)
              for kind, fields in (TOWERS[variant].items() if towers else ())}
    return getattr(transformers, f"{prefix}Config")(text_config=text_config, **kwargs)


def old_form(config: dict) -> dict:
    """The config as transformers before 5.20 wrote it: the global layers' overrides as the fields
    `global_head_dim` / `num_global_key_value_heads` in place of `per_layer_config`."""
    text = dict(config["text_config"])
    overrides = list(text.pop("per_layer_config").values())
    assert all(o == overrides[0] for o in overrides), "one kind of global layer"
    text["global_head_dim"] = overrides[0]["head_dim"]
    if overrides[0].get("num_key_value_heads") is not None:
        text["num_global_key_value_heads"] = overrides[0]["num_key_value_heads"]
    return dict(config, text_config=text)


def config_dict(variant: str, form: str = "per_layer_config") -> dict:
    config = json.loads(json.dumps(config_object(variant).to_dict()))  # as config.json holds it
    return config if form == "per_layer_config" else old_form(config)


def save_model_dir(variant: str, folder: Path, form: str = "per_layer_config", towers: bool = False) -> Path:
    """A model folder whose config.json save_pretrained wrote (then rewritten into `form`)."""
    config_object(variant, towers).save_pretrained(folder)
    path = folder / "config.json"
    if form != "per_layer_config":
        path.write_text(json.dumps(old_form(json.loads(path.read_text())), indent=2))
    return path


def published_model_dir(variant: str, root: Path) -> Path:
    """What a doc's or a test's model folder stands for: the variant's published config.json (towers
    included) and one small real safetensors shard, in root/<checkpoint name>."""
    from tests.support.model_files import write_tensors

    folder = root / CHECKPOINTS[variant]
    folder.mkdir(parents=True)
    save_model_dir(variant, folder, towers=True)
    write_tensors(folder / "model.safetensors", {"model.language_model.embed_tokens.weight": ("BF16", [1024, 64])})
    return folder
