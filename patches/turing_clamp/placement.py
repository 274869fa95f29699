"""Where the clamp goes in vLLM's Triton attention launchers, decided from their syntax trees.

Two sites (`SITES`): the unified-attention launcher (triton_unified_attention.py,
`unified_attention()`, tiles TILE_SIZE_PREFILL / TILE_SIZE_DECODE) and the encoder-attention
launcher (triton_prefill_attention.py, `context_attention_fwd()`, tile BLOCK). Both files get the
same runtime block; each gets the one call of its own clamp function.

Pure functions on source text: nothing here reads or writes files. The rest of the
file stays byte-identical because text is spliced in at statement boundaries
(line numbers from `ast`), never regenerated with `ast.unparse`.
"""
from __future__ import annotations

from door.problem import Problem
import ast
import re
from dataclasses import dataclass
from pathlib import Path

from patches.placing import (
    PatchCount,
    attached_start,
    block_lines,
    block_text,
    marked_block,
    newline_of,
    owns,
    parse,
    without,
)

TILE_NAMES = ("TILE_SIZE_PREFILL", "TILE_SIZE_DECODE")
CLAMP_FUNCTION = "_vllm_turing_clamp"
# The unified launcher's window in tokens (0: none), passed where a release assigns it before the tiles
WINDOW_NAME = "sliding_window_val"
ENCODER_TILE_NAMES = ("BLOCK",)
ENCODER_CLAMP_FUNCTION = "_vllm_turing_encoder_clamp"
VERSION_NAME = "_VLLM_TURING_CLAMP_VERSION"
BEGIN_MARKER = "# >>> vllm-turing clamp"
END_MARKER = "# <<< vllm-turing clamp"
OWN_PREFIX = "_vllm_turing_"
# What an upstream fix that sizes tiles by the device would have to read:
# torch's shared_memory_per_block_optin, Triton's "max_shared_mem", or a helper named so.
UPSTREAM_SIGNS = re.compile(r"shared_mem|max_shared", re.IGNORECASE)


RUNTIME_BLOCK = marked_block(__package__, "runtime.py", BEGIN_MARKER, END_MARKER)
# Read with a pattern, not by parsing the block: the preflight's clamp check imports this module, and
# the parse was a third of that check (a unit test holds the two readings equal).
PATCH_VERSION = int(re.search(rf"^{VERSION_NAME} = (\d+)$", RUNTIME_BLOCK, re.MULTILINE).group(1))


@dataclass(frozen=True)
class Site:
    """One launcher the clamp is placed in: its file in the vllm package, the variables holding
    its tiles, its clamp function and the names that must be assigned before the tiles' last
    assignment (the call passes them)."""

    name: str
    target_in_package: Path
    tile_names: tuple
    clamp_function: str
    assigned_before: tuple


UNIFIED = Site("unified", Path("v1/attention/ops/triton_unified_attention.py"), TILE_NAMES, CLAMP_FUNCTION,
               ("BLOCK_M",))
ENCODER = Site("encoder", Path("v1/attention/ops/triton_prefill_attention.py"), ENCODER_TILE_NAMES,
               ENCODER_CLAMP_FUNCTION, ())
SITES = {site.name: site for site in (UNIFIED, ENCODER)}
CLAMP_FUNCTIONS = tuple(site.clamp_function for site in SITES.values())


def site_of(path) -> Site:
    """The site a launcher file belongs to, by its file name (the unified launcher otherwise)."""
    return ENCODER if Path(path).name == ENCODER.target_in_package.name else UNIFIED


@dataclass(frozen=True)
class Placement:
    """Where the two pieces go (0-based line indices, insertion before that line)."""

    launcher: str
    block_at: int
    call_at: int
    indent: str
    has_warps: bool
    has_stages: bool
    site: Site = UNIFIED
    has_window: bool = False


ClampCount = PatchCount


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _is_own(node: ast.stmt) -> bool:
    return owns(node, OWN_PREFIX)


def _is_clamp_call(node: ast.AST, functions: tuple = CLAMP_FUNCTIONS) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in functions)


def _is_clamp_statement(stmt: ast.stmt, functions: tuple = CLAMP_FUNCTIONS) -> bool:
    return isinstance(stmt, ast.Assign) and any(_is_clamp_call(n, functions) for n in ast.walk(stmt.value))


def find_launcher(tree: ast.Module, site: Site = UNIFIED) -> ast.FunctionDef:
    tile_names = site.tile_names
    candidates = [
        node for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _names(node, ast.Store) & set(tile_names)
    ]
    if not candidates:
        raise Problem(f"no function assigns {' or '.join(tile_names)}")
    if len(candidates) > 1:
        names = ", ".join(f"{c.name} (line {c.lineno})" for c in candidates)
        raise Problem(f"several functions assign the tile sizes: {names}; expected one launcher")
    launcher = candidates[0]
    missing = [name for name in tile_names if name not in _names(launcher, ast.Store)]
    if missing:
        raise Problem(f"the launcher {launcher.name}() never assigns {', '.join(missing)}")
    return launcher


