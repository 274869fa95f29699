"""Option tables (imagefacts/shape.py option_table) made here by argparse with the kinds of options
vLLM 0.33.0's server parser has and the types it gives them, for the unit tier (the image tier
judges with the image's real table)."""
from __future__ import annotations

import argparse
from typing import Callable

from hypothesis import strategies as st

from imagefacts.shape import option_table
from imagefacts.value_types import human_readable_int


def vllm_like_table() -> dict:
    """Options of the kinds vLLM 0.33.0's server parser has, with the types it gives them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--max-loras", type=int)
    parser.add_argument("--swap-space", type=float)
    parser.add_argument("--load-format", choices=["auto", "pt", "safetensors", "dummy"])
    parser.add_argument("--max-num-batched-tokens", type=human_readable_int)
    parser.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction)
    parser.add_argument("--cudagraph-capture-sizes", type=int, nargs="+")
    parser.add_argument("--port", type=int)
    parser.add_argument("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    parser.add_argument("--served-model-name", nargs="+")
    parser.add_argument("--api-key", nargs="+")
    parser.add_argument("--hf-token")
    parser.add_argument("--kv-transfer-config")
    for flag in ("--hf-overrides", "--hf-config-path", "--tokenizer", "--chat-template", "--mm-encoder-attn-backend",
                 "--attention-backend", "--compilation-config", "--download-dir", "--quantization",
                 "--tool-parser-plugin", "--generation-config", "--ssl-keyfile", "--revision", "--speculative-config"):
        parser.add_argument(flag)
    table = option_table(parser)
    spec = {"hf_overrides": "union_dict_and_str", "compilation_config": "dataclass", "kv_transfer_config": "dataclass", "chat_template": "optional:str",
            "hf_config_path": "optional:str", "tokenizer": "optional:str", "speculative_config": "optional:json"}
    for entry in table["options"]:
        if entry["dest"] in spec:
            entry["type"] = spec[entry["dest"]]
    return table


def option_words(table: dict, values: Callable[[dict], st.SearchStrategy], leave_out=("help",)) -> st.SearchStrategy:
    """One option of `table` (any of its spellings) with values drawn from values(entry): one for
    an option taking one (as `--x=v` or `--x v`), one to three for nargs + and *, none for a flag."""
    options = [entry for entry in table["options"] if entry["dest"] not in leave_out]

    @st.composite
    def draw_option(draw) -> list[str]:
        entry = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(entry["options"]))
        if entry["nargs"] == 0:
            return [flag]
        count = draw(st.integers(1, 3)) if entry["nargs"] in ("+", "*") else 1
        given = [draw(values(entry)) for _ in range(count)]
        if count == 1 and flag.startswith("--") and draw(st.booleans()):
            return [f"{flag}={given[0]}"]
        return [flag, *given]
    return draw_option()
