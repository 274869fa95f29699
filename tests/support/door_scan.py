"""The door's watch: every place in the product's code that reads outside data or starts a child
without going through door/, found by syntax tree (tests/unit/test_door.py holds the product to it).

A site is (path, line, kind). The kinds:

    open        builtin open / io.open / codecs.open / os.open / os.fdopen on a path, for reading
                (a literal path or a write-only mode is not outside data coming in)
    path-read   <path>.read_text() / .read_bytes() / .open(...) on anything but Path("<literal>")
    json        json.load / json.loads / json.JSONDecoder
    yaml        yaml.load, safe_load, full_load, unsafe_load and their *_all
    archive     zipfile, tarfile, shutil.unpack_archive
    network     requests, urllib.request, urllib3, http.client, httpx, aiohttp (imported at all)
    hub         huggingface_hub's download and listing functions
    child       subprocess.run / Popen / call / check_*, os.system / os.popen / os.spawn* / posix_spawn, asyncio's subprocesses,
                pty.spawn, the docker SDK's containers.run / containers.create (unless the same
                function removes the container in a `finally`)

The product: build.py, buildtool/, entrypoint/, patches/, contract/, imagefacts/, tooling/, bench/
(its extensionless Python scripts too), base/, scripts/*.py. Not tests/, not door/ (the door itself).
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from tests import REPO

PRODUCT_DIRS = ("buildtool", "entrypoint", "patches", "contract", "imagefacts", "tooling", "bench", "base")

NETWORK_MODULES = {"requests", "urllib.request", "urllib3", "http.client", "httpx", "aiohttp"}
ARCHIVE_MODULES = {"zipfile", "tarfile"}
MODULE_KINDS = {**{m: "network" for m in NETWORK_MODULES}, **{m: "archive" for m in ARCHIVE_MODULES}}
SUBPROCESS_STARTS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
HUB_NAMES = {"hf_hub_download", "snapshot_download", "HfApi", "HfFileSystem", "list_repo_files", "list_repo_tree",
             "model_info", "repo_info", "get_hf_file_metadata", "get_paths_info", "file_exists", "InferenceClient",
             "list_repo_refs", "list_repo_commits", "get_safetensors_metadata", "hf_hub_url"}
YAML_LOADS = {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "full_load_all",
              "unsafe_load_all"}
OS_CHILDREN = {"system", "popen", "posix_spawn", "posix_spawnp", "spawnl", "spawnle", "spawnlp", "spawnlpe",
               "spawnv", "spawnve", "spawnvp", "spawnvpe", "forkpty"}
OPENERS = {("io", "open"), ("codecs", "open"), ("os", "open"), ("os", "fdopen")}


@dataclasses.dataclass(frozen=True, order=True)
class Site:
    path: str
    line: int
    kind: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.what}"


def product_files(root: Path = REPO) -> list[Path]:
    """Every Python file of the product under `root`."""
    found = [root / "build.py"] + sorted((root / "scripts").glob("*.py"))
    for top in PRODUCT_DIRS:
        for path in sorted((root / top).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or (path.suffix == "" and _python_script(path)):
                found.append(path)
    return [path for path in found if path.is_file()]


def _python_script(path: Path) -> bool:
    first = path.read_bytes()[:80].split(b"\n", 1)[0]  # the repo's own committed file
    return first.startswith(b"#!") and b"python" in first


def _literal_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain of names, '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _write_only(mode: ast.AST | None) -> bool:
    return _literal_str(mode) and "r" not in str(mode.value) and "+" not in str(mode.value)


def _mode(call: ast.Call, position: int) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == "mode"), None)


def _literal_path(node: ast.AST) -> bool:
    """Path("x") / Path("x") / "y": a path spelled in the code, not one handed in."""
    if _literal_str(node):
        return True
    if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in ("Path", "PurePath"):
        return all(_literal_str(a) for a in node.args) and bool(node.args)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _literal_path(node.left) and _literal_path(node.right)
    return False


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.sites: list[Site] = []
        self.aliases: dict[str, str] = {}  # local name -> module or module.name it stands for
        self.functions: list[ast.AST] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _removed_finally(self) -> bool:
        """The enclosing function removes the container in a `finally` (build.py turns SIGTERM into
        an exception, so that `finally` runs on Ctrl-C and SIGTERM alike): the docker SDK's guard."""
        if not self.functions:
            return False
        return any(isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "remove"
                   for block in ast.walk(self.functions[-1]) if isinstance(block, ast.Try)
                   for statement in block.finalbody for call in ast.walk(statement))

    def add(self, node: ast.AST, kind: str, what: str) -> None:
        self.sites.append(Site(self.path, node.lineno, kind, what))

    def _module(self, name: str, node: ast.AST) -> None:
        for module, kind in MODULE_KINDS.items():
            if name == module or name.startswith(module + "."):
                self.add(node, kind, f"import {name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(alias.name, node)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if full in MODULE_KINDS or module in MODULE_KINDS:
                self._module(full if full in MODULE_KINDS else module, node)
            if module == "subprocess" and alias.name in SUBPROCESS_STARTS:
                self.add(node, "child", f"from subprocess import {alias.name}")
            if module.startswith("huggingface_hub") and alias.name in HUB_NAMES:
                self.add(node, "hub", f"from {module} import {alias.name}")
            if module == "json" and alias.name in ("load", "loads", "JSONDecoder"):
                self.add(node, "json", f"from json import {alias.name}")
            if module == "yaml" and alias.name in YAML_LOADS:
                self.add(node, "yaml", f"from yaml import {alias.name}")
            if module == "shutil" and alias.name == "unpack_archive":
                self.add(node, "archive", "from shutil import unpack_archive")
            self.aliases[alias.asname or alias.name] = full
        self.generic_visit(node)

    def _resolved(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        full = self._resolved(dotted) if dotted else ""
        last = full.rsplit(".", 1)[-1] if full else (node.func.attr if isinstance(node.func, ast.Attribute) else "")
        if full.startswith("door."):
            pass  # the door itself
        elif full == "open" or full == "builtins.open":
            if node.args and not _literal_path(node.args[0]) and not _write_only(_mode(node, 1)):
                self.add(node, "open", "open(" + ast.unparse(node.args[0])[:60] + ")")
        elif tuple(full.rsplit(".", 1)) in OPENERS:
            writes = (any("O_WRONLY" in ast.unparse(a) for a in node.args[1:2]) if full == "os.open"
                      else _write_only(_mode(node, 1)))
            if not writes and node.args and not _literal_path(node.args[0]):
                self.add(node, "open", f"{full}(" + ast.unparse(node.args[0])[:60] + ")")
        elif full in ("json.load", "json.loads", "json.JSONDecoder"):
            self.add(node, "json", full)
        elif full.startswith("yaml.") and last in YAML_LOADS:
            self.add(node, "yaml", full)
        elif full.startswith("subprocess.") and last in SUBPROCESS_STARTS:
            self.add(node, "child", full)
        elif full == "shutil.unpack_archive":
            self.add(node, "archive", full)
        elif full.startswith("os.") and last in OS_CHILDREN:
            self.add(node, "child", full)
        elif full in ("asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "pty.spawn"):
            self.add(node, "child", full)
        elif full.startswith("huggingface_hub.") and last in HUB_NAMES:
            self.add(node, "hub", full)
        elif isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr in ("read_text", "read_bytes") and not _literal_path(receiver):
                self.add(node, "path-read", ast.unparse(node.func)[:70])
            elif node.func.attr == "open" and not _dotted(receiver).split(".")[0] in MODULE_KINDS \
                    and not _literal_path(receiver) and not _write_only(_mode(node, 0)):
                self.add(node, "path-read", ast.unparse(node.func)[:70])
            elif node.func.attr in ("run", "create") and _dotted(receiver).endswith("containers") \
                    and not self._removed_finally():
                self.add(node, "child", ast.unparse(node.func)[:70])
        self.generic_visit(node)


def scan_source(text: str, path: str) -> list[Site]:
    """The sites in one module's source (`path` is how they name it)."""
    visitor = _Visitor(path)
    visitor.visit(ast.parse(text, filename=path))
    return sorted(set(visitor.sites))


OUTSIDE_READERS = {"door.files.read_bytes", "door.files.read_json", "door.files.read_object", "door.files.read_text",
                   "door.files.opened", "door.files.parse_json", "door.files.word_json"}
OUTSIDE_DOORS = ("door.remote.", "door.data.", "door.archives.", "door.paths.")


def outside_readers(root: Path = REPO) -> dict[str, set[str]]:
    """module path -> the door functions of outside data it calls (files, remote reads, parsed data,
    archives, remote names): each such module is a reader the hostile harness must drive."""
    found: dict[str, set[str]] = {}
    for path in product_files(root):
        visitor = _Visitor(str(path.relative_to(root)))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        visitor.visit(tree)  # fills the aliases
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _dotted(node.func):
                full = visitor._resolved(_dotted(node.func))
                if full in OUTSIDE_READERS or full.startswith(OUTSIDE_DOORS):
                    found.setdefault(visitor.path, set()).add(full)
    return found


def scan_product(root: Path = REPO) -> list[Site]:
    sites = []
    for path in product_files(root):
        sites += scan_source(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
    return sites


if __name__ == "__main__":
    for site in scan_product():
        print(site)
