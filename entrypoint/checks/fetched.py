"""The model check's reading of a fetch manifest (entrypoint/fetch/manifest.py) beside the mounted
model: which repository and commit it is, and every listed file's size against the manifest (a stat
each: milliseconds); the SHA-256 of every byte only when VERIFY_HASHES_SECONDS asks, within that time."""
from __future__ import annotations

import dataclasses
import os
import time

from contract.verdict import Result, Status, failed, warned

from door import files
from door.problem import Problem
from ..fetch import manifest, verify
from .model import MODEL, Resolved

HASH_SETTING = "VERIFY_HASHES_SECONDS"


def _refetch(found: manifest.Manifest, folder: str) -> str:
    return (f"run `fetch {found.repo}@{found.commit}` again into {files.shown(folder)}: it downloads only what is "
            "missing or wrong, then verifies every byte")


def _problems(folder: str, found: manifest.Manifest, hash_seconds: int | None) -> tuple[list[str], int | None]:
    """(what differs from the manifest, how many files were hashed: None without hashing) within the bound."""
    problems = [problem for file in found.files
                if (problem := verify.file_problem(os.path.join(folder, file.path), file, check_hash=False))]
    if problems or not hash_seconds:
        return problems, None
    deadline = time.monotonic() + hash_seconds
    for hashed, file in enumerate(found.files):
        try:
            problem = verify.file_problem(os.path.join(folder, file.path), file, deadline=deadline)
        except Problem:
            return [], hashed
        if problem:
            return [problem], hashed + 1
    return [], len(found.files)


def check_fetched(result: Result, model: Resolved, hash_seconds: int | None = None) -> Result:
    """The model check's `result` with what the fetch manifest in the model folder says: the repo and
    commit named, a file missing or of another size (or, with `hash_seconds`, another content) failed,
    a weight file the manifest does not list (vLLM would load it too) failed."""
    folder = model.path
    if folder is None or not os.path.isdir(folder):
        return result
    try:
        found = manifest.read(folder)
    except Problem as problem:
        if result.status is Status.FAIL:
            return result
        return warned(MODEL, f"{result.message}; {problem}, so what is mounted is not checked against a fetch",
                      f"run fetch again into {files.shown(folder)}, or remove {manifest.NAME}")
    if found is None:
        if hash_seconds and result.status is not Status.FAIL:
            return warned(MODEL, f"{result.message}; {HASH_SETTING} is set but {files.shown(folder)} has no "
                                 f"{manifest.NAME} to verify against", f"fetch the model with `fetch`, or unset {HASH_SETTING}")
        return result
    named = f"{files.shown(found.named)} (fetched {files.shown(found.fetched_at) or 'at an unrecorded time'})"
    started = time.monotonic()
    problems, hashed = _problems(folder, found, hash_seconds)
    if problems:
        more = f" ({len(problems) - 1} more)" if len(problems) > 1 else ""
        return failed(MODEL, f"{files.shown(folder)} is not the {named} its fetch manifest lists: "
                             f"{files.shown(problems[0])}{more}", _refetch(found, folder))
    listed = {file.path for file in found.files}
    strays = [name for name in (model.found.weight_files if model.found else ()) if name not in listed]
    if strays:
        return failed(MODEL, f"{files.shown(folder)}: vLLM would load {len(strays)} weight file(s) that the fetch "
                             f"manifest of {named} does not list (e.g. {files.shown(strays[0])})",
                      f"remove them, or {_refetch(found, folder)}")
    if result.status is Status.FAIL:
        return dataclasses.replace(result, message=f"{named}: {result.message}")
    sizes = f"{named}: its {len(found.files)} files of the manifest's sizes"
    if hashed is not None and hashed < len(found.files):
        return warned(MODEL, f"{result.message}; {sizes}, the hashes of {hashed} of them verified before "
                             f"{HASH_SETTING}={hash_seconds} ran out",
                      f"raise {HASH_SETTING}, or run `fetch {found.repo}@{found.commit}`, which verifies every byte")
    hashes = f", every hash verified in {time.monotonic() - started:.1f} s" if hashed is not None else ""
    return dataclasses.replace(result, message=f"{result.message}; {sizes}{hashes}")
