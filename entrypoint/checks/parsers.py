"""Parsers: TOOL_CALL_PARSER and REASONING_PARSER against the model's config.json. Gemma 4's parsers
on another model parse nothing (tool calls stay text); a Gemma 4 model without them answers a
request with tools with HTTP 400 ("auto" tool choice requires --tool-call-parser)."""
from __future__ import annotations

from contract.model_config import ModelConfig
from contract.verdict import Result, passed, skipped, warned

from door.files import shown
from .model import Resolved

NAME = "parsers"
# vLLM 0.33.0's registered names (vllm/tool_parsers and vllm/reasoning): both "gemma4".
GEMMA4_PARSERS = {"TOOL_CALL_PARSER": "gemma4", "REASONING_PARSER": "gemma4"}
NAME_PARSERS = "list this model's parsers with `vllm serve --help=Frontend` (--tool-call-parser, --reasoning-parser)"


def is_gemma4(config: ModelConfig) -> bool:
    return any(kind.startswith("gemma4") for kind in (config.model_type, config.text_model_type)) or \
        any(name.startswith("Gemma4") for name in config.architectures)


def judge_parsers(parsers: dict[str, str | None], model: Resolved) -> Result:
    """`parsers`: TOOL_CALL_PARSER and REASONING_PARSER as set (None when unset)."""
    if model.found is None or model.found.typed is None:
        return skipped(NAME, "not judged: the model's config.json was not read (see the model check)")
    config, path = model.found.typed, shown(model.found.path)
    settings = ", ".join(f"{name}={value}" for name, value in GEMMA4_PARSERS.items())
    if is_gemma4(config):
        unset = [name for name, value in GEMMA4_PARSERS.items() if parsers.get(name) is None]
        if unset:
            return warned(NAME, f"{path} is Gemma 4 but {' and '.join(unset)} "
                                f"{'is' if len(unset) == 1 else 'are'} not set: requests with tools answer "
                                "HTTP 400 and reasoning stays in the answer text", f"set {settings}")
        return passed(NAME, f"{path} is Gemma 4; {settings}")
    foreign = [name for name, value in GEMMA4_PARSERS.items() if parsers.get(name) == value]
    if foreign:
        return warned(NAME, f"{' and '.join(f'{name}={GEMMA4_PARSERS[name]}' for name in foreign)} "
                            f"{'is' if len(foreign) == 1 else 'are'} Gemma 4's, but {path} is "
                            f"{shown(config.kind)}: its tool calls and reasoning will not be parsed",
                      f"set {' and '.join(foreign)} to this model's parsers or leave them empty; {NAME_PARSERS}")
    return passed(NAME, f"{path} is {shown(config.kind)}; parsers as set")
