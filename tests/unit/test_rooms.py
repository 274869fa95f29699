"""The house's rooms (issue 63): every Python module of the repository, the extensionless bench
scripts included, read with `ast`; an import, at the top or inside a function, may only reach a room
below its own (door < contract < imagefacts < patches < entrypoint < buildtool (+ build.py) <
tooling < bench < tests); tooling/ and bench/ never import tests; and the module graph has no circle.
The checker is first held to a planted violation of each kind, so a green run is not a blind one."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests import REPO

ROOMS = ("door", "contract", "imagefacts", "patches", "entrypoint", "buildtool", "tooling", "bench", "tests")
# Top-level names that are not a room's folder, and the room each lives in.
HOMES = {"build": "buildtool", "monitoring": "tooling", "base": "buildtool"}
NO_TESTS = ("tooling", "bench")
SKIP = (".cache", ".git", ".venv", "node_modules")


def module_name(relative: Path) -> str:
    parts = list(relative.parts)
    if parts[-1] == "__init__.py":
        parts.pop()
    elif parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    return ".".join(parts)


def is_python(path: Path) -> bool:
    if path.suffix == ".py":
        return True
    if path.suffix or not path.is_file():
        return False
    with path.open("rb") as stream:
        first = stream.readline(200)
    return first.startswith(b"#!") and b"python" in first


def repo_sources(root: Path) -> dict[str, str]:
    """Module name -> source text, for every Python file of the repository."""
    sources = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in SKIP or "__pycache__" in relative.parts or not is_python(path):
            continue
        sources[module_name(relative)] = path.read_text(encoding="utf-8")
    return sources


def room_of(module: str) -> str | None:
    top = module.split(".")[0]
    return HOMES.get(top, top if top in ROOMS else None)


def resolve(name: str, modules: set[str]) -> str | None:
    """The repository module an import of NAME executes last: NAME, or its longest known prefix."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, source: str, modules: set[str], package: bool) -> set[str]:
    """The repository modules MODULE imports anywhere in its text (function-level imports included,
    and a literal importlib.import_module / runpy.run_module name)."""
    found = set()
    here = module.split(".") if package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("import_module", "run_module") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        for name in names:
            target = resolve(name, modules)
            if target and target != module:
                found.add(target)
    return found


