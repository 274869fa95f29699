"""The value types of the server parser's options, as the option table records them and as the
entrypoint converts a value with them (standard library only).

argparse keeps a callable per option (`action.type`); the table needs text. `type_spec` names each
callable vLLM's parser uses (vllm/engine/arg_utils.py and the frontend's cli_args.py):

    int, float, str          the builtins
    json                     json.loads
    human_readable_int       '25.6k', '1K', '2M' ... (vLLM's own)
    human_readable_int_or_auto   the same, or 'auto' / '-1'
    union_dict_and_str       a JSON object when the value looks like one, else the text
    dataclass                a config class validated from JSON (pydantic): a JSON object; where the
                             class forbids extra keys (every vLLM 0.33.0 config does), the table also
                             records its `fields`, and a key outside them is refused as vLLM refuses it
                             (the values inside are left to vLLM's validation at start)
    optional:SPEC            '' and 'None' give None, else SPEC (vLLM's optional_type)
    parse:SPEC               SPEC, its ValueError said as vLLM's parse_type says it
    callable:NAME            anything else: recorded by name, not checked here

`converter` gives back a callable that converts a value as vLLM's does and fails where vLLM's
fails, with the same argparse message where vLLM's is argparse's own ("invalid int value: 'abc'").
A spec it does not know converts nothing (the value stays text): a newer vLLM's table is read, and
only what is known is judged.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Callable
from door import files

NAMED = ("human_readable_int", "human_readable_int_or_auto", "union_dict_and_str")


def _closure(function, name: str):
    cells = getattr(function, "__closure__", None) or ()
    free = getattr(getattr(function, "__code__", None), "co_freevars", ())
    return dict(zip(free, (cell.cell_contents for cell in cells))).get(name)


def type_spec(kind) -> str | None:
    """The table's text for an argparse `type` callable (None: no type, the value is the text)."""
    if kind is None:
        return None
    if kind in (int, float, str):
        return kind.__name__
    if kind is json.loads:
        return "json"
    name = getattr(kind, "__name__", "")
    if name in ("_optional_type", "_parse_type"):
        inner = _closure(kind, "return_type")
        if inner is not None:
            return ("optional:" if name == "_optional_type" else "parse:") + (type_spec(inner) or "str")
    if name in NAMED:
        return name
    if name == "parse_dataclass":
        return "dataclass"
    return "callable:" + (getattr(kind, "__qualname__", "") or type(kind).__name__)


def dataclass_fields(kind) -> list[str] | None:
    """The field names of the config class a `parse_dataclass` type validates into (its `cls`
    default), when that class forbids other keys; None when it does not, or is not found."""
    cls = next((value for value in (getattr(kind, "__defaults__", None) or ())
                if isinstance(value, type) and dataclasses.is_dataclass(value)), None)
    config = getattr(cls, "__pydantic_config__", None)
    if cls is None or not isinstance(config, dict) or config.get("extra") != "forbid":
        return None
    return sorted(field.name for field in dataclasses.fields(cls))


def _described(spec: str) -> str:
    """How vLLM's parse_type names the callable in its message."""
    return {"int": "<class 'int'>", "float": "<class 'float'>", "str": "<class 'str'>",
            "json": "<function loads>"}.get(spec, f"<function {spec}>")


HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    value = value.strip()
    match = HUMAN.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in DECIMAL:
            return int(float(number) * DECIMAL[suffix])
        try:
            return int(number) * BINARY[suffix]
        except ValueError:
            raise argparse.ArgumentTypeError(f"Decimals are not allowed with binary suffixes like {suffix}. "
                                             f"Did you mean to use {number}{suffix.lower()} instead?") from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def loads(value: str):
    """json.loads as argparse calls it (its message says "invalid loads value"), with JSON nested
    deeper than the parser's stack refused like any other bad JSON instead of raising past argparse."""
    try:
        return files.word_json(value)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _json_object(value: str) -> dict:
    try:
        found = files.word_json(value)
    except (ValueError, RecursionError) as error:
        raise argparse.ArgumentTypeError(f"invalid JSON ({str(error).splitlines()[0][:120]})") from None
    if not isinstance(found, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return found


def _fields_only(fields: list[str]) -> Callable:
    known = set(fields)

    def _json_object_of(value: str) -> dict:
        found = _json_object(value)
        unknown = sorted(set(found) - known)
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown key(s) {', '.join(map(repr, unknown[:3]))}; "
                                             f"this config takes {', '.join(fields[:12])}"
                                             f"{' ...' if len(fields) > 12 else ''}")
        return found
    return _json_object_of


def _parse(spec: str, inner: Callable) -> Callable:
    def _parse_type(value: str):
        try:
            return inner(value)
        except (ValueError, RecursionError):
            raise argparse.ArgumentTypeError(f"Value {value} cannot be converted to {_described(spec)}.") from None
    return _parse_type


def _optional(spec: str, inner: Callable) -> Callable:
    parse = _parse(spec, inner)

    def _optional_type(value: str):
        return None if value in ("", "None") else parse(value)
    return _optional_type


def union_dict_and_str(value: str):
    if not re.match(r"(?s)^\s*{.*}\s*$", value):
        return str(value)
    return _optional("json", loads)(value)


BASIC: dict[str, Callable] = {"int": int, "float": float, "str": str, "json": loads,
                              "human_readable_int": human_readable_int,
                              "human_readable_int_or_auto": human_readable_int_or_auto,
                              "union_dict_and_str": union_dict_and_str, "dataclass": _json_object}


def converter(spec, fields=None) -> Callable | None:
    """The callable that converts a value as the recorded type does; None where the spec is absent
    or unknown (the value is then kept as text, unjudged). `fields`: a dataclass option's keys."""
    if not isinstance(spec, str):
        return None
    if spec == "dataclass" and isinstance(fields, list) and all(isinstance(name, str) for name in fields):
        return _fields_only(fields)
    for prefix, wrap in (("optional:", _optional), ("parse:", _parse)):
        if spec.startswith(prefix):
            inner = converter(spec[len(prefix):])
            return wrap(spec[len(prefix):], inner) if inner is not None else None
    return BASIC.get(spec)
