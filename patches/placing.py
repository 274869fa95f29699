"""What every patch of vLLM's source shares (the Turing clamp, patches/turing_clamp; the fp16 upcast,
patches/fp16_upcast): the source parsed or refused, a runtime block read between its markers and placed
before a top-level statement or taken out again, the installed vllm package and its release found
without importing it, and the file replaced atomically.

Pure functions on source text, but for the file helpers at the end (named so). Text is spliced in at
statement boundaries (line numbers from `ast`), never regenerated with `ast.unparse`, so the rest of a
patched file stays byte-identical.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import pkgutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from contract.distributions import version_in
from door import files
from door.problem import Problem


def parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise Problem(f"the file does not parse (line {exc.lineno}: {exc.msg})") from None


@dataclass(frozen=True)
class PatchCount:
    """How often a patched file holds the patch's definition and its call, and the version it assigns."""

    definitions: int
    calls: int
    version: int | None

    @property
    def present_once(self) -> bool:
        return self.definitions == 1 and self.calls == 1

    @property
    def absent(self) -> bool:
        return self.definitions == 0 and self.calls == 0


@dataclass
class PatchReport:
    """What apply or check did to one file; `outcome` an enum member with a `label`."""

    file: str
    vllm_version: str
    outcome: object
    sha256_before: str | None
    sha256_after: str | None
    patch_version: int
    message: str

    def to_dict(self) -> dict:
        return dict(asdict(self), outcome=self.outcome.label)


def owns(stmt: ast.stmt, prefix: str) -> bool:
    """A top-level statement a patch's runtime block put there: a function or assignment named `prefix...`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name.startswith(prefix)
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) and t.id.lower().startswith(prefix) for t in stmt.targets)
    return False


def recorded_label(built: object, path: Path, sha: str | None, patch_version: int) -> str | None:
    """The outcome label of the build's apply report `built` (its JSON) when the file at `path` still holds
    the very bytes that report proved (same path, sha256 and patch version), else None (pure)."""
    if not isinstance(built, dict) or sha is None:
        return None
    if (built.get("file"), built.get("sha256_after"), built.get("patch_version")) != (str(path), sha, patch_version):
        return None
    return built.get("outcome")


def marked_block(package: str, name: str, begin: str, end: str) -> str:
    """The lines of the module `name` of `package` from the line starting with `begin` to the one starting
    with `end`, both included (the runtime block a patch copies verbatim). Read through the package's
    loader, so it reads the same from a folder (the checkout) and from the image's zip."""
    text = pkgutil.get_data(package, name).decode("utf-8")
    start = text.index(begin)
    stop = text.index(end, start)
    return text[start:text.index("\n", stop) + 1]


def newline_of(source: str) -> str:
    return "\r\n" if source.split("\n", 1)[0].endswith("\r") else "\n"


def attached_start(lines: list[str], node: ast.stmt) -> int:
    """The 0-based line where a top-level definition begins, with its decorators and the comment lines
    right above it (they introduce it and stay attached to it)."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return first


def block_text(block: str, newline: str) -> str:
    """A runtime block as it is inserted before a top-level statement: two blank lines after it."""
    return (block + "\n\n").replace("\n", newline)


def _is_comment_or_blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _marker_above(lines: list[str], start: int, begin: str) -> int:
    """The begin marker's index when only comments separate it from start, else start."""
    i = start
    while i > 0 and _is_comment_or_blank(lines[i - 1]):
        i -= 1
        if lines[i].startswith(begin):
            return i
    return start


def _marker_below(lines: list[str], end: int, end_marker: str) -> int:
    """Past the end marker and the two blank lines block_text put after it."""
    i = end
    while i < len(lines) and _is_comment_or_blank(lines[i]):
        i += 1
        if lines[i - 1].startswith(end_marker):
            blank = 0
            while blank < 2 and i < len(lines) and not lines[i].strip():
                i, blank = i + 1, blank + 1
            return i
    return end


def block_lines(lines: list[str], own: list[ast.stmt], begin: str, end: str) -> range:
    """The 0-based lines a placed runtime block holds: its own top-level statements `own` (in order)
    with the marker lines around them; empty when there are none."""
    if not own:
        return range(0)
    start = _marker_above(lines, own[0].lineno - 1, begin)
    stop = _marker_below(lines, own[-1].end_lineno, end)
    return range(start, stop)


def without(lines: list[str], drop: Iterable[int]) -> str:
    dropped = set(drop)
    return "".join(line for i, line in enumerate(lines) if i not in dropped)


# --- files (effects) ---

def sha256(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def sha256_of(path: Path | str) -> str | None:
    try:
        return sha256(files.read_own_bytes(path))
    except OSError:
        return None


def installed_vllm() -> Path | None:
    """The vllm package folder of the Python running this, found without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def vllm_version_at(path: Path | str, in_package: Path) -> str:
    """The release from the dist-info METADATA next to the vllm package holding `path` (the file
    `in_package` of it), else 'unknown'."""
    parts = Path(path).resolve().parts
    tail = ("vllm",) + Path(in_package).parts
    if parts[-len(tail):] != tail:
        return "unknown"
    return version_in(Path(*parts[:-len(tail)]), "vllm") or "unknown"


def write_atomic(path: Path, text: str, refusal: Callable[[str, str], Exception]) -> bytes:
    """Replace the file atomically, keeping its mode and owner; nothing changes on failure, which
    raises refusal(what went wrong, what to do)."""
    mode = path.stat()
    if not mode.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise refusal(f"the file is read-only (mode {mode.st_mode & 0o777:o})",
                      "make it writable or patch at image build time")
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode.st_mode & 0o7777)
        if hasattr(os, "chown") and os.geteuid() == 0:
            os.chown(tmp, mode.st_uid, mode.st_gid)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise refusal(f"cannot write it ({exc.strerror})", "make the file and its folder writable") from None
    return data
