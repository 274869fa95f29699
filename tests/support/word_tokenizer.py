"""A real, tiny Hugging Face tokenizer written to a folder: one token per whitespace-separated
word ("w0" .. "wN"), so prompt lengths in tokens can be counted by splitting the text.
transformers' AutoTokenizer loads it offline (PreTrainedTokenizerFast over tokenizer.json)."""
from __future__ import annotations

import json
import pathlib

UNK = "[UNK]"


def write_word_tokenizer(folder: pathlib.Path, vocab_size: int = 1000) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {UNK: 0, **{f"w{i}": i + 1 for i in range(vocab_size - 1)}}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": UNK, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNK, "model_max_length": 1_000_000}))
    # vLLM reads the model config next to a tokenizer; a minimal one spares its retries
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": vocab_size}))
    return folder
