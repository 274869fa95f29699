"""The Hub-revision options among the extra words (`--revision`, `--code-revision`,
`--tokenizer-revision`) judged against the model that is mounted, before anything starts.

vLLM 0.33.0 reads a local folder as it is: `resolve_revision` returns the revision unchanged for a
path that exists (transformers_utils/repo_utils.py) and the loaders never look at it, so
`--revision v2` beside a folder fetched at `main` serves `main` without a word. A revision is
therefore accepted for a folder only where the folder says it is that revision: its fetch manifest
(entrypoint/fetch/manifest.py: the revision asked for, the commit) or, for a Hugging Face cache
snapshot mounted as the folder, the commit it is named by. For a Hub id read from the cache with
HF_HUB_OFFLINE set, the cache must hold that revision (refs/REVISION or the commit's snapshot):
offline, the server could not fetch it. Otherwise the option is refused (SettingsError: exit 2),
naming it as written, what the mounted model is, and the fix. `--tokenizer-revision` is judged
against --tokenizer's folder or id when one is given (vLLM takes --revision for it otherwise)."""
from __future__ import annotations

import os
import re

from door import files
from door.problem import Problem
from .argv import Extras
from .checks.model import hf_cache_snapshot
from .fetch import manifest
from .settings import SettingsError

REVISION_DESTS = ("revision", "code_revision", "tokenizer_revision")
COMMIT = re.compile(r"[0-9a-f]{40}")
SHORT_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def is_folder_path(value: str) -> bool:
    """Whether vLLM reads `value` as a local folder rather than a Hub id."""
    return os.path.isabs(value) or value.startswith(".") or os.path.isdir(value)


def snapshot_commit(folder: str) -> str | None:
    """The commit a Hugging Face cache snapshot folder (…/snapshots/COMMIT) is named by, else None."""
    parent, name = os.path.split(os.path.normpath(folder))
    return name if COMMIT.fullmatch(name) and os.path.basename(parent) == "snapshots" else None


def names_commit(value: str, commit: str) -> bool:
    return value == commit or (SHORT_COMMIT.fullmatch(value) is not None and commit.startswith(value))


def folder_revision(folder: str) -> tuple[str, tuple[str, ...], str | None]:
    """(what the folder is, in words; the revision names it answers to; the repo, if known)."""
    try:
        found = manifest.read(folder)
    except Problem as problem:
        return f"a folder whose fetch manifest is unreadable ({problem})", (), None
    if found is not None:
        asked = (found.revision,) if found.revision else ()
        at = f"{files.shown(found.revision)}, commit {found.commit[:12]}" if found.revision else \
            f"commit {found.commit[:12]}"
        return f"{files.shown(found.repo)} at {at} by its fetch manifest", (*asked, found.commit), found.repo
    commit = snapshot_commit(folder)
    if commit is not None:
        return f"the Hugging Face cache snapshot of commit {commit[:12]}", (commit,), None
    return f"a folder without a fetch manifest ({manifest.NAME}) saying which revision it is", (), None


def revision_problem(extras: Extras, model: str, hub_cache: str, offline: bool) -> SettingsError | None:
    """The first revision option that the mounted model does not answer to, or None."""
    for dest in REVISION_DESTS:
        value = extras.get(dest)
        if not isinstance(value, str) or not value:
            continue
        option = extras.name(dest)
        flag = option.split()[-1]
        tokenizer = extras.get("tokenizer")
        target = tokenizer if dest == "tokenizer_revision" and isinstance(tokenizer, str) and tokenizer else model
        if is_folder_path(target):
            if not os.path.isdir(target):
                continue  # no folder there: the model check names what is missing, not the revision
            what, answers, repo = folder_revision(target)
            if any(value == name or names_commit(value, name) for name in answers):
                continue
            fetch = f"`fetch {files.shown(repo)}@{files.shown(value)}`" if repo else f"`fetch REPO@{files.shown(value)}`"
            return SettingsError(option, value, f"a revision the mounted folder is: {files.shown(target)} is {what}, "
                                 f"and vLLM reads a local folder as it is, ignoring {flag}",
                                 f"Remove {flag} to serve the folder as it is, or fetch that revision into the "
                                 f"folder ({fetch}) and mount it.")
        if offline and hf_cache_snapshot(target, hub_cache, value) is None:
            return SettingsError(option, value, f"a revision of {files.shown(target)} in the Hugging Face cache "
                                 f"{files.shown(hub_cache)}: it holds no refs/{files.shown(value)} or snapshot of "
                                 "it, and HF_HUB_OFFLINE is set, so the server could not fetch it",
                                 f"Fetch {files.shown(target)}@{files.shown(value)} into the mounted cache first, "
                                 f"or remove {flag} to serve the revision the cache holds.")
    return None
