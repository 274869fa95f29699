"""The one way the preflight reads a file it was handed (a model folder's config.json, index,
safetensors headers, .bin tails, the HF cache's refs/main): never blocking, never reading more
than a cap, never anything but a regular file.

The type is checked twice: os.stat before the open (a FIFO, device, socket or directory, or a
symlink leading to one or looping, is refused without being opened) and fstat on the opened
descriptor (a file swapped in between is caught). The open itself is O_NONBLOCK, so even a FIFO
swapped in after the stat does not block the open; reads then stop at the cap. Every failure is a
door.problem.Problem whose message is one line naming the file."""
from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Iterator

from door.problem import Problem


MiB = 2**20
JSON_CAP = 4 * MiB        # config.json and the small text files around it
INDEX_CAP = 16 * MiB      # a weight index lists every tensor: the largest MoE indexes are a few MiB
HEADER_CAP = 16 * MiB     # a safetensors header (the safetensors library stops at 100 MB)
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
         (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))

def json_kind(value: object) -> str:
    """How a JSON value is called in messages: `a list`, `null`, `the string "8"`, `true`, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {json.dumps(value[:40])}"  # ASCII: control and other characters escaped
    if isinstance(value, (int, float)):
        text = repr(value)
        return f"the number {text if len(text) <= 24 else text[:12] + '...(' + str(len(text)) + ' digits)'}"
    return {list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def shown(text: str) -> str:
    """`text` safe for a one-line report: control and other unprintable characters escaped."""
    return text if text.isprintable() else text.encode("unicode_escape", "backslashreplace").decode("ascii")


def kind(mode: int) -> str:
    for test, name in KINDS:
        if test(mode):
            return name
    return "neither a file nor a directory"


def _stat(path: str, name: str) -> os.stat_result:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise Problem(f"{name} is a symlink to a missing file ({shown(os.readlink(path))})") from None
        raise Problem(f"{name} does not exist") from None
    except OSError as error:  # ELOOP (a symlink loop), EACCES, ENAMETOOLONG, ...
        raise Problem(f"{name} cannot be read ({error.strerror or error})") from None
    except ValueError:  # an embedded NUL byte
        raise Problem(f"{name} is not a usable path (it holds a NUL byte)") from None
    if not stat.S_ISREG(found.st_mode):
        raise Problem(f"{name} is {kind(found.st_mode)}, not a regular file")
    return found


@contextlib.contextmanager
def opened(path: str, name: str) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of the regular file at `path`, opened without blocking; `name` is how
    messages call it. Raises Problem."""
    _stat(path, name)
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as error:
        raise Problem(f"{name} cannot be opened ({error.strerror or error})") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise Problem(f"{name} is {kind(found.st_mode)}, not a regular file (it changed while read)")
        yield fd, found.st_size
    finally:
        os.close(fd)


def read_at(fd: int, offset: int, length: int, name: str) -> bytes:
    """Up to `length` bytes at `offset` (fewer at the end of the file)."""
    chunks, got = [], 0
    while got < length:
        try:
            chunk = os.pread(fd, min(length - got, MiB), offset + got)
        except OSError as error:  # EAGAIN, EIO, ...
            raise Problem(f"{name} cannot be read ({error.strerror or error})") from None
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def size_text(count: int) -> str:
    return f"{count // MiB} MiB" if count >= MiB else f"{count // 1024} KiB"


def read_bytes(path: str, name: str, cap: int = JSON_CAP) -> bytes:
    """The whole file, refused (Problem) when it is empty or larger than `cap`."""
    with opened(path, name) as (fd, size):
        if size > cap:
            raise Problem(f"{name} is {size} bytes, more than the {size_text(cap)} such a file can be")
        data = read_at(fd, 0, cap + 1, name)
    if len(data) > cap:
        raise Problem(f"{name} grew past {size_text(cap)} while it was read")
    if not data.strip():
        raise Problem(f"{name} is empty")
    return data


