"""The one way the preflight reads a file it was handed (a model folder's config.json, index,
safetensors headers, .bin tails, the HF cache's refs/main): never blocking, never reading more
than a cap, never anything but a regular file.

The type is checked twice: os.stat before the open (a FIFO, device, socket or directory, or a
symlink leading to one or looping, is refused without being opened) and fstat on the opened
descriptor (a file swapped in between is caught). The open itself is O_NONBLOCK, so even a FIFO
swapped in after the stat does not block the open; reads then stop at the cap. Every failure is a
FileProblem whose message is one line naming the file."""
from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Iterator

from contract.model_config import json_kind  # noqa: F401 (this module's name for it too)

MiB = 2**20
JSON_CAP = 4 * MiB        # config.json and the small text files around it
INDEX_CAP = 16 * MiB      # a weight index lists every tensor: the largest MoE indexes are a few MiB
HEADER_CAP = 16 * MiB     # a safetensors header (the safetensors library stops at 100 MB)
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
         (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class FileProblem(Exception):
    """Why a file cannot be used, in one line that names it."""


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
            raise FileProblem(f"{name} is a symlink to a missing file ({shown(os.readlink(path))})") from None
        raise FileProblem(f"{name} does not exist") from None
    except OSError as error:  # ELOOP (a symlink loop), EACCES, ENAMETOOLONG, ...
        raise FileProblem(f"{name} cannot be read ({error.strerror or error})") from None
    except ValueError:  # an embedded NUL byte
        raise FileProblem(f"{name} is not a usable path (it holds a NUL byte)") from None
    if not stat.S_ISREG(found.st_mode):
        raise FileProblem(f"{name} is {kind(found.st_mode)}, not a regular file")
    return found


@contextlib.contextmanager
def opened(path: str, name: str) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of the regular file at `path`, opened without blocking; `name` is how
    messages call it. Raises FileProblem."""
    _stat(path, name)
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as error:
        raise FileProblem(f"{name} cannot be opened ({error.strerror or error})") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise FileProblem(f"{name} is {kind(found.st_mode)}, not a regular file (it changed while read)")
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
            raise FileProblem(f"{name} cannot be read ({error.strerror or error})") from None
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def size_text(count: int) -> str:
    return f"{count // MiB} MiB" if count >= MiB else f"{count // 1024} KiB"


def read_bytes(path: str, name: str, cap: int = JSON_CAP) -> bytes:
    """The whole file, refused (FileProblem) when it is empty or larger than `cap`."""
    with opened(path, name) as (fd, size):
        if size > cap:
            raise FileProblem(f"{name} is {size} bytes, more than the {size_text(cap)} such a file can be")
        data = read_at(fd, 0, cap + 1, name)
    if len(data) > cap:
        raise FileProblem(f"{name} grew past {size_text(cap)} while it was read")
    if not data.strip():
        raise FileProblem(f"{name} is empty")
    return data


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _Duplicate(twice)
    return found


class _Duplicate(ValueError):
    pass


def parse_json(data: bytes, name: str, unique_keys: bool = True) -> object:
    """`data` as strict UTF-8 JSON; with `unique_keys` a key given twice in one object is refused
    (a hand edit above the original is silently lost). Machine-written files (safetensors headers,
    indexes: thousands of objects on every start) skip that check, which costs a Python call per object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileProblem(f"{name} is not UTF-8 text (byte {error.start} is invalid)") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys) if unique_keys else json.loads(text)
    except _Duplicate as error:
        raise FileProblem(f"{name} gives the key {shown(str(error))!r} twice in one object") from None
    except RecursionError:
        raise FileProblem(f"{name} is nested too deeply to be a model file") from None
    except ValueError as error:  # JSONDecodeError, an integer of more than 4300 digits
        raise FileProblem(f"{name} is not valid JSON ({shown(str(error).splitlines()[0])})") from None


def read_json(path: str, name: str, cap: int = JSON_CAP, unique_keys: bool = True) -> object:
    return parse_json(read_bytes(path, name, cap), name, unique_keys)


def read_object(path: str, name: str, cap: int = JSON_CAP, unique_keys: bool = True) -> dict:
    """A JSON file whose top level must be an object."""
    found = read_json(path, name, cap, unique_keys)
    if not isinstance(found, dict):
        raise FileProblem(f"{name} holds {json_kind(found)}, not a JSON object")
    return found
