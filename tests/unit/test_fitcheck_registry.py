"""The fit check's family registry (patches/fitcheck/families): the package's import graph has no circles,
and a family added as one module is picked up by the proof's plan, the built-in matrix, the fit table's
verdict keys, the lookup and the preflight's naming, with no other edit."""
from __future__ import annotations

from contract.model_config import ConfigProblem, parse_config
import ast
import json
import textwrap
from pathlib import Path

import pytest

from patches.fitcheck import families, lookup, fit_table as table
from patches.fitcheck.proof import FitOptions, plan
from tests import REPO

PACKAGE = REPO / "patches" / "fitcheck"
VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, name: str, modules) -> set[str]:
    """The modules `path` imports anywhere in it (module level and inside functions): `from package import
    module` is an edge to the module (a package's __init__ runs before any of its modules whatever they
    import), `from module import name` an edge to the module."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    # A module's edge to a package it lies in is no circle: the package has run before any of its modules
    # (a family's launches.py reads its package's constants, and the package imports it inside `record`).
    return {name: {other for other in imported(path, name, modules)
                   if other in modules and other != name and not name.startswith(other + ".")}
            for name, path in modules.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph (its modules in order), None when it has none."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for other in sorted(graph[node]):
            if state.get(other) == "open":
                return stack[stack.index(other):] + [other]
            if other not in state and (found := visit(other)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    return next((found for node in sorted(graph) if node not in state and (found := visit(node))), None)


def test_the_package_imports_without_circles_counting_function_level_imports():
    graph = import_graph()
    assert "patches.fitcheck.families.mamba2" in graph and graph["patches.fitcheck.families.mamba2"]
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_the_circle_finder_finds_a_circle_through_a_function_level_import():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


TOY = '''
"""A toy family for the registry's test: a model type whose mixer is a convolution of width `toy_width`."""
from dataclasses import dataclass

from patches.fitcheck.family import Family, Refusal
from patches.fitcheck.family import RecordedShape


@dataclass(frozen=True)
class ToyShape(RecordedShape):
    model: str
    width: int
    tensor_parallel: int = 1
    mixer: str = "toy"
    layer: str = "toy"
    FIELDS = ("mixer", "width")


def read(text, model_type, model, where, tensor_parallel, dtype):
    return ToyShape(model, text.positive_int("toy_width", 3), tensor_parallel)


FAMILY = Family(
    name="toy", role="mixer", description="toy convolution", proves="the toy convolutions of Toy models",
    reads_phrase="the toy convolutions of toy_hybrid", shape_type=ToyShape, model_types=("toy_hybrid",),
    mixer_types=("toy_hybrid",), read=read, record=lambda shape, cc, limit, dtype: [],
    describe=lambda shape: f"toy convolution: width {shape.width}",
    refused_on=lambda shape, cc: Refusal(f"{shape.label}: toy needs 7.5", "use a T4") if cc < 75 else None,
    unrecorded_on=lambda shape, cc: f"{shape.label}: toy runs otherwise from 9.0" if cc >= 90 else None,
    builtin={"toy-1b": {"model_type": "toy_hybrid", "num_attention_heads": 8, "num_key_value_heads": 2,
                        "head_dim": 64, "toy_width": 5}},
    order=75)
