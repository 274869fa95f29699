"""The fp16 upcast: the Gemma 4 12B vision embedder's patch_dense and patch_ln2 run in fp32 when the
engine runs in fp16 (Turing has no bf16), placed into vLLM's gemma4_unified.py.

    python -m patches.fp16_upcast apply|check|show [--target PATH] [--json]

Without --target it acts on model_executor/models/gemma4_unified.py of the vLLM installed for this
Python. A release without that file (0.19.0-0.22.1) has nothing to patch: outcome `none`, exit 0.

apply: 0 applied / already / none, 2 refused (nothing written).
check: 0 present once (or none), 1 absent or outdated, 2 error.
show:  prints the unified diff apply would make (empty when there is nothing to do).

Why: in fp16 a high-contrast 48x48x3 patch overflows patch_dense's 6,912-wide reduction (65,504), and
patch_ln2 turns the inf into NaN image embeddings; the answer is then token 0 repeated (vLLM issue
48231, fix PR 48233 open). Nothing changes under bf16 or fp32 (docs/fp16.md).
"""
from __future__ import annotations

from door.problem import Problem
import difflib
import enum
import sys
from dataclasses import dataclass
from pathlib import Path

from door import files
from patches.placing import (PatchReport, installed_vllm, parse, recorded_label, sha256, sha256_of,
                             vllm_version_at, write_atomic)
from patches.fp16_upcast.placement import (
    LAYERS,
    PATCH_VERSION,
    TARGET_IN_PACKAGE,
    count_upcast,
    insert_upcast,
    strip_upcast,
)

REINSTALL = "reinstall vLLM (`pip install --force-reinstall --no-deps vllm==VERSION`) and apply again"
APPLY_CLI = "run `python -m patches.fp16_upcast apply`"
UPCAST = f"fp16 upcast v{PATCH_VERSION} ({' and '.join(LAYERS)} in fp32 under fp16)"

__all__ = ["LAYERS", "Outcome", "UpcastReport", "apply", "check", "find_target", "show"]


class Outcome(enum.Enum):
    """What apply or check found: its name in reports, the command's exit code, and its message."""

    APPLIED = ("applied", 0, UPCAST + " placed in Gemma4UnifiedVisionEmbedder.forward()")
    ALREADY = ("already", 0, UPCAST + " already present; file unchanged")
    NONE = ("none", 0, "this vLLM has no gemma4_unified.py (the 12B's embedder): nothing to patch")
    REFUSED = ("refused", 2, "{found}")
    PRESENT = ("present", 0, UPCAST + " present once")
    OUTDATED = ("outdated", 1, "fp16 upcast {found} present, this is v" + str(PATCH_VERSION) + "; " + APPLY_CLI)
    ABSENT = ("absent", 1, "no fp16 upcast; " + APPLY_CLI)
    ERROR = ("error", 2, "{found}")

    def __init__(self, label: str, exit_code: int, template: str):
        self.label, self.exit_code, self.template = label, exit_code, template

    def message(self, found: str = "") -> str:
        return self.template.format(found=found)


@dataclass
class UpcastReport(PatchReport):
    """PatchReport's fields, and the layers the upcast runs in fp32."""

    layers: tuple = LAYERS

    def to_dict(self) -> dict:
        return dict(super().to_dict(), layers=list(self.layers))


def find_target() -> Path:
    package = installed_vllm()
    if package is None:
        raise Problem(f"vLLM is not installed for {sys.executable}; install it or pass --target PATH")
    return package / TARGET_IN_PACKAGE


def _report(path: Path, outcome: Outcome, found: str = "", before: bytes | None = None,
            after: bytes | None = None) -> UpcastReport:
    before_sha = sha256(before) if before is not None else sha256_of(path)
    after_sha = sha256(after) if after is not None else before_sha
    return UpcastReport(str(path), vllm_version_at(path, TARGET_IN_PACKAGE), outcome, before_sha, after_sha,
                        PATCH_VERSION, outcome.message(found))


def _refusal(path: Path, what: str, todo: str = REINSTALL) -> Problem:
    version = vllm_version_at(path, TARGET_IN_PACKAGE)
    todo = todo.replace("VERSION", version if version != "unknown" else "X")
    return Problem(f"{path} (vLLM {version}): {what}; nothing was written; {todo}")


def _source(path: Path) -> tuple[bytes, str] | None:
    """The file's bytes and text; None where the file does not exist (a release without the 12B)."""
    try:
        data = files.read_own_bytes(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _refusal(path, f"cannot read it ({exc.strerror})", "pass --target PATH to vLLM's gemma4_unified.py")
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refusal(path, "the file is not UTF-8 text") from None


def _planned(path: Path, source: str) -> tuple[Outcome, str]:
    """(outcome, new source) apply would produce; a Problem when it must refuse (drift)."""
    try:
        count = count_upcast(parse(source))
        if count.present_once and count.version == PATCH_VERSION:
            return Outcome.ALREADY, source
        if not (count.present_once or count.absent):
            raise Problem(f"found {count.definitions} upcast definitions and {count.calls} upcast "
                          "branches; expected none or one of each")
        return Outcome.APPLIED, insert_upcast(strip_upcast(source))
    except Problem as exc:
        raise _refusal(path, str(exc)) from None


def apply(path: Path | str) -> UpcastReport:
    """Place the upcast in path; a refusal comes back as Outcome.REFUSED, with nothing written."""
    path = Path(path)
    try:
        data, source = _source(path) or (None, None)
        if data is None:
            return _report(path, Outcome.NONE)
        outcome, text = _planned(path, source)
        if outcome is not Outcome.APPLIED:
            return _report(path, outcome, before=data)
        return _report(path, outcome, before=data,
                       after=write_atomic(path, text, lambda what, todo: _refusal(path, what, todo)))
    except Problem as exc:
        return _report(path, Outcome.REFUSED, str(exc))


def check(path: Path | str, built: dict | None = None) -> UpcastReport:
    """Structural check: PRESENT / NONE / ABSENT / OUTDATED / ERROR. `built`: the build's apply report,
    which answers without parsing while the file holds the very bytes it wrote."""
    path = Path(path)
    try:
        read = _source(path)
        if read is None:
            return _report(path, Outcome.NONE)
        data, source = read
        if recorded_label(built, path, sha256(data), PATCH_VERSION) in ("applied", "already"):
            return _report(path, Outcome.PRESENT, before=data)
        count = count_upcast(parse(source))
    except Problem as exc:
        return _report(path, Outcome.ERROR, str(exc))
    if count.present_once and count.version == PATCH_VERSION:
        return _report(path, Outcome.PRESENT, before=data)
    if count.present_once:
        return _report(path, Outcome.OUTDATED, f"v{count.version}" if count.version is not None
                       else "of an unknown version", before=data)
    if count.absent:
        return _report(path, Outcome.ABSENT, before=data)
    return _report(path, Outcome.ERROR, f"{count.definitions} upcast definitions and {count.calls} upcast "
                                        f"branches, expected one each; {REINSTALL}", before=data)


def show(path: Path | str) -> str:
    """The unified diff apply would make; empty when there is nothing to do."""
    path = Path(path)
    read = _source(path)
    if read is None:
        return ""
    _, source = read
    _, text = _planned(path, source)
    version = vllm_version_at(path, TARGET_IN_PACKAGE)
    return "".join(difflib.unified_diff(source.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=f"{path} (vLLM {version})", tofile=f"{path} (fp16 upcast)"))
