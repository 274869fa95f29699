"""The env file of a server (quadlet/vllm-turing.env, each --env-file): read here, once, through the
door (door/files.py: a regular file only, capped, never blocking), and parsed by the one rule that
docker compose's `env_file` and podman's `--env-file` (Quadlet's EnvironmentFile=) read alike.

The two readers differ: compose strips a value's quotes, drops white space at its ends, reads from
` #` on as a comment and expands `$`; podman takes everything after the first `=` as it is. A line
is accepted only where both read the same bytes, so the server, the Kubernetes ConfigMap made from
this parse and the plan (buildtool/units/servers.py) all see one value:
- `KEY=value`, KEY a shell name ([A-Za-z_][A-Za-z0-9_]*) right before the `=`; blank lines and lines
  whose first non-blank character is `#` are comments to both;
- the value is printable (no tab, no control character), has no white space at either end, does not
  start with a quote (`"`, `'`, or a backquote), holds no ` #` and no `$`. Quotes inside a value
  (`--override-generation-config {"temperature": 0.5}`) and backslashes are read literally by both;
- a key is given once; the file is UTF-8 without a byte-order mark, with LF line ends.
Everything else is refused in one line naming the file, the line and what to write instead. The same
rule judges what the renderers write (buildtool/units/serialize.py `env_file`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from door.files import read_bytes, shown
from door.problem import Problem, UsageError

# podman reads an env file with Go's bufio.Scanner, which refuses a line over 64 KiB; the file
# is a few dozen settings.
ENV_FILE_CAP = 64 * 1024
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
QUOTES = "\"'`"
BOM = b"\xef\xbb\xbf"


def value_problem(value: str) -> str | None:
    """Why compose's env_file and podman's --env-file would not both read `value` as itself; None
    when they do."""
    if not value.isprintable():
        return "holds a tab, a line break or another control character; write the value on one line without them"
    if value != value.strip():
        return "has white space at an end, which compose drops and podman keeps; remove it"
    if value and value[0] in QUOTES:
        return ("starts with a quote, which compose strips and podman keeps; write the value without quotes "
                "(an env file needs none)")
    if " #" in value:
        return "holds ' #', from which compose reads a comment and podman the value; remove the space before '#'"
    if "$" in value:
        return "holds '$', which compose expands as a variable and podman does not; remove it"
    return None


def parse(text: str, name: str) -> dict[str, str]:
    """KEY=value lines, refused (UsageError) where compose and podman would read them differently."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), 1):
        body = line.lstrip(" ")
        if not body.strip(" ") or body.startswith("#"):
            continue
        where = f"{name} line {number}"
        key, equals, value = body.partition("=")
        if not equals or not KEY.fullmatch(key):
            raise UsageError(f"{where}: {shown(line[:60])!r} is not KEY=value (a shell name, '=', the value); "
                                 "fix or comment out that line")
        if problem := value_problem(value):
            raise UsageError(f"{where}: {key}={shown(value[:60])!r} {problem}")
        if key in values:
            raise UsageError(f"{where}: {key} is given again (first on line {lines[key]}); keep one")
        values[key], lines[key] = value, number
    return values


def decode(data: bytes, name: str) -> str:
    """The file's text: UTF-8 without a byte-order mark, LF line ends (UsageError otherwise)."""
    if data.startswith(BOM):
        raise UsageError(f"{name} starts with a byte-order mark, which compose and podman read into the first "
                             "key; save it as UTF-8 without BOM")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{name} is not UTF-8 text (byte {error.start} is invalid); save it as UTF-8") from None
    if "\r" in text:
        raise UsageError(f"{name} has CR (Windows) line ends, which compose and podman read differently; "
                             "save it with LF line ends (dos2unix)")
    return text


@dataclass(frozen=True)
class EnvFile:
    name: str  # as the user named it
    text: str  # copied beside the units as it is
    values: dict[str, str]


def read(path: Path, name: str) -> EnvFile:
    """The env file at `path` read through the door and parsed; UsageError (exit 2) in one line naming `name` (and the line), with the fix."""
    try:
        data = read_bytes(str(path), name, cap=ENV_FILE_CAP)
    except Problem as problem:
        raise UsageError(f"{problem}; give a regular file of KEY=value lines") from None
    text = decode(data, name)
    return EnvFile(name, text, parse(text, name))