def _unique_keys(name: str):
    """json's object_pairs_hook refusing a key given twice in one object (Problem naming it)."""
    def hook(pairs: list[tuple[str, object]]) -> dict:
        found = dict(pairs)
        if len(found) != len(pairs):
            seen = set()
            twice = next(key for key, _ in pairs if key in seen or seen.add(key))
            raise Problem(f"{name} gives the key {shown(twice)!r} twice in one object")
        return found
    return hook


def parse_json(data: bytes, name: str, unique_keys: bool = True) -> object:
    """`data` as strict UTF-8 JSON; with `unique_keys` a key given twice in one object is refused
    (a hand edit above the original is silently lost). Machine-written files (safetensors headers,
    indexes: thousands of objects on every start) skip that check, which costs a Python call per object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Problem(f"{name} is not UTF-8 text (byte {error.start} is invalid)") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(name)) if unique_keys else json.loads(text)
    except RecursionError:
        raise Problem(f"{name} is nested too deeply to be a model file") from None
    except ValueError as error:  # JSONDecodeError, an integer of more than 4300 digits
        raise Problem(f"{name} is not valid JSON ({shown(str(error).splitlines()[0])})") from None


def read_json(path: str, name: str, cap: int = JSON_CAP, unique_keys: bool = True) -> object:
    return parse_json(read_bytes(path, name, cap), name, unique_keys)


def read_object(path: str, name: str, cap: int = JSON_CAP, unique_keys: bool = True) -> dict:
    """A JSON file whose top level must be an object."""
    found = read_json(path, name, cap, unique_keys)
    if not isinstance(found, dict):
        raise Problem(f"{name} holds {json_kind(found)}, not a JSON object")
    return found


# The trust a call relies on, named where it is made (tests/unit/test_door.py counts every other
# json.loads, open or read_text outside door/ as outside data read around the door).

WORD_CAP = MiB  # a JSON value given in one flag or environment variable (argv holds at most 2 MiB in all)


def word_json(text: str | bytes) -> object:
    """JSON a user wrote in one word: a flag's value or an environment variable. ValueError (as
    json.loads raises it) when it is not JSON, larger than WORD_CAP or nested past the parser's
    stack, so that callers refuse it in their own words, naming the flag."""
    if len(text) > WORD_CAP:
        raise ValueError(f"{len(text)} characters, more than the {size_text(WORD_CAP)} one value can be")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def own_json(data: str | bytes) -> object:
    """JSON this project wrote itself: the report a child of its own code printed, a table or record
    committed in this repository, a file it wrote earlier in the same run. Not outside data, so
    neither capped nor typed here; ValueError as json.loads raises it."""
    return json.loads(data)


def read_own(path: "str | os.PathLike[str]") -> str:
    """A text file of this repository (committed), of the software the image was built with (torch's
    version.py), or one this project wrote itself (a child's report, an iidfile, its own event
    log): read whole as UTF-8. Never a path a user or a server named."""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def read_own_bytes(path: "str | os.PathLike[str]") -> bytes:
    """read_own's bytes."""
    with open(path, "rb") as handle:
        return handle.read()


def read_text(path: str, name: str, cap: int = JSON_CAP) -> str:
    """read_bytes as strict UTF-8 text (Problem naming the file when it is not)."""
    data = read_bytes(path, name, cap)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Problem(f"{name} is not UTF-8 text (byte {error.start} is invalid)") from None


SYSTEM_CAP = MiB


def read_system(path: str, cap: int = SYSTEM_CAP) -> str | None:
    """A file of the system the program runs on, as the kernel or the host's administrator wrote it
    (/proc, /sys, a cgroup, /etc/apt): at most `cap` bytes, opened without blocking, undecodable
    bytes replaced; None where it is absent or unreadable. (Their size is 0 until read: no stat cap.)"""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, got = [], 0
        while got < cap:
            chunk = os.read(fd, min(cap - got, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")
