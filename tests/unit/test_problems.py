"""One kind of problem (docs/architecture.md, "Problems"): the product defines at most PROBLEM_BUDGET
exception classes, every one of them a door.problem.Problem (a signal that must pass `except
Exception` aside), and one UsageError. Read from the source with ast, so a class added anywhere in
the product is counted the day it lands."""
from __future__ import annotations

import ast
import builtins
from pathlib import Path

from tests import REPO

PRODUCT = ("door", "contract", "imagefacts", "patches", "entrypoint", "buildtool", "tooling", "bench")
PROBLEM_BUDGET = 15
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)}


def product_sources(root: Path = REPO) -> dict[str, str]:
    """Every product module's source by its path: the rooms' .py files, bench's extensionless
    Python scripts and build.py."""
    found = {"build.py": (root / "build.py").read_text()}
    for room in PRODUCT:
        for path in sorted((root / room).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and (
                    path.suffix == ".py" or (path.suffix == "" and path.read_bytes()[:40].startswith(b"#!")
                                             and b"python" in path.read_bytes()[:40])):
                found[str(path.relative_to(root))] = path.read_text()
    return found


def exception_classes(sources: dict[str, str]) -> dict[str, tuple[str, list[str]]]:
    """`module:Class` -> (the class's name, its bases' names) for every class that derives, through
    builtins or other product classes, from BaseException."""
    classes = []
    for where, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                classes.append((f"{where}:{node.name}", node.name, bases))
    exceptions = set(BUILTIN_EXCEPTIONS)
    while True:
        more = {name for _, name, bases in classes if name not in exceptions and exceptions.intersection(bases)}
        if not more:
            break
        exceptions |= more
    return {key: (name, bases) for key, name, bases in classes if name in exceptions}


def outside_problem(found: dict[str, tuple[str, list[str]]]) -> list[str]:
    """The exception classes that are neither Problem nor derived from it (signals aside: a
    BaseException that `except Exception` must not catch)."""
    parents = {name: bases for name, bases in found.values()}

    def is_problem(name: str, seen=()) -> bool:
        return name == "Problem" or any(is_problem(b, (*seen, name)) for b in parents.get(name, ()) if b not in seen)

    return sorted(key for key, (name, bases) in found.items() if not is_problem(name) and bases != ["BaseException"])


def test_the_counter_finds_a_planted_class():
    planted = {"door/problem.py": "class Problem(Exception):\n    pass\n\nclass UsageError(Problem):\n    pass\n",
               "buildtool/x.py": "class Stray(ValueError):\n    pass\n\nclass Deeper(UsageError):\n    pass\n\n"
                                 "class NotAnError:\n    pass\n"}
    found = exception_classes(planted)
    assert sorted(found) == ["buildtool/x.py:Deeper", "buildtool/x.py:Stray", "door/problem.py:Problem",
                             "door/problem.py:UsageError"]
    assert outside_problem(found) == ["buildtool/x.py:Stray"]


def test_the_product_has_one_kind_of_problem_within_its_budget():
    found = exception_classes(product_sources())
    assert len(found) <= PROBLEM_BUDGET, f"{len(found)} exception classes, budget {PROBLEM_BUDGET}: {sorted(found)}"
    assert [key for key, (name, _) in found.items() if name == "UsageError"] == ["door/problem.py:UsageError"]
    assert outside_problem(found) == [], "exception classes that are not a door.problem.Problem"
