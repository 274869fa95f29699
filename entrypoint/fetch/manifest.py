"""The manifest written beside a fetched model: what was fetched (repo, commit, files with sizes and
hashes), when, and the judgment it passed. The preflight reads it to name what is mounted."""
from __future__ import annotations

import json
import os

from contract.verdict import Result

from .listing import HubFile

NAME = "vllm-turing-fetch.json"
VERSION = 1


def document(repo: str, revision: str, commit: str, files: list[HubFile], results: list[Result], when: str,
             gpu: str) -> dict:
    return {"version": VERSION, "repo": repo, "revision": revision, "commit": commit, "fetched_at": when,
            "gpu": gpu, "files": [file.to_dict() for file in files],
            # the statuses, not the messages: those hold free bytes and timings that change run to run
            "verdict": {result.name: result.status.value for result in results}}


def write(folder: str, doc: dict) -> str:
    """Atomically: a reader sees the old manifest or the new one, never half of one."""
    path = os.path.join(folder, NAME)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(partial, path)
    return path
