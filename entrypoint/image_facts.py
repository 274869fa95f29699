"""The image facts file (imagefacts/shape.py, written by imagefacts/ at build time), read at start so
the preflight needs neither torch nor vLLM: one JSON read and three package-metadata lookups.

`load` answers the facts when the file is there, well formed and matches the installed vllm, torch
and triton; otherwise None and why (the checks that need those facts then import the packages
themselves and say so)."""
from __future__ import annotations

import dataclasses
import functools

from contract import layout
from contract import distributions
from imagefacts.shape import PACKAGES, SCHEMA, VllmValues, vllm_values

from door import files
from door.problem import Problem

MAX_FACTS_BYTES = 8 * 2**20


@dataclasses.dataclass(frozen=True)
class Facts:
    document: dict

    @property
    def server_parser(self) -> dict:
        return self.document["server_parser"]

    @property
    def torch(self) -> dict:
        return self.document["torch"]

    @property
    def packages(self) -> dict:
        return self.document["packages"]

    def parser_names(self, kind: str) -> list[str]:
        return list(self.document["parsers"][kind])

    @property
    def quantization(self) -> dict[str, int]:
        return self.document["quantization"]

    @functools.cached_property
    def values(self) -> VllmValues:
        """vLLM's value lists (judge() and read_server_facts vouch for the section)."""
        found = vllm_values(self.document["vllm_values"])
        assert isinstance(found, VllmValues), found
        return found


@dataclasses.dataclass(frozen=True)
class Loaded:
    facts: Facts | None
    why_not: str | None = None


def judge(document, versions: dict[str, str | None]) -> str | None:
    """Why `document` cannot stand for the installed stack (pure); None when it can."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        return f"not a schema-{SCHEMA} facts file"
    for key in ("packages", "torch", "server_parser", "parsers", "quantization"):
        if not isinstance(document.get(key), dict):
            return f"missing its {key}"
    values = vllm_values(document.get("vllm_values"))
    if isinstance(values, str):
        return values
    changed = [f"{name} {document['packages'].get(name)} -> {versions.get(name) or 'not installed'}"
               for name in PACKAGES if document["packages"].get(name) != versions.get(name)]
    return "written for other packages (" + ", ".join(changed) + ")" if changed else None


def load(path: str = layout.IMAGE_FACTS) -> Loaded:
    try:
        document = files.read_json(path, path, MAX_FACTS_BYTES)
    except Problem as problem:
        return Loaded(None, str(problem))
    problem = judge(document, distributions.installed_versions(PACKAGES))
    return Loaded(None, f"{path} is {problem}") if problem else Loaded(Facts(document))


def for_argv(loaded: Loaded) -> tuple[Facts | None, str | None]:
    """(facts holding the server's option table and parser names, where they come from): the image
    facts; else read from the installed vLLM (an import of seconds, said in the report); else none."""
    if loaded.facts is not None:
        return loaded.facts, f"vLLM {loaded.facts.packages.get('vllm')}'s option table (image facts)"
    try:
        from imagefacts.read import read_server_facts

        document = read_server_facts()
    except Exception:  # no vLLM here (a host run of the entrypoint), or one that does not import
        return None, None
    return Facts(document), f"vLLM {document['packages']['vllm']}'s own parser, imported ({loaded.why_not})"
