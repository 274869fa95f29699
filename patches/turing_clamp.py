"""The Turing clamp: places a shared-memory-sized tile choice into vLLM's attention launcher.

    python -m patches.turing_clamp apply|check|show [--target PATH] [--json]

apply: 0 applied / already / skipped (upstream), 2 refused (nothing written).
check: 0 present once (or upstream), 1 absent or outdated, 2 error.
show:  prints the unified diff apply would make (empty when there is nothing to do).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from patches.clamp_placement import (
    PATCH_VERSION,
    PlacementError,
    count_clamp,
    insert_clamp,
    parse,
    sizes_from_shared_memory,
    strip_clamp,
)

TARGET_IN_PACKAGE = Path("v1/attention/ops/triton_unified_attention.py")
REINSTALL = "reinstall vLLM (`pip install --force-reinstall --no-deps vllm==VERSION`)"

__all__ = ["ClampError", "ClampReport", "apply", "check", "find_target", "show", "strip_clamp"]


class ClampError(Exception):
    """A refusal: the message names the file, the vLLM version and what was not found."""


@dataclass
class ClampReport:
    file: str
    vllm_version: str
    outcome: str
    sha256_before: str | None
    sha256_after: str | None
    patch_version: int
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def find_target() -> Path:
    """vLLM's launcher file in the Python running this, found without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ClampError(
            f"vLLM is not installed for {sys.executable}; expected the vllm package; "
            "install it or pass --target PATH"
        )
    return Path(list(spec.submodule_search_locations)[0]) / TARGET_IN_PACKAGE


def vllm_version_of(path: Path) -> str:
    """The release from the dist-info METADATA next to the vllm package, else 'unknown'."""
    parts = Path(path).resolve().parts
    tail = ("vllm",) + TARGET_IN_PACKAGE.parts
    if parts[-len(tail):] != tail:
        return "unknown"
    site = Path(*parts[:-len(tail)])
    metadata = sorted(site.glob("vllm-*.dist-info/METADATA"))
    if len(metadata) != 1:
        return "unknown"
    for line in metadata[0].read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
        if not line.strip():
            break
    return "unknown"


