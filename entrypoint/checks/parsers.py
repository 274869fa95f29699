"""Parsers: TOOL_CALL_PARSER and REASONING_PARSER against the model's config.json. Gemma 4's parsers
on another model parse nothing (tool calls stay text); a Gemma 4 model without them answers a
request with tools with HTTP 400 ("auto" tool choice requires --tool-call-parser)."""
from __future__ import annotations

from contract.verdict import Result, passed, skipped, warned
from .model import Resolved

NAME = "parsers"
# vLLM 0.33.0's registered names (vllm/tool_parsers and vllm/reasoning): both "gemma4".
GEMMA4_PARSERS = {"TOOL_CALL_PARSER": "gemma4", "REASONING_PARSER": "gemma4"}
NAME_PARSERS = "list this model's parsers with `vllm serve --help=Frontend` (--tool-call-parser, --reasoning-parser)"


def is_gemma4(config: dict) -> bool:
    text_config = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    model_types = (str(config.get("model_type", "")), str(text_config.get("model_type", "")))
    architectures = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    return any(kind.startswith("gemma4") for kind in model_types) or \
        any(str(name).startswith("Gemma4") for name in architectures)


def model_kind(config: dict) -> str:
    return str(config.get("model_type") or (config.get("architectures") or ["an unknown model"])[0])


def judge_parsers(parsers: dict[str, str | None], model: Resolved) -> Result:
    """`parsers`: TOOL_CALL_PARSER and REASONING_PARSER as set (None when unset)."""
    if model.found is None:
        return skipped(NAME, "not judged: the model's config.json was not read (see the model check)")
    gemma4 = is_gemma4(model.found.config)
    settings = ", ".join(f"{name}={value}" for name, value in GEMMA4_PARSERS.items())
    if gemma4:
        unset = [name for name, value in GEMMA4_PARSERS.items() if parsers.get(name) is None]
        if unset:
            return warned(NAME, f"{model.found.path} is Gemma 4 but {' and '.join(unset)} "
                                f"{'is' if len(unset) == 1 else 'are'} not set: requests with tools answer "
                                "HTTP 400 and reasoning stays in the answer text", f"set {settings}")
        return passed(NAME, f"{model.found.path} is Gemma 4; {settings}")
    foreign = [name for name, value in GEMMA4_PARSERS.items() if parsers.get(name) == value]
    if foreign:
        return warned(NAME, f"{' and '.join(f'{name}={GEMMA4_PARSERS[name]}' for name in foreign)} "
                            f"{'is' if len(foreign) == 1 else 'are'} Gemma 4's, but {model.found.path} is "
                            f"{model_kind(model.found.config)}: its tool calls and reasoning will not be parsed",
                      f"set {' and '.join(foreign)} to this model's parsers or leave them empty; {NAME_PARSERS}")
    return passed(NAME, f"{model.found.path} is {model_kind(model.found.config)}; parsers as set")
