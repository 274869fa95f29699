"""Parsed outside data: JSON (and YAML, on the host) with a size cap and a depth limit, strict UTF-8.

JSON nested 200,000 deep is refused in one line before the parser sees it: the brackets outside
strings are counted (the regular expression and bytes.translate do the scanning in C), so the
refusal costs a fraction of a parse and never a RecursionError. The parse itself is
door.files.parse_json's (strict UTF-8, a key given twice refused). Every failure is a door.problem.Problem
whose message is one line naming the input.

YAML is host-only: PyYAML is imported when load_yaml is first called, never in the image.
"""
from __future__ import annotations

import re

from door.files import parse_json, shown, size_text
from door.problem import Problem

MAX_DEPTH = 64  # no file this project reads nests deeper than a dozen levels

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(data: bytes, limit: int) -> int:
    """How deep the arrays and objects of `data` nest, counted up to `limit + 1` (then it stops)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def _bounded(data: bytes, name: str, cap: int) -> None:
    if len(data) > cap:
        raise Problem(f"{name} is {len(data)} bytes, more than the {size_text(cap)} it can be")


def load_json(data: bytes, name: str, cap: int, max_depth: int = MAX_DEPTH, unique_keys: bool = True) -> object:
    """`data` as strict UTF-8 JSON of at most `cap` bytes nested at most `max_depth` deep; Problem."""
    _bounded(data, name, cap)
    if json_depth(data, max_depth) > max_depth:
        raise Problem(f"{name} nests more than {max_depth} levels deep: not the data it should hold")
    return parse_json(data, name, unique_keys)


def load_yaml(data: bytes, name: str, cap: int, max_depth: int = MAX_DEPTH) -> object:
    """`data` as one strict UTF-8 YAML document (PyYAML's safe loader) of at most `cap` bytes nested at
    most `max_depth` deep; Problem. Host only: it imports PyYAML."""
    import yaml  # host only (not in the image): imported where it is used

    _bounded(data, name, cap)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Problem(f"{name} is not UTF-8 text (byte {error.start} is invalid)") from None

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > max_depth:
                    raise Problem(f"{name} nests more than {max_depth} levels deep: not the data it should hold")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        what = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise Problem(f"{name} is not valid YAML ({shown(str(what))}{at})") from None
    except RecursionError:
        raise Problem(f"{name} nests too deeply to be read") from None
    finally:
        loader.dispose()
