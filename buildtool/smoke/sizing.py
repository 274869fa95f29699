"""Size each request to the context the server serves (`max_model_len` from /v1/models).

vLLM refuses (HTTP 400) a request whose max_tokens exceeds max_model_len, or whose prompt plus
max_tokens does not fit. Such a refusal says nothing about the client contract, so a check is
sent with max_tokens lowered to what fits, or not sent at all, with the reason and the fix.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

RAISE_CONTEXT = "raise MAX_MODEL_LEN (vLLM's --max-model-len) if the GPU memory allows"
# Without /tokenize: an upper bound for the chat template around a short prompt, and for one
# image or audio part (Gemma 4 spends up to 280 tokens on an image).
TEMPLATE_TOKENS = 64
MEDIA_PART_TOKENS = 300


@dataclass(frozen=True)
class Sizing:
    max_tokens: int | None       # what to send; None: the check cannot run at this context
    note: str = ""               # why it differs from the check's own max_tokens


def estimated_prompt_tokens(body: dict) -> int:
    """An upper bound on a chat body's prompt tokens, for servers without /tokenize: a byte-level
    tokenizer makes at most one token per UTF-8 byte."""
    size = TEMPLATE_TOKENS + len(json.dumps(body.get("tools") or []).encode())
    for message in body.get("messages") or []:
        content = message.get("content")
        for part in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
            size += len((part.get("text") or "").encode()) if part.get("type") == "text" else MEDIA_PART_TOKENS
    return size


def size_request(wanted: int, least: int, max_model_len: int | None, prompt_tokens: int | None) -> Sizing:
    """`wanted` max_tokens, at least `least` for the check to mean anything."""
    if max_model_len is None:
        return Sizing(wanted)
    room = max_model_len - (prompt_tokens or 0)
    if room >= wanted:
        return Sizing(wanted)
    context = f"max_model_len={max_model_len}"
    if prompt_tokens:
        context += f" leaves {max(room, 0)} tokens after the {prompt_tokens}-token prompt"
    if room < least:
        return Sizing(None, f"not runnable: {context}; this check needs at least {least} for the reply")
    return Sizing(room, f"max_tokens {wanted} lowered to {room}: {context}")
