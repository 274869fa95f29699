"""The Turing clamp: places a shared-memory-sized tile choice into vLLM's attention launchers.

    python -m patches.turing_clamp apply|check|show [--site unified|encoder] [--target PATH] [--json]

By default each command acts on every site (SITES) of the installed vLLM: `unified` is
triton_unified_attention.py, `encoder` is triton_prefill_attention.py (encoder / bidirectional
attention). --site NAME picks one; a --target PATH is one file, judged by its file name.

apply: 0 applied / already / skipped (upstream), 2 refused (nothing written to that site's file).
check: 0 present once (or upstream), 1 absent or outdated, 2 error.
show:  prints the unified diff apply would make (empty when there is nothing to do).
Over several sites the exit code is the worst site's; --json prints one report per site, by name.

The API: apply(), check(), show() and strip_clamp(); each report's Outcome carries its exit code.
"""
from __future__ import annotations

from door.problem import Problem
import difflib
import enum
import sys
from dataclasses import dataclass
from pathlib import Path

from door import files
from patches.placing import (PatchReport, installed_vllm, recorded_label, sha256 as _sha256, sha256_of as _sha256_of,
                             vllm_version_at, write_atomic)
from patches.turing_clamp.placement import (
    PATCH_VERSION,
    SITES,
    UNIFIED,
    Site,
    count_clamp,
    insert_clamp,
    parse,
    site_of,
    sizes_from_shared_memory,
    strip_clamp,
)

TARGET_IN_PACKAGE = UNIFIED.target_in_package
REINSTALL = "reinstall vLLM (`pip install --force-reinstall --no-deps vllm==VERSION`)"

__all__ = ["SITES", "ClampReport", "Outcome", "apply", "check", "find_target", "show", "strip_clamp"]


APPLY_CLI = "run `python -m patches.turing_clamp apply`"


class Outcome(enum.Enum):
    """What apply or check found: its name in reports, the command's exit code, and its message
    (a template over the patch version `v` and, for OUTDATED and ERROR, what was found)."""

    # apply
    APPLIED = ("applied", 0, "clamp v{v} placed in the attention launcher")
    ALREADY = ("already", 0, "clamp v{v} already present; file unchanged")
    SKIPPED = ("skipped", 0, "upstream already sizes tiles from shared memory; file unchanged")
    REFUSED = ("refused", 2, "{found}")
    # check
    PRESENT = ("present", 0, "clamp v{v} present once")
    UPSTREAM = ("upstream", 0, "upstream already sizes tiles from shared memory")
    OUTDATED = ("outdated", 1, "clamp {found} present, this is v{v}; " + APPLY_CLI)
    ABSENT = ("absent", 1, "no clamp; " + APPLY_CLI)
    ERROR = ("error", 2, "{found}")

    def __init__(self, label: str, exit_code: int, template: str):
        self.label, self.exit_code, self.template = label, exit_code, template

    def message(self, found: str = "") -> str:
        return self.template.format(v=PATCH_VERSION, found=found)

    @property
    def refusal(self) -> bool:
        """A refusal's one line goes to stderr."""
        return self.exit_code == 2


class ClampReport(PatchReport):
    """One clamp site's report (PatchReport's fields; outcome an Outcome)."""


def find_target(site: Site = UNIFIED) -> Path:
    """vLLM's launcher file of `site` in the Python running this, found without importing vLLM."""
    package = installed_vllm()
    if package is None:
        raise Problem(
            f"vLLM is not installed for {sys.executable}; expected the vllm package; "
            "install it or pass --target PATH"
        )
    return package / site.target_in_package


def vllm_version_of(path: Path) -> str:
    """The release from the dist-info METADATA next to the vllm package, else 'unknown'."""
    return vllm_version_at(path, site_of(path).target_in_package)


@dataclass
class _State:
    """A target read once: its bytes, text, version and what apply would write."""

    path: Path
    version: str
    data: bytes
    source: str
    site: Site = UNIFIED

    def report(self, outcome: Outcome, found: str = "", after: bytes | None = None) -> ClampReport:
        return ClampReport(str(self.path), self.version, outcome, _sha256(self.data),
                           _sha256(after if after is not None else self.data), PATCH_VERSION,
                           outcome.message(found))

    def refusal(self, what: str, todo: str = REINSTALL) -> Problem:
        todo = todo.replace("VERSION", self.version if self.version != "unknown" else "X")
        return Problem(f"{self.path} (vLLM {self.version}): {what}; nothing was written; {todo}")


