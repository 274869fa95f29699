"""Where the fp16 upcast goes in vLLM's gemma4_unified.py, decided from its syntax tree.

The site: the class Gemma4UnifiedVisionEmbedder (the 12B's encoder-free vision embedder), its method
forward(), and in it the two consecutive statements

    X, _ = self.patch_dense(Y)
    Z = self.patch_ln2(X)

They become the else branch of an `if` whose other branch runs the two layers in fp32 (runtime.py), so
vLLM's own lines still run, byte for byte, whenever the upcast is not wanted (bf16, fp32, a quantized
patch_dense). The runtime block goes before the class. Pure functions on source text (patches/placing.py
holds what the clamp shares with it).
"""
from __future__ import annotations

from door.problem import Problem
import ast
import re
from dataclasses import dataclass
from pathlib import Path

from patches.placing import (PatchCount, attached_start, block_lines, block_text, marked_block,
                             newline_of, owns, parse)

TARGET_IN_PACKAGE = Path("model_executor/models/gemma4_unified.py")
CLASS_NAME = "Gemma4UnifiedVisionEmbedder"
METHOD_NAME = "forward"
DENSE, NORM = "patch_dense", "patch_ln2"
# The layers the upcast runs in fp32, as the preflight and the docs name them
LAYERS = (f"vision_embedder.{DENSE}", f"vision_embedder.{NORM}")
WANTED_FUNCTION = "_vllm_turing_fp16_upcast"
DENSE_NORM_FUNCTION = "_vllm_turing_fp16_dense_norm"
VERSION_NAME = "_VLLM_TURING_FP16_VERSION"
BEGIN_MARKER = "# >>> vllm-turing fp16"
END_MARKER = "# <<< vllm-turing fp16"
OWN_PREFIX = "_vllm_turing_fp16"
CALL_COMMENT = "  # vllm-turing fp16 (patches/fp16_upcast)"

RUNTIME_BLOCK = marked_block(__package__, "runtime.py", BEGIN_MARKER, END_MARKER)
PATCH_VERSION = int(re.search(rf"^{VERSION_NAME} = (\d+)$", RUNTIME_BLOCK, re.MULTILINE).group(1))


@dataclass(frozen=True)
class Placement:
    """Where the pieces go (0-based line indices): the block before line block_at; the two statements
    on lines first..last (inclusive) wrapped; their indent and the one-level indent unit."""

    block_at: int
    first: int
    last: int
    indent: str
    unit: str
    dense_input: str
    norm_output: str


UpcastCount = PatchCount


