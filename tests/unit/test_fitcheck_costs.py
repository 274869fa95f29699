"""The fit check's cost by family (bench/fitcheck --build-step): which family each shape of the built-in
matrix is charged to, and the breakdown over the compiler's and the recorder's ledgers."""
from types import SimpleNamespace

from patches.fitcheck import families
from patches.fitcheck.attention import LayerShape
from patches.fitcheck.compiler import FULL, RECORDED, SHARED_ONLY, CompileResult, Compiled
from tooling.fitcheck_costs import UNCHARGED, by_family


def test_every_shape_of_the_matrix_is_charged_to_the_family_that_put_it_there():
    pairs = families.builtin_by_family("all")
    assert [shape for _, shape in pairs] == families.builtin_shapes("all")
    names = {name for name, _ in pairs}
    assert names == {family.name for family in families.FAMILIES if family.matrix or family.builtin}
    assert [name for name, _ in families.builtin_by_family("gemma4")] == ["gemma4"] * 30
    origins = {shape: name for name, shape in pairs}
    hybrid_attention = next(shape for name, shape in pairs if name == "gated_delta_net" and isinstance(shape, LayerShape))
    assert families.family_of(hybrid_attention).name == "gemma4", "the rules are the first attention family's"
    assert families.charged_to(hybrid_attention, origins) == "gated_delta_net", "the cost is the hybrid's"


def test_a_shape_outside_the_matrix_is_charged_by_its_type():
    own = LayerShape("my-model", "global", 8, 2, 128, None)
    assert families.charged_to(own, {}) == families.family_of(own).name


def test_costs_add_up_per_family_and_the_most_expensive_comes_first():
    a, b = LayerShape("a", "global", 8, 2, 128, None), LayerShape("b", "global", 8, 2, 128, None)
    case = {shape: SimpleNamespace(shape=shape) for shape in (a, b)}
    ledger = [Compiled(SHARED_ONLY, 75, "k", CompileResult(1, 4, 1, cpu_s=2.0), case[a]),
              Compiled(RECORDED, 75, "k", CompileResult(1, 4, 1), case[a]),
              Compiled(FULL, 75, "k", CompileResult(1, 4, 1, cpu_s=5.0), case[b]),
              Compiled(SHARED_ONLY, 75, "k", CompileResult(1, 4, 1, cpu_s=0.5), None)]
    costs = by_family(ledger, [(a, 1.0), (a, 0.5), (b, 0.25)], lambda shape: {"a": "alpha", "b": "beta"}[shape.model])
    assert [cost.as_dict() for cost in costs] == [
        {"family": "beta", "recording_s": 0.2, "recording_calls": 1, "compiles": {FULL: 1}, "compile_cpu_s": 5.0},
        {"family": "alpha", "recording_s": 1.5, "recording_calls": 2, "compiles": {RECORDED: 1, SHARED_ONLY: 1},
         "compile_cpu_s": 2.0},
        {"family": UNCHARGED, "recording_s": 0.0, "recording_calls": 0, "compiles": {SHARED_ONLY: 1},
         "compile_cpu_s": 0.5}]
