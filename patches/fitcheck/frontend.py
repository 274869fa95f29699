"""Triton's front end run once per kernel source, and reused where nothing it read differs.

`triton.compile` turns an ASTSource into TTIR in Python (`ast_to_ttir`: 39 % of a shared-memory-only
compile here, docs/benchmarks.md), once per compile: again for every warps and stages the tile search
tries, and again for every target. What the front end makes is a function of

- the source: the kernel's code and the code it calls, its signature, constexprs and specialization,
  all in `ASTSource.hash()` (Triton's own cache key for the source);
- the compile options it reads (`builder.options.<name>`: fp8 types, dot precisions, debug, ...);
- the codegen functions it calls (`min_dot_size`, `convert_custom_types`: the backend's per target);
- the backend's module map (the same libdevice module for every CUDA target).

`remembered(source)` wraps an ASTSource so that its first front-end run records every option it
read (name and value) and every codegen function it called (its code, constants and closure), with
the TTIR it made. A later compile of a source with the same hash whose options give equal values
for every name read, and whose backend's functions of those names are the same code, takes the
recorded TTIR, parsed into its own context; any difference, or a read the first run did not make,
runs the front end again. Everything after the front end (Triton's TTIR and TTGIR passes, the
shared-memory allocation, the cross-check's full compiles) runs for every compile as before.

The records live in one folder per run (`start()`, before the workers and the group child fork),
shared by every process of that run and removed by the one that made it: nothing outlives the run,
so a changed Triton or kernel never meets an old record.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import marshal
import os
import shutil
import tempfile
from pathlib import Path

_FOLDER: list[Path] = []
_ABSENT = "<absent>"
# Counted per process: (front-end runs, records reused), for bench/fitcheck and the tests.
COUNTS = {"ran": 0, "reused": 0}


def start() -> Path | None:
    """The run's record folder, made on the first call; every process forked after it shares it. None
    where no temporary folder can be made (a read-only root without a writable TMPDIR): then every
    compile runs its own front end, as Triton does."""
    if not _FOLDER:
        try:
            folder = Path(tempfile.mkdtemp(prefix="vllm-turing-frontend-"))
        except OSError:
            _FOLDER.append(None)
            return None
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, ignore_errors=True))
        _FOLDER.append(folder)
    return _FOLDER[0]


def code_identity(function) -> str:
    """What decides a Python function's behaviour besides its module: its code (bytecode, constants,
    names, nested code) and its closure's values."""
    cells = tuple(repr(cell.cell_contents) for cell in (function.__closure__ or ()))
    defaults = repr(getattr(function, "__defaults__", None))
    digest = hashlib.sha256(marshal.dumps(function.__code__))
    digest.update(repr((function.__module__, function.__qualname__, cells, defaults)).encode())
    return digest.hexdigest()


class _ReadOptions:
    """The compile options as the front end sees them, each attribute read noted with its value."""

    def __init__(self, options):
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "reads", {})

    def __getattr__(self, name):
        try:
            value = getattr(self._options, name)
        except AttributeError:
            self.reads[name] = _ABSENT
            raise
        self.reads[name] = repr(value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"the compile options are read-only (the front end set {name})")


def _noting_calls(codegen_fns: dict, called: set) -> dict:
    def noting(name, function):
        def call(*args, **kwargs):
            called.add(name)
            return function(*args, **kwargs)
        return call
    return {name: noting(name, function) for name, function in codegen_fns.items()}


def _option_value(options, name: str) -> str:
    try:
        return repr(getattr(options, name))
    except AttributeError:
        return _ABSENT


def matches(record: dict, options, codegen_fns: dict, module_map: dict) -> bool:
    """Whether the front end, given these, would read exactly what `record` says it read."""
    return (record["module_map"] == _module_map_identity(module_map)
            and all(_option_value(options, name) == value for name, value in record["options"].items())
            and all(name in codegen_fns and code_identity(codegen_fns[name]) == identity
                    for name, identity in record["calls"].items()))


def _module_map_identity(module_map: dict) -> dict:
    return {name: getattr(module, "__name__", repr(module)) for name, module in sorted(module_map.items())}


def _records(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []


def _add(path: Path, record: dict) -> None:
    """Appends a record; two processes adding at once may lose one (then its source runs again)."""
    records = _records(path) + [record]
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        json.dump(records, stream)
    os.replace(temporary, path)


def _parsed(text: str, context, folder: Path):
    from triton._C.libtriton import ir

    handle, name = tempfile.mkstemp(dir=folder, suffix=".ttir")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        module = ir.parse_mlir_module(name, context)
        module.context = context  # what ast_to_ttir's module carries (IRSource.make_ir sets it too)
        return module
    finally:
        os.unlink(name)


def front_end(source, run, target, options, codegen_fns, module_map, context):
    """The TTIR of `source` (run: the ASTSource's own make_ir), recorded or reused as the module says."""
    folder = start()
    if folder is None:
        COUNTS["ran"] += 1
        return run(target, options, codegen_fns, module_map, context)
    path = folder / f"{source.hash()}.json"
    for record in _records(path):
        if matches(record, options, codegen_fns, module_map):
            COUNTS["reused"] += 1
            return _parsed(record["ttir"], context, folder)
    read, called = _ReadOptions(options), set()
    module = run(target, read, _noting_calls(codegen_fns, called), module_map, context)
    COUNTS["ran"] += 1
    _add(path, {"options": read.reads, "calls": {name: code_identity(codegen_fns[name]) for name in sorted(called)},
                "module_map": _module_map_identity(module_map), "ttir": str(module)})
    return module


_CLASS: list[type] = []


def remembered(source):
    """`source` (an ASTSource) as one whose front end goes through front_end()."""
    if not _CLASS:
        from triton.compiler import ASTSource

        class RememberedSource(ASTSource):
            def make_ir(self, target, options, codegen_fns, module_map, context):
                return front_end(self, super().make_ir, target, options, codegen_fns, module_map, context)

        _CLASS.append(RememberedSource)
    copy = _CLASS[0].__new__(_CLASS[0])
    copy.__dict__.update(source.__dict__)
    return copy
