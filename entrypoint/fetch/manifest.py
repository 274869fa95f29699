"""The manifest written beside a fetched model: what was fetched (repo, commit, files with sizes and
hashes), when, and the judgment it passed. The preflight reads it to name what is mounted."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from contract.verdict import Result

from door import files, replace
from door.problem import Problem
from .listing import HubFile

NAME = "vllm-turing-fetch.json"
VERSION = 1
HEX = frozenset("0123456789abcdef")


@dataclasses.dataclass(frozen=True)
class Manifest:
    repo: str
    commit: str
    fetched_at: str
    files: tuple[HubFile, ...]
    revision: str = ""  # the branch, tag or commit the fetch was asked for ("" where not recorded)

    @property
    def named(self) -> str:
        return f"{self.repo}@{self.commit[:12]}"


def document(repo: str, revision: str, commit: str, files: list[HubFile], results: list[Result], when: str,
             gpu: str) -> dict:
    return {"version": VERSION, "repo": repo, "revision": revision, "commit": commit, "fetched_at": when,
            "gpu": gpu, "files": [file.to_dict() for file in files],
            # the statuses, not the messages: those hold free bytes and timings that change run to run
            "verdict": {result.name: result.status.value for result in results}}


def write(folder: str, doc: dict) -> str:
    """Atomically: a reader sees the old manifest or the new one, never half of one."""
    path = os.path.join(folder, NAME)
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    replace.replace_file(Path(path), data, verify=lambda staged: parse_bytes(files.read_bytes(str(staged), NAME, files.INDEX_CAP), NAME))
    return path


def _digest(value: object, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and set(value) <= HEX


def _file(entry: object) -> HubFile | None:
    if not isinstance(entry, dict):
        return None
    path, size, sha256, blob_id = (entry.get(key) for key in ("path", "size", "sha256", "blob_id"))
    whole = (isinstance(path, str) and path and path.isprintable() and not path.startswith("/")
             and ".." not in path.split("/") and type(size) is int and size >= 0
             and (sha256 is None or _digest(sha256, 64)) and _digest(blob_id, 40))
    return HubFile(path, size, sha256, blob_id) if whole else None


def parse(doc: object, name: str) -> Manifest:
    """A manifest's JSON as the typed Manifest; Problem naming the first field that is wrong."""
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise Problem(f"{name} is not a version {VERSION} fetch manifest")
    repo, commit, when, listed = doc.get("repo"), doc.get("commit"), doc.get("fetched_at"), doc.get("files")
    if not (isinstance(repo, str) and repo.isprintable() and 0 < len(repo) <= 200):
        raise Problem(f"{name}: 'repo' is {files.json_kind(repo)}, not a repository id")
    if not _digest(commit, 40):
        raise Problem(f"{name}: 'commit' is not a 40-digit commit hash")
    if not isinstance(listed, list) or not listed:
        raise Problem(f"{name}: 'files' is {files.json_kind(listed)}, not a list of files")
    typed = [_file(entry) for entry in listed]
    if None in typed:
        raise Problem(f"{name}: file {typed.index(None) + 1} is not {{path, size, sha256, blob_id}}")
    asked = doc.get("revision")
    return Manifest(repo, commit, when if isinstance(when, str) and when.isprintable() else "", tuple(typed),
                    asked if isinstance(asked, str) and asked.isprintable() and len(asked) <= 255 else "")


MANIFEST_CAP = files.INDEX_CAP


def parse_bytes(data: bytes, name: str) -> Manifest:
    try:
        return parse(files.parse_json(data, name), name)
    except Problem as problem:
        raise Problem(str(problem)) from None


def read(folder: str, cap: int = MANIFEST_CAP) -> Manifest | None:
    """The folder's manifest, None when it has none; Problem when it is unreadable or not one."""
    path = os.path.join(folder, NAME)
    if not os.path.lexists(path):
        return None
    name = files.shown(path)
    try:
        return parse(files.read_json(path, name, cap), name)
    except Problem as problem:
        raise Problem(str(problem)) from None
