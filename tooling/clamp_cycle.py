"""The clamp's apply -> check -> apply -> show cycle on one real release, as data.

Shared by tests/unit/test_clamp_releases.py and bench/clamp_releases, which renders
the outcome table of docs/clamp.md from it (so that table is never hand-typed).
"""
from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from patches import turing_clamp
from patches.turing_clamp.placement import ENCODER, UNIFIED, Site, plan
from tooling import vllm_releases
from door import files
from door import children

REPO = Path(__file__).resolve().parents[1]
TABLE_BEGIN = "<!-- clamp-releases:begin (bench/clamp_releases --write-doc) -->"
TABLE_END = "<!-- clamp-releases:end -->"
MEMBERS = {UNIFIED.name: vllm_releases.LAUNCHER_MEMBER, ENCODER.name: vllm_releases.ENCODER_LAUNCHER_MEMBER}
# The generated table of each site in docs/clamp.md: (begin marker, end marker)
TABLE_MARKERS = {UNIFIED.name: (TABLE_BEGIN, TABLE_END),
                 ENCODER.name: ("<!-- clamp-releases-encoder:begin (bench/clamp_releases --write-doc) -->",
                                "<!-- clamp-releases-encoder:end -->")}


@dataclass
class Cycle:
    version: str
    file_sha256: str
    launcher: str
    inserted_after_line: int
    unpacks_num_stages: bool
    first_apply: str
    parses: bool
    check: str
    second_apply: str
    byte_identical: bool
    show_empty: bool
    strip_restores: bool

    @property
    def passed(self) -> bool:
        return (self.first_apply == "applied" and self.parses and self.check == "present"
                and self.second_apply == "already" and self.byte_identical
                and self.show_empty and self.strip_restores)


def run_cli(*args, env=None) -> subprocess.CompletedProcess:
    """`python -m patches.turing_clamp ARGS` from the repository root."""
    return children.run([sys.executable, "-m", "patches.turing_clamp", *map(str, args)], cwd=REPO, env=env)


def names(node: ast.AST, ctx: type) -> set[str]:
    """Names a statement stores (ctx=ast.Store) or reads (ctx=ast.Load)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


LAUNCHER_FUNCTIONS = {UNIFIED.name: "unified_attention", ENCODER.name: "context_attention_fwd"}


def launcher_of(source, site: Site = UNIFIED) -> ast.FunctionDef:
    tree = ast.parse(source)
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == LAUNCHER_FUNCTIONS[site.name])


def copy_release(version: str, into: Path, site: Site = UNIFIED) -> Path:
    """A writable copy of the release's site layout; returns the site's launcher file in it."""
    vllm_releases.ensure_release(version)
    copy = into / f"site-{version}"
    if not copy.exists():
        shutil.copytree(vllm_releases.site_dir(version), copy)
    return copy / MEMBERS[site.name]


def run_cycle(version: str, workdir: Path, site: Site = UNIFIED) -> Cycle:
    target = copy_release(version, workdir, site)
    original = files.read_own_bytes(target)
    placement = plan(original.decode("utf-8"), site)
    first = turing_clamp.apply(target)
    patched = files.read_own_bytes(target)
    try:
        ast.parse(patched)
        parses = True
    except SyntaxError:
        parses = False
    checked = turing_clamp.check(target)
    second = turing_clamp.apply(target)
    return Cycle(
        version=version,
        file_sha256=hashlib.sha256(original).hexdigest(),
        launcher=placement.launcher,
        inserted_after_line=placement.call_at,
        unpacks_num_stages=placement.has_stages,
        first_apply=first.outcome.label,
        parses=parses,
        check=checked.outcome.label,
        second_apply=second.outcome.label,
        byte_identical=files.read_own_bytes(target) == patched,
        show_empty=turing_clamp.show(target) == "",
        strip_restores=turing_clamp.strip_clamp(patched.decode("utf-8")).encode("utf-8") == original,
    )


def markdown_table(cycles: list[Cycle]) -> str:
    rows = [
        "| vLLM | file sha256 | launcher | clamp after line | num_stages | apply | check | "
        "apply again | show | strip restores | result |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cycles:
        rows.append(
            f"| {c.version} | `{c.file_sha256[:12]}` | `{c.launcher}()` | {c.inserted_after_line} | "
            f"{'adjusted' if c.unpacks_num_stages else 'absent'} | {c.first_apply} | {c.check} | "
            f"{c.second_apply}{', byte-identical' if c.byte_identical else ', CHANGED'} | "
            f"{'empty' if c.show_empty else 'NOT EMPTY'} | {'yes' if c.strip_restores else 'NO'} | "
            f"{'pass' if c.passed else 'FAIL'} |"
        )
    return "\n".join(rows) + "\n"


def doc_table(doc: str, site: Site = UNIFIED) -> str:
    """The site's generated table currently in docs/clamp.md."""
    begin, end = TABLE_MARKERS[site.name]
    start = doc.index(begin) + len(begin) + 1
    return doc[start:doc.index(end, start)]


def with_table(doc: str, table: str, site: Site = UNIFIED) -> str:
    begin, end = TABLE_MARKERS[site.name]
    start = doc.index(begin) + len(begin) + 1
    return doc[:start] + table + doc[doc.index(end, start):]