def _read(path: Path | str, site: Site | None = None) -> _State:
    path = Path(path)
    site = site or site_of(path)
    version = vllm_version_of(path)
    try:
        data = files.read_own_bytes(path)
    except OSError as exc:
        raise Problem(
            f"{path} (vLLM {version}): cannot read it ({exc.strerror}); expected vLLM's "
            f"{site.target_in_package.name}; pass --target PATH to the right file"
        ) from None
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _State(path, version, data, "", site).refusal("the file is not UTF-8 text") from None
    return _State(path, version, data, source, site)


def _planned(state: _State) -> tuple[Outcome, str]:
    """(outcome, new source) apply would produce, or a Problem when it must refuse."""
    try:
        tree = parse(state.source)
        if sizes_from_shared_memory(tree):
            return Outcome.SKIPPED, state.source
        count = count_clamp(tree, state.site)
        if count.present_once and count.version == PATCH_VERSION:
            return Outcome.ALREADY, state.source
        if not (count.present_once or count.absent):
            raise Problem(
                f"found {count.definitions} clamp definitions and {count.calls} clamp calls; "
                "expected none or one of each"
            )
        return Outcome.APPLIED, insert_clamp(strip_clamp(state.source), state.site)
    except Problem as exc:
        raise state.refusal(str(exc)) from None


def _write(state: _State, text: str) -> bytes:
    """Replace the file atomically, keeping its mode and owner; nothing changes on failure."""
    return write_atomic(state.path, text, state.refusal)


def apply(path: Path | str, site: Site | None = None) -> ClampReport:
    """Place the clamp in path (the launcher of `site`, by default the one its file name says);
    a refusal comes back as Outcome.REFUSED."""
    try:
        state = _read(path, site)
        outcome, text = _planned(state)
        if outcome is not Outcome.APPLIED:
            return state.report(outcome)
        return state.report(outcome, after=_write(state, text))
    except Problem as exc:
        return _unread_report(path, Outcome.REFUSED, str(exc))


def _unread_report(path: Path | str, outcome: Outcome, found: str) -> ClampReport:
    """The report on a file that could not be read or parsed."""
    return ClampReport(str(path), vllm_version_of(Path(path)), outcome, _sha256_of(path),
                       _sha256_of(path), PATCH_VERSION, outcome.message(found))


# What an apply the build recorded means for a file still holding the bytes it wrote
BUILT_OUTCOMES = {Outcome.APPLIED.label: Outcome.PRESENT, Outcome.ALREADY.label: Outcome.PRESENT,
                  Outcome.SKIPPED.label: Outcome.UPSTREAM}


def recorded_outcome(state_sha256: str | None, path: Path, built: dict | None) -> Outcome | None:
    """The check's outcome taken from the build's apply report `built` (its JSON), when the file at
    `path` still holds the very bytes that report proved (same path, sha256 and patch version): the
    structural check would read the same source to the same answer. None otherwise (pure)."""
    return BUILT_OUTCOMES.get(recorded_label(built, path, state_sha256, PATCH_VERSION))


def check(path: Path | str, site: Site | None = None, built: dict | None = None) -> ClampReport:
    """Structural check: Outcome PRESENT / UPSTREAM / ABSENT / OUTDATED / ERROR. `built`: the build's
    apply report for this file, which answers without parsing while the file is unchanged."""
    try:
        state = _read(path, site)
        known = recorded_outcome(_sha256(state.data), state.path, built)
        if known is not None:
            return state.report(known)
        tree = parse(state.source)
    except Problem as exc:
        return _unread_report(path, Outcome.ERROR, str(exc))
    count = count_clamp(tree, state.site)
    if sizes_from_shared_memory(tree):
        return state.report(Outcome.UPSTREAM)
    if count.present_once and count.version == PATCH_VERSION:
        return state.report(Outcome.PRESENT)
    if count.present_once:
        return state.report(Outcome.OUTDATED, f"v{count.version}" if count.version is not None
                            else "of an unknown version")
    if count.absent:
        return state.report(Outcome.ABSENT)
    return state.report(Outcome.ERROR, f"{count.definitions} clamp definitions and {count.calls} "
                                       f"clamp calls, expected one each; {REINSTALL}")


def show(path: Path | str, site: Site | None = None) -> str:
    """The unified diff apply would make; empty when there is nothing to do."""
    state = _read(path, site)
    _, text = _planned(state)
    return "".join(difflib.unified_diff(
        state.source.splitlines(keepends=True), text.splitlines(keepends=True),
        fromfile=f"{state.path} (vLLM {state.version})", tofile=f"{state.path} (clamped)",
    ))