def plan(source: str, site: Site = UNIFIED) -> Placement:
    """Where the clamp goes in an unpatched source; a Problem when unrecognised."""
    tree = parse(source)
    launcher = find_launcher(tree, site)
    body = launcher.body
    tiles = set(site.tile_names)
    assigning = [i for i, stmt in enumerate(body) if _names(stmt, ast.Store) & tiles]
    last = assigning[-1]
    for stmt in body[:last]:
        early = (_names(stmt, ast.Load) & tiles) - _names(stmt, ast.Store)
        if early:
            raise Problem(
                f"{', '.join(sorted(early))} is read at line {stmt.lineno} before the tile sizes' "
                f"last assignment at line {body[last].lineno} in {launcher.name}()"
            )
    readers = [stmt for stmt in body[last + 1:] if _names(stmt, ast.Load) & tiles]
    if not readers:
        raise Problem(f"no statement of {launcher.name}() reads the tile sizes after assigning them")
    if body[last + 1].lineno <= body[last].end_lineno:
        raise Problem(f"line {body[last].end_lineno} holds more than one statement")
    before = set().union(*(_names(stmt, ast.Store) for stmt in body[:last + 1]))
    for name in site.assigned_before:
        if name not in before:
            raise Problem(f"{name} is not assigned before the tile sizes in {launcher.name}()")
    if "q" not in {a.arg for a in launcher.args.args + launcher.args.kwonlyargs}:
        raise Problem(f"the launcher {launcher.name}() has no parameter q")
    lines = source.splitlines(keepends=True)
    body_line = lines[body[0].lineno - 1]
    return Placement(
        launcher=launcher.name,
        block_at=attached_start(lines, launcher),
        call_at=body[last].end_lineno,
        indent=body_line[:len(body_line) - len(body_line.lstrip())],
        has_warps="launch_num_warps" in before,
        has_stages="launch_num_stages" in before,
        site=site,
        has_window=WINDOW_NAME in before,
    )


def call_text(placement: Placement, newline: str = "\n") -> str:
    ind, arg_ind = placement.indent, placement.indent * 2 if placement.indent else "    "
    if placement.site is ENCODER:
        # BLOCK is BLOCK_M and, on CUDA, BLOCK_N of _fwd_kernel; the grid is computed from it below.
        return f"{ind}BLOCK = {ENCODER_CLAMP_FUNCTION}(q, BLOCK){newline}"
    args = "q, BLOCK_M, TILE_SIZE_PREFILL, TILE_SIZE_DECODE"
    if placement.has_stages:
        warps = "launch_num_warps" if placement.has_warps else "None"
        targets, tail = "TILE_SIZE_PREFILL, TILE_SIZE_DECODE, launch_num_stages", ""
        args += f", {warps}, launch_num_stages, adjust_stages=True"
    else:
        targets, tail = "TILE_SIZE_PREFILL, TILE_SIZE_DECODE", "[:2]"
    if placement.has_window:
        args += f", sliding_window={WINDOW_NAME}"
    lines = [f"{ind}{targets} = {CLAMP_FUNCTION}(", f"{arg_ind}{args}", f"{ind}){tail}"]
    return newline.join(lines) + newline


def insert_clamp(source: str, site: Site = UNIFIED) -> str:
    """The source with the clamp placed; the source must not carry the clamp yet."""
    placement = plan(source, site)
    newline = newline_of(source)
    lines = source.splitlines(keepends=True)
    lines.insert(placement.call_at, call_text(placement, newline))
    lines.insert(placement.block_at, block_text(RUNTIME_BLOCK, newline))
    return "".join(lines)


def count_clamp(tree: ast.Module, site: Site = UNIFIED) -> ClampCount:
    definitions = [
        node for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == site.clamp_function
    ]
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.stmt) and _is_clamp_statement(node, (site.clamp_function,))]
    versions = [
        node.value.value for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
            isinstance(t, ast.Name) and t.id == VERSION_NAME for t in node.targets)
    ]
    return ClampCount(len(definitions), len(calls), versions[0] if len(versions) == 1 else None)


def sizes_from_shared_memory(tree: ast.Module) -> bool:
    """True when vLLM's own code (not our clamp) reads the device's shared-memory size."""
    for stmt in tree.body:
        if _is_own(stmt):
            continue
        for node in ast.walk(stmt):
            words = [getattr(node, attr, None) for attr in ("id", "attr", "name", "value", "arg")]
            if any(isinstance(w, str) and UPSTREAM_SIGNS.search(w) for w in words):
                return True
    return False


def strip_clamp(source: str) -> str:
    """The unpatched source of a patched file (unchanged when it carries no clamp)."""
    tree = parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and _is_clamp_statement(node):
            drop.update(range(node.lineno - 1, node.end_lineno))
    drop.update(block_lines(lines, [stmt for stmt in tree.body if _is_own(stmt)], BEGIN_MARKER, END_MARKER))
    return without(lines, drop)
