"""build.py's host packages are declared once, in the file the README's install command names,
and cover everything build.py imports: a host that follows the README gets no ImportError."""
import ast
import importlib.metadata
import re
import sys
from pathlib import Path
from tests import REPO

# This repository's own packages: build.py imports them from the checkout (the Kubernetes renderer
# sizes memory with the entrypoint's own staging_need), never from an index.
OWN_PACKAGES = {path.name for path in REPO.iterdir() if (path / "__init__.py").is_file()}


def requirement_names(path: Path) -> set:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.match(r"[A-Za-z0-9._-]+", line).group(0).lower())
    return names


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (prometheus_client is prometheus-client)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def readme_requirements_file() -> Path:
    commands = re.findall(r"python3 -m pip install -r (\S+?)`", (REPO / "README.md").read_text())
    assert commands, "the README names no `python3 -m pip install -r FILE` for build.py's packages"
    return REPO / commands[0]


def third_party_imports(paths) -> set:
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - OWN_PACKAGES


def test_the_readmes_install_command_covers_every_package_build_py_imports():
    declared = requirement_names(readme_requirements_file())
    # build.py, its subcommands, and the host-side modules they use (smoke's endpoint client and the
    # Prometheus text reader live in buildtool/endpoint/)
    imported = third_party_imports([REPO / "build.py", *sorted((REPO / "buildtool").rglob("*.py"))])
    distributions = importlib.metadata.packages_distributions()
    assert {"docker", "requests"} <= imported, "this test no longer sees build.py's imports"
    missing = {module for module in imported
               if not {normalized(d) for d in distributions.get(module, [module])} & {normalized(n) for n in declared}}
    assert not missing, f"build.py imports {sorted(missing)}, which {readme_requirements_file().name} lacks"


def test_the_test_requirements_include_the_hosts_rather_than_repeat_them():
    tests_file = REPO / "tests" / "requirements.txt"
    host_file = readme_requirements_file()
    assert f"-r {Path('..') / host_file.relative_to(REPO)}" in tests_file.read_text().splitlines()
    assert not requirement_names(tests_file) & requirement_names(host_file)