def import_graph(sources: dict[str, str], packages: set[str]) -> dict[str, set[str]]:
    modules = set(sources)
    return {module: imports_of(module, text, modules, module in packages) for module, text in sources.items()}


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that runs up a room or from tooling/bench into tests, and each module outside a room."""
    found = []
    for module, targets in sorted(graph.items()):
        room = room_of(module)
        if room is None:
            found.append(f"{module}: in no room (place its folder in ROOMS or HOMES)")
            continue
        for target in sorted(targets):
            other = room_of(target)
            if other == "tests" and room in NO_TESTS:
                found.append(f"{module} -> {target}: {room} imports tests")
            elif other is not None and ROOMS.index(other) > ROOMS.index(room):
                found.append(f"{module} -> {target}: {room} imports {other}, a room above it")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def repo_graph(root: Path) -> dict[str, set[str]]:
    sources = repo_sources(root)
    packages = {module_name(path.relative_to(root)) for path in root.rglob("__init__.py")
                if path.relative_to(root).parts[0] not in SKIP}
    return import_graph(sources, packages)


# The checker, held to planted violations first.

def plant(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if relative.startswith("bench/"):
            path.chmod(0o755)
    return repo_graph(tmp_path)


def test_a_lazy_upward_import_is_found(tmp_path):
    graph = plant(tmp_path, {"buildtool/__init__.py": "", "buildtool/smoke.py": "def f():\n    import tooling.x\n",
                             "tooling/__init__.py": "", "tooling/x.py": "import door.problem\n",
                             "door/__init__.py": "", "door/problem.py": ""})
    assert violations(graph) == ["buildtool.smoke -> tooling.x: buildtool imports tooling, a room above it"]


def test_a_relative_import_and_build_py_are_placed(tmp_path):
    graph = plant(tmp_path, {"build.py": "from tooling import x\n", "tooling/__init__.py": "",
                             "tooling/x.py": "from . import y\nfrom .y import z\n", "tooling/y.py": "z = 1\n"})
    assert graph["tooling.x"] == {"tooling.y"}
    assert violations(graph) == ["build -> tooling.x: buildtool imports tooling, a room above it"]


def test_an_extensionless_bench_script_that_imports_tests_is_found(tmp_path):
    graph = plant(tmp_path, {"bench/fetch": "#!/usr/bin/env python3\nfrom tests.support import mirror\n",
                             "bench/notes": "not python\n", "tests/__init__.py": "",
                             "tests/support/__init__.py": "", "tests/support/mirror.py": ""})
    assert "bench.notes" not in graph
    assert violations(graph) == ["bench.fetch -> tests.support.mirror: bench imports tests"]


def test_a_runpy_name_and_a_tooling_import_of_tests_are_found(tmp_path):
    graph = plant(tmp_path, {"tooling/__init__.py": "", "tooling/census.py": "from tests.support.towers import T\n",
                             "entrypoint/__init__.py": "", "entrypoint/main.py": "import runpy\nrunpy.run_module('tooling.census')\n",
                             "tests/__init__.py": "", "tests/support/__init__.py": "", "tests/support/towers.py": "T = 1\n"})
    assert violations(graph) == ["entrypoint.main -> tooling.census: entrypoint imports tooling, a room above it",
                                 "tooling.census -> tests.support.towers: tooling imports tests"]


def test_a_folder_in_no_room_is_named(tmp_path):
    assert violations(plant(tmp_path, {"stray/tool.py": ""})) == ["stray.tool: in no room (place its folder in ROOMS or HOMES)"]


def beside_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph less each module's imports of its own enclosing packages: Python runs a package's
    __init__ before any module in it whatever the module imports, so a family's launches.py reading
    its package's constants adds no order the package does not already have."""
    return {module: {target for target in targets if not module.startswith(target + ".")}
            for module, targets in graph.items()}


def test_a_circle_is_found(tmp_path):
    graph = plant(tmp_path, {"patches/__init__.py": "", "patches/a.py": "from patches import b\n",
                             "patches/b.py": "def f():\n    from patches.c import g\n", "patches/c.py": "import patches.a\n",
                             "patches/d.py": "import patches.a\n"})
    assert violations(graph) == []
    assert circles(graph) == [["patches.a", "patches.b", "patches.c"]]


def test_a_package_that_lazily_imports_its_own_module_is_no_circle(tmp_path):
    graph = plant(tmp_path, {"patches/__init__.py": "", "patches/kda/__init__.py": "K = 1\ndef record():\n    from . import launches\n",
                             "patches/kda/launches.py": "from patches.kda import K\nfrom patches import other\n",
                             "patches/other.py": "def f():\n    from patches.kda import launches\n"})
    assert circles(beside_parents(graph)) == [["patches.kda.launches", "patches.other"]]
    graph["patches.other"] = set()
    assert circles(graph) == [["patches.kda", "patches.kda.launches"]]
    assert circles(beside_parents(graph)) == []


# The repository.

@pytest.fixture(scope="module")
def graph():
    return repo_graph(REPO)


def test_the_graph_reads_the_whole_repository(graph):
    assert {"build", "bench.fetch", "door.problem", "tests.unit.test_rooms"} <= set(graph)
    assert graph["tests.unit.test_rooms"] == {"tests"}


def test_no_import_runs_up_a_room_and_tooling_and_bench_never_import_tests(graph):
    assert violations(graph) == []


def test_the_module_graph_has_no_circle(graph):
    assert circles(beside_parents(graph)) == []