def _sha256(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


@dataclass
class _State:
    """A target read once: its bytes, text, version and what apply would write."""

    path: Path
    version: str
    data: bytes
    source: str

    def report(self, outcome: str, message: str, after: bytes | None = None) -> ClampReport:
        return ClampReport(str(self.path), self.version, outcome, _sha256(self.data),
                           _sha256(after if after is not None else self.data), PATCH_VERSION, message)

    def refusal(self, what: str, todo: str = REINSTALL) -> ClampError:
        todo = todo.replace("VERSION", self.version if self.version != "unknown" else "X")
        return ClampError(f"{self.path} (vLLM {self.version}): {what}; nothing was written; {todo}")


def _read(path: Path | str) -> _State:
    path = Path(path)
    version = vllm_version_of(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ClampError(
            f"{path} (vLLM {version}): cannot read it ({exc.strerror}); expected vLLM's "
            f"{TARGET_IN_PACKAGE.name}; pass --target PATH to the right file"
        ) from None
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _State(path, version, data, "").refusal("the file is not UTF-8 text") from None
    return _State(path, version, data, source)


def _planned(state: _State) -> tuple[str, str]:
    """(outcome, new source) apply would produce, or ClampError when it must refuse."""
    try:
        tree = parse(state.source)
        if sizes_from_shared_memory(tree):
            return "skipped", state.source
        count = count_clamp(tree)
        if count.present_once and count.version == PATCH_VERSION:
            return "already", state.source
        if not (count.present_once or count.absent):
            raise PlacementError(
                f"found {count.definitions} clamp definitions and {count.calls} clamp calls; "
                "expected none or one of each"
            )
        return "applied", insert_clamp(strip_clamp(state.source))
    except PlacementError as exc:
        raise state.refusal(str(exc)) from None


MESSAGES = {
    "applied": "clamp v{v} placed in the attention launcher",
    "already": "clamp v{v} already present; file unchanged",
    "skipped": "upstream already sizes tiles from shared memory; file unchanged",
}


def _write(state: _State, text: str) -> bytes:
    """Replace the file atomically, keeping its mode and owner; nothing changes on failure."""
    mode = state.path.stat()
    if not mode.st_mode & 0o222 or not os.access(state.path, os.W_OK):
        raise state.refusal(f"the file is read-only (mode {mode.st_mode & 0o777:o})",
                            "make it writable or patch at image build time")
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{state.path.name}.", dir=state.path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode.st_mode & 0o7777)
        if hasattr(os, "chown") and os.geteuid() == 0:
            os.chown(tmp, mode.st_uid, mode.st_gid)
        os.replace(tmp, state.path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise state.refusal(f"cannot write it ({exc.strerror})",
                            "make the file and its folder writable") from None
    return data


def apply(path: Path | str) -> ClampReport:
    """Place the clamp in path; a refusal comes back as outcome 'refused'."""
    try:
        state = _read(path)
        outcome, text = _planned(state)
        if outcome != "applied":
            return state.report(outcome, MESSAGES[outcome].format(v=PATCH_VERSION))
        written = _write(state, text)
        return state.report(outcome, MESSAGES[outcome].format(v=PATCH_VERSION), written)
    except ClampError as exc:
        return ClampReport(str(path), vllm_version_of(Path(path)), "refused", _sha256_of(path),
                           _sha256_of(path), PATCH_VERSION, str(exc))


def _sha256_of(path: Path | str) -> str | None:
    try:
        return _sha256(Path(path).read_bytes())
    except OSError:
        return None


def check(path: Path | str) -> ClampReport:
    """Structural check: outcome present / upstream / absent / outdated / error."""
    try:
        state = _read(path)
        tree = parse(state.source)
    except (ClampError, PlacementError) as exc:
        return ClampReport(str(path), vllm_version_of(Path(path)), "error", _sha256_of(path),
                           _sha256_of(path), PATCH_VERSION, str(exc))
    count = count_clamp(tree)
    if sizes_from_shared_memory(tree):
        outcome, message = "upstream", "upstream already sizes tiles from shared memory"
    elif count.present_once and count.version == PATCH_VERSION:
        outcome, message = "present", f"clamp v{PATCH_VERSION} present once"
    elif count.present_once:
        found = f"v{count.version}" if count.version is not None else "of an unknown version"
        outcome, message = "outdated", (f"clamp {found} present, this is v{PATCH_VERSION}; "
                                        "run `python -m patches.turing_clamp apply`")
    elif count.absent:
        outcome, message = "absent", "no clamp; run `python -m patches.turing_clamp apply`"
    else:
        outcome, message = "error", (f"{count.definitions} clamp definitions and {count.calls} "
                                     f"clamp calls, expected one each; {REINSTALL}")
    return state.report(outcome, message)


def show(path: Path | str) -> str:
    """The unified diff apply would make; empty when there is nothing to do."""
    state = _read(path)
    _, text = _planned(state)
    return "".join(difflib.unified_diff(
        state.source.splitlines(keepends=True), text.splitlines(keepends=True),
        fromfile=f"{state.path} (vLLM {state.version})", tofile=f"{state.path} (clamped)",
    ))


APPLY_EXIT = {"applied": 0, "already": 0, "skipped": 0, "refused": 2}
CHECK_EXIT = {"present": 0, "upstream": 0, "absent": 1, "outdated": 1, "error": 2}


def _emit(report: ClampReport, as_json: bool) -> None:
    """A refusal's one line goes to stderr in both modes, so a build log shows it."""
    if report.outcome in ("refused", "error"):
        print(report.message, file=sys.stderr)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.outcome not in ("refused", "error"):
        print(f"{report.outcome}: {report.message} ({report.file}, vLLM {report.vllm_version})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patches.turing_clamp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("apply", "check", "show"))
    parser.add_argument("--target", type=Path, help="the triton_unified_attention.py to patch "
                        "(default: the one of the vLLM installed for this Python)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        target = args.target or find_target()
        if args.command == "show":
            diff = show(target)
            if args.json or diff:
                print(json.dumps({"file": str(target), "diff": diff}) + "\n" if args.json else diff, end="")
            return 0
    except ClampError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command == "apply":
        report = apply(target)
        _emit(report, args.json)
        return APPLY_EXIT[report.outcome]
    report = check(target)
    _emit(report, args.json)
    return CHECK_EXIT[report.outcome]


if __name__ == "__main__":
    raise SystemExit(main())