def _self_call(node: ast.AST, attribute: str) -> ast.Call | None:
    """The call `self.<attribute>(...)` node is, else None."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attribute
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
        return node
    return None


def find_forward(tree: ast.Module) -> tuple[ast.ClassDef, ast.FunctionDef]:
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == CLASS_NAME]
    if len(classes) != 1:
        raise Problem(f"expected one top-level class {CLASS_NAME}, found {len(classes)}")
    methods = [node for node in classes[0].body if isinstance(node, ast.FunctionDef) and node.name == METHOD_NAME]
    if len(methods) != 1:
        raise Problem(f"{CLASS_NAME} has {len(methods)} methods {METHOD_NAME}(), expected one")
    return classes[0], methods[0]


def _one_name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def plan(source: str) -> Placement:
    """Where the upcast goes in an unpatched source; a Problem naming what was not found."""
    tree = parse(source)
    cls, forward = find_forward(tree)
    where = f"{CLASS_NAME}.{METHOD_NAME}()"
    for attribute in (DENSE, NORM):
        calls = [n for n in ast.walk(forward) if _self_call(n, attribute)]
        if len(calls) != 1:
            raise Problem(f"{where} calls self.{attribute} {len(calls)} times, expected once")
    body = forward.body
    dense_at = [i for i, stmt in enumerate(body) if isinstance(stmt, ast.Assign) and _self_call(stmt.value, DENSE)]
    if not dense_at:
        raise Problem(f"{where} calls self.{DENSE} outside a statement `X, _ = self.{DENSE}(Y)` of its body")
    i = dense_at[0]
    dense, norm = body[i], body[i + 1] if i + 1 < len(body) else None
    call = dense.value
    target = dense.targets[0] if len(dense.targets) == 1 else None
    if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(_one_name(e) for e in target.elts)):
        raise Problem(f"line {dense.lineno}: self.{DENSE}'s result is not unpacked as `X, _ =`")
    if len(call.args) != 1 or call.keywords or not _one_name(call.args[0]):
        raise Problem(f"line {dense.lineno}: self.{DENSE} is not called with one name")
    produced, dropped = target.elts[0].id, target.elts[1].id
    norm_call = _self_call(norm.value, NORM) if isinstance(norm, ast.Assign) else None
    if (norm_call is None or len(norm.targets) != 1 or not _one_name(norm.targets[0]) or norm_call.keywords
            or [_one_name(a) for a in norm_call.args] != [produced]):
        raise Problem(f"the statement after line {dense.lineno} is not `Z = self.{NORM}({produced})`")
    later = set().union(*(_loads(stmt) for stmt in body[i + 1:]))
    if dropped in later and dropped != produced:
        raise Problem(f"{where} reads {dropped}, the second result of self.{DENSE}, after line {dense.lineno}")
    following = body[i + 2].lineno if i + 2 < len(body) else None
    if norm.lineno <= dense.end_lineno or (following is not None and following <= norm.end_lineno):
        raise Problem(f"line {dense.lineno} or {norm.lineno} holds more than one statement")
    lines = source.splitlines(keepends=True)
    line = lines[dense.lineno - 1]
    indent = line[:len(line) - len(line.lstrip())]
    head = lines[forward.lineno - 1]
    head_indent = head[:len(head) - len(head.lstrip())]
    if not indent.startswith(head_indent) or indent == head_indent:
        raise Problem(f"line {dense.lineno} is not indented under {where}")
    return Placement(block_at=attached_start(lines, cls), first=dense.lineno - 1, last=norm.end_lineno - 1,
                     indent=indent, unit=indent[len(head_indent):], dense_input=call.args[0].id,
                     norm_output=norm.targets[0].id)


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def branch_text(placement: Placement, original: list[str], newline: str) -> str:
    """The `if` that replaces the two statements `original` (their lines, kept verbatim one level deeper)."""
    ind, unit = placement.indent, placement.unit
    head = [f"{ind}if {WANTED_FUNCTION}(self):{CALL_COMMENT}{newline}",
            f"{ind}{unit}{placement.norm_output} = {DENSE_NORM_FUNCTION}(self, {placement.dense_input}){newline}",
            f"{ind}else:{newline}"]
    return "".join(head + [unit + line if line.strip() else line for line in original])


def insert_upcast(source: str) -> str:
    """The source with the upcast placed; the source must not carry it yet."""
    placement = plan(source)
    newline = newline_of(source)
    lines = source.splitlines(keepends=True)
    original = lines[placement.first:placement.last + 1]
    lines[placement.first:placement.last + 1] = [branch_text(placement, original, newline)]
    lines.insert(placement.block_at, block_text(RUNTIME_BLOCK, newline))
    return "".join(lines)


def _is_upcast_if(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Call) and isinstance(node.test.func, ast.Name)
            and node.test.func.id == WANTED_FUNCTION)


def is_own(stmt: ast.stmt) -> bool:
    return owns(stmt, OWN_PREFIX)


def count_upcast(tree: ast.Module) -> UpcastCount:
    definitions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == DENSE_NORM_FUNCTION]
    calls = [n for n in ast.walk(tree) if _is_upcast_if(n)]
    versions = [stmt.value.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id == VERSION_NAME for t in stmt.targets)]
    return UpcastCount(len(definitions), len(calls), versions[0] if len(versions) == 1 else None)


def strip_upcast(source: str) -> str:
    """The unpatched source of a patched file (unchanged when it carries no upcast): each `if` put back
    to its else branch one level shallower, the runtime block taken out."""
    tree = parse(source)
    lines = source.splitlines(keepends=True)
    restored: dict[int, list[str]] = {}
    drop: set[int] = set()
    for node in ast.walk(tree):
        if not _is_upcast_if(node):
            continue
        if not node.orelse:
            raise Problem(f"line {node.lineno}: the upcast's `if` has no else branch holding vLLM's lines")
        unit = _indent(lines[node.orelse[0].lineno - 1])[len(_indent(lines[node.lineno - 1])):]
        kept = lines[node.orelse[0].lineno - 1:node.orelse[-1].end_lineno]
        if not unit or any(line.strip() and not line.startswith(unit) for line in kept):
            raise Problem(f"line {node.lineno}: the upcast's else branch is not indented one level")
        restored[node.lineno - 1] = [line[len(unit):] if line.strip() else line for line in kept]
        drop.update(range(node.lineno, node.end_lineno))
    drop.update(block_lines(lines, [stmt for stmt in tree.body if is_own(stmt)], BEGIN_MARKER, END_MARKER))
    out = []
    for i, line in enumerate(lines):
        if i in restored:
            out.extend(restored[i])
        elif i not in drop:
            out.append(line)
    return "".join(out)


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


__all__ = ["LAYERS", "PATCH_VERSION", "Placement", "TARGET_IN_PACKAGE", "count_upcast",
           "insert_upcast", "plan", "strip_upcast"]
