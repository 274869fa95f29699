"""The units' serializers: YAML through PyYAML, systemd/Quadlet and env-file lines through one
value function. No unit is assembled from formatted text: every value is written by these.

YAML documents keep their explanatory comments: a document is a list of parts, each a comment,
a mapping fragment (serialized by PyYAML at the part's indent), a nested `Section`, or an `Off`
fragment (serialized the same way, then commented out, so that uncommenting gives the wiring).
`yaml_document` reads its own text back and refuses it unless it is exactly the data it was given,
so no value can add a key, a document or a tag.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import yaml

from buildtool.units.envfile import value_problem


@dataclass(frozen=True)
class Tagged:
    """A compose merge tag (`!reset`, `!override`) on a sequence or mapping."""
    tag: str
    value: list | dict


@dataclass(frozen=True)
class Section:
    """`key:` with its own parts nested under it."""
    key: str
    parts: tuple


@dataclass(frozen=True)
class Off:
    """A fragment written commented out (or, when `on`, as it is), flow style at its leaves so
    each entry is one line to uncomment."""
    fragment: dict
    on: bool = False


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)  # sequences indented under their key, as compose's docs write them


def _represent_tagged(dumper: yaml.SafeDumper, data: Tagged):
    if isinstance(data.value, dict):
        return dumper.represent_mapping(data.tag, data.value)
    return dumper.represent_sequence(data.tag, data.value)


_Dumper.add_representer(Tagged, _represent_tagged)
def _represent_str(dumper: yaml.SafeDumper, data: str):
    """A string of several lines (a file held in a ConfigMap) as a literal block, as written; PyYAML
    falls back to a quoted scalar where a block cannot hold it exactly."""
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="|")
    return yaml.SafeDumper.represent_str(dumper, data)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_multi_representer(str, _represent_str)  # typed strings (flags.ImageRef) as strings


class _Loader(yaml.SafeLoader):
    """Reads the merge tags back as Tagged, for the round-trip check."""


for _tag in ("!reset", "!override"):
    _Loader.add_constructor(_tag, lambda loader, node, tag=_tag: Tagged(tag, (
        loader.construct_sequence(node, deep=True) if isinstance(node, yaml.SequenceNode)
        else loader.construct_mapping(node, deep=True))))


def yaml_text(value, indent: int = 0, flow_leaves: bool = False) -> str:
    text = yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=math.inf,
                     default_flow_style=None if flow_leaves else False)
    return textwrap.indent(text, " " * indent)


def comment(text: str, indent: int = 0) -> str:
    """One comment line; a line break in it would end the comment and start content."""
    return " " * indent + "# " + one_line_value(text, "a comment") + "\n"


def _parts_text(parts, indent: int) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(comment(part, indent))
        elif isinstance(part, Section):
            out.append(yaml_text({part.key: None}, indent).replace(" null\n", "\n"))
            out.append(_parts_text(part.parts, indent + 2))
        elif isinstance(part, Off):
            text = "".join(yaml_text({key: value}, indent, flow_leaves=isinstance(value, (dict, list)))
                           for key, value in part.fragment.items())
            out.append(text if part.on else "".join(
                line[:indent] + "# " + line[indent:] + "\n" for line in text.splitlines()))
        else:
            out.append(yaml_text(part, indent))
    return "".join(out)


def _data(parts) -> dict:
    """The mapping the parts make; ValueError for a key given twice (YAML would keep the last one,
    silently: two services of one name would be one)."""
    data: dict = {}
    for part in parts:
        if isinstance(part, Section):
            items = [(part.key, _data(part.parts))]
        elif isinstance(part, Off):
            items = list(part.fragment.items()) if part.on else []
        elif isinstance(part, dict):
            items = list(part.items())
        else:
            items = []
        for key, value in items:
            if key in data:
                raise ValueError(f"the key {key!r} would be written twice in one mapping")
            data[key] = value
    return data


def yaml_document(parts) -> str:
    """The document's text; ValueError when it would not read back as exactly its data."""
    text = _parts_text(parts, 0)
    if yaml.load(text, Loader=_Loader) != _data(parts):
        raise ValueError("a value changed the document's structure when written as YAML")
    return text


def yaml_documents(docs: list[dict]) -> str:
    """Several documents (Kubernetes manifests), each after `---`, block style."""
    text = yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=math.inf,
                         default_flow_style=False, explicit_start=True)
    if list(yaml.safe_load_all(text)) != docs:
        raise ValueError("a value changed the manifests' structure when written as YAML")
    return text


def one_line_value(value: str, setting: str) -> str:
    """A value on one line of a unit, env file or comment: no line break, no control character."""
    if not value.isprintable():
        raise ValueError(f"{setting}: {value[:80]!r} holds a line break or a control character; "
                         "a unit's value is one line of printable characters")
    return value


def unit_value(value: str, setting: str, *, word: bool = False) -> str:
    """The one escaping of a value written as `Key=value` in a Quadlet unit (systemd syntax).
    ValueError naming `setting` for what cannot be written: a line break or control character (it
    would start a new key), white space at either end (systemd strips it), '$' (a variable to
    systemd's command lines), an empty value (it resets the key). '%' becomes '%%' (systemd's
    specifiers), so the value means itself. `word`: the key is a list of words (Environment=, which
    Quadlet splits at white space and unquotes): a value holding white space, a quote or a backslash
    is written as one quoted word, so no part of it can become another entry; otherwise a trailing
    backslash (a continuation line) is refused."""
    one_line_value(value, setting)
    if value != value.strip():
        raise ValueError(f"{setting}: {value[:80]!r} has white space at an end, which systemd and compose drop")
    if "$" in value:
        raise ValueError(f"{setting}: {value[:80]!r} holds '$', which systemd expands in the podman command "
                         "Quadlet writes and compose expands in an env file")
    if not value:
        raise ValueError(f"{setting}: an empty value resets the key in a unit; give a value")
    if word and any(c.isspace() or c in "\\\"'" for c in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'
    if value.endswith("\\"):
        raise ValueError(f"{setting}: {value[:80]!r} ends in a backslash, which continues the line")
    return value.replace("%", "%%")


def env_file_value(value: str, setting: str) -> str:
    """A value of the env file compose and podman both read (buildtool/units/envfile.py's rule);
    ValueError naming `setting` where they would read it differently."""
    if problem := value_problem(value):
        raise ValueError(f"{setting}: {value[:80]!r} {problem}")
    return value


@dataclass(frozen=True)
class Line:
    """`key=value` in a unit, the value escaped by unit_value (raw: a specifier written on purpose)."""
    key: str
    value: str
    raw_prefix: str = ""  # a systemd specifier such as %h, prepended after escaping
    word: bool = False  # one word of a list the key splits at white space (unit_value's `word`)


def unit_file(sections: list[tuple[str | None, list]]) -> str:
    """A systemd-style unit: (section or None for the leading comments, [comment str | Line])."""
    out = []
    for name, entries in sections:
        if name is not None:
            out.append(("\n" if out else "") + "[" + name + "]\n")
        for entry in entries:
            if isinstance(entry, str):
                out.append(comment(entry))
            else:
                out.append(entry.key + "=" + entry.raw_prefix + unit_value(entry.value, entry.key, word=entry.word) + "\n")
    return "".join(out)


def env_file(entries: list) -> str:
    """The env file: comments (str; "" a blank line) and (KEY, value) settings."""
    out = []
    for entry in entries:
        if isinstance(entry, str):
            out.append(comment(entry) if entry else "\n")
        else:
            key, value = entry
            out.append(key + "=" + env_file_value(value, key) + "\n")
    return "".join(out)