'''
TOY_CONFIG = {"model_type": "toy_hybrid", "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
              "toy_width": 7}


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    """The registry with one more module on the families package's path (the way a new family is added),
    and nothing else changed."""
    folder = tmp_path / "more_families"
    folder.mkdir()
    (folder / "toy.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(folder)])
    monkeypatch.setattr(families, "FAMILIES", families.discover())
    yield next(family for family in families.FAMILIES if family.name == "toy")
    import sys
    sys.modules.pop("patches.fitcheck.families.toy", None)


def saved(tmp_path, config: dict) -> Path:
    path = tmp_path / "toy-model" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_a_family_module_is_all_the_proof_needs_to_plan_its_shapes(toy_family, tmp_path):
    planned = plan(FitOptions(device="sm75", model_config=str(saved(tmp_path, TOY_CONFIG))))
    toy = [shape for shape in planned.shapes if isinstance(shape, toy_family.shape_type)]
    attention = [shape for shape in planned.shapes if not families.is_mixer(shape)]
    assert [shape.width for shape in toy] == [7] and attention and all(s.block_size == 0 for s in attention)
    assert families.record(toy[0], 75, 65536, "float16") == []
    with pytest.raises(families.UnprovenLayers, match="toy runs otherwise from 9.0"):
        plan(FitOptions(device="sm90", model_config=str(saved(tmp_path / "b", TOY_CONFIG))))
    with pytest.raises(ConfigProblem, match="toy needs 7.5"):
        plan(FitOptions(device="sm70", model_config=str(saved(tmp_path / "c", TOY_CONFIG))))


def test_a_family_module_adds_its_models_to_the_built_in_matrix(toy_family):
    toy = [shape for shape in families.builtin_shapes("all") if isinstance(shape, toy_family.shape_type)]
    assert {(shape.model, shape.width) for shape in toy} == {("toy-1b", 5), ("toy-1b-tp2", 5), ("toy-1b-tp4", 5)}
    assert not [shape for shape in families.builtin_shapes("attention") if families.is_mixer(shape)
                and isinstance(shape, toy_family.shape_type)]


def test_a_family_module_is_keyed_in_the_table_and_answered_by_the_lookup(toy_family, tmp_path):
    shapes = families.model_layers(parse_config(TOY_CONFIG, "config.json"), "m", "config.json")
    toy = shapes[-1]
    fields, key = table.verdict_fields(toy, 75, 65536)
    assert fields["mixer"] == "toy" and key == (75, 65536, "float16", "toy", 7)
    rows = [{"model": s.model, "layer": s.layer, "shared": 1024, "fits": True} for s in shapes]
    attention = [s for s in shapes if not families.is_mixer(s)]
    document = table.merge(None, [], VERSIONS, table.shape_verdicts(rows, attention, 75, 65536),
                           table.shape_verdicts(rows, [toy], 75, 65536))
    path = tmp_path / "fit-table.json"
    table.write_table(path, document)
    found = lookup.decide(table.read_table(path), shapes, 75, 65536, VERSIONS)
    assert found.hit and found.all_fit
    missing = lookup.decide(table.merge(None, [], VERSIONS, table.shape_verdicts(rows, attention, 75, 65536)),
                            shapes, 75, 65536, VERSIONS)
    assert not missing.hit and "toy convolution: width 7" in missing.miss


def test_a_family_module_is_named_by_the_preflight_and_by_the_unread_mixer_message(toy_family):
    from entrypoint.checks.clamp import proven_families

    assert "the toy convolutions of Toy models" in proven_families()
    with pytest.raises(families.UnprovenLayers, match="the toy convolutions of toy_hybrid"):
        families.model_layers(parse_config({"model_type": "plamo2", "num_attention_heads": 8}, "config.json"), "p", "config.json")


# The toy family again, as a package that records its own launches: its module with `record` importing the
# package's launches.py, and a ReplaySSM rule the preflight's question reaches through the registry.
TOY_MIXER = {
    "__init__.py": TOY.replace("toy", "toyconv").replace("record=lambda shape, cc, limit, dtype: []", "record=record")
    .replace("order=75)", "order=75, replayssm_unproven=replay)").replace("\n\nFAMILY = Family(", '''

TOY_HISTORY = 8


def record(shape, cc, limit, dtype):
    from patches.fitcheck.families.toyconv.launches import record_toyconv

    return record_toyconv(shape, dtype)


def replay(model_type, buffer_len):
    return "the toy replay" if model_type == "toyconv_hybrid" else None


FAMILY = Family('''),
    "launches.py": '''
"""The toy convolution's launches: one per history step of its package's TOY_HISTORY."""
from patches.fitcheck.families.toyconv import TOY_HISTORY


def record_toyconv(shape, dtype):
    return [("toy_conv_kernel", shape.width, dtype, step) for step in range(TOY_HISTORY)]
''',
}


@pytest.fixture
def toy_mixer_family(tmp_path, monkeypatch):
    """The registry with one more family package (its reader and its own launches), nothing else changed."""
    folder = tmp_path / "more_families" / "toyconv"
    folder.mkdir(parents=True)
    for name, text in TOY_MIXER.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(folder.parent)])
    monkeypatch.setattr(families, "FAMILIES", families.discover())
    yield next(family for family in families.FAMILIES if family.name == "toyconv")
    import sys
    for name in ("patches.fitcheck.families.toyconv.launches", "patches.fitcheck.families.toyconv"):
        sys.modules.pop(name, None)


def test_a_mixer_family_records_its_own_launches_through_the_registry(toy_mixer_family):
    config = parse_config({**TOY_CONFIG, "model_type": "toyconv_hybrid", "toyconv_width": 5}, "config.json")
    toy = families.model_layers(config, "m", "config.json")[-1]
    assert isinstance(toy, toy_mixer_family.shape_type) and families.is_mixer(toy)
    assert families.record(toy, 75, 65536, "float16") == [("toy_conv_kernel", 5, "float16", step) for step in range(8)]
    assert table.verdict_fields(toy, 75, 65536)[1] == (75, 65536, "float16", "toyconv", 5)
    # the preflight's ReplaySSM question reaches the family through the registry; other types keep theirs
    assert families.replayssm_unproven("toyconv_hybrid", None) == "the toy replay"
    assert families.replayssm_unproven("nemotron_h", None) is None
    assert "at 16 (the default)" in families.replayssm_unproven("nemotron_h", 64)


def test_without_the_module_the_toy_model_is_not_proven():
    with pytest.raises(families.UnprovenLayers, match="toy_hybrid"):
        families.model_layers(parse_config(dict(TOY_CONFIG, mamba_d_state=16), "config.json"), "m", "config.json")


@pytest.mark.parametrize("module", ["patches.fitcheck.proof", "patches.fitcheck.lookup"])
def test_what_merges_or_looks_verdicts_up_knows_every_familys_verdict_keys(module):
    # table.py keys a mixer verdict by its kind's fields, known once the kind's module is imported
    import subprocess
    import sys

    code = (f"import {module}\nfrom patches.fitcheck import families, family\n"
            "kinds = {f.shape_type.mixer for f in families.FAMILIES if f.role in ('mixer', 'latent')}\n"
            "assert kinds and kinds <= set(family.fields_by_kind()), kinds")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
