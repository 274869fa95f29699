"""The image ships bytecode for every module a start imports (the server may run on a read-only root, where
Python cannot write __pycache__) and none for the build side's (the -x of the Dockerfile's code stage,
buildtool/image/code_zip.py): no module a start imports may be on that list."""
import json
import re
import subprocess
import sys

from contract.layout import IMAGE_PACKAGES
from tests.unit.test_dockerfile_agreement import instructions
from tests import REPO

IMAGE_ROOT = "/opt/vllm-turing-code/"  # the code stage compiles our packages there

# Imports what a start can import, in a fresh interpreter: every module of the entrypoint (its checks, the
# fetch, the readiness probe, what sitecustomize installs in the server), and the fit check answered from a
# table for each model of the built-in matrix on a Turing and an Ampere GPU in fp16 and bf16, with the clamp
# check's other lazy imports; prints the modules then loaded and how many lookups the table answered.
START = r"""
import importlib, json, pkgutil, sys, tempfile
from pathlib import Path
import entrypoint
for info in pkgutil.walk_packages(entrypoint.__path__, "entrypoint."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
from entrypoint.checks import clamp, parallel
from contract.model_config import parse_config
from patches.fitcheck import families, lookup, fit_table as table
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS

versions = {"vllm": "0.33.0", "triton": "3.8.0"}
models = dict(BUILTIN_CONFIGS, **families.builtin_models())
answered = 0
for cc, dtype in ((75, "float16"), (86, "float16"), (86, "bfloat16")):
    shapes = {name: families.model_layers(parse_config(config, name), name, name, 1, dtype) for name, config in models.items()}
    rows = [{"model": s.model, "layer": s.layer, "shared": 1024, "fits": True} for found in shapes.values() for s in found]
    every = [s for found in shapes.values() for s in found]
    attention = [s for s in every if not families.is_mixer(s)]
    mixers = [s for s in every if families.is_mixer(s)]
    document = table.merge(None, [], versions, table.shape_verdicts(rows, attention, cc, 65536, dtype),
                           table.shape_verdicts(rows, mixers, cc, 65536, dtype))
    path = Path(tempfile.mkdtemp()) / "fit-table.json"
    table.write_table(path, document)
    for name, config in models.items():
        typed = parse_config(config, name)
        clamp.run_dtype(typed, divmod(cc, 10), "auto")
        clamp.replayssm_unproven(True, 8, typed.type_of_text)
        parallel.attention_layers(config, name, name, 2) if hasattr(parallel, "attention_layers") else None
        answered += lookup.decide(table.read_table(path), shapes[name], cc, 65536, versions, dtype).hit
        lookup.lookup(path, typed, cc, 65536, f"/models/{name}/config.json", 1, dtype, towers=True)
clamp.proven_families()
print(json.dumps({"answered": answered, "modules": sorted(sys.modules)}))
"""


def excluded_pattern() -> str:
    [step] = [text for text in instructions(REPO / "Dockerfile") if "code_zip" in text]
    return re.search(r"-x '([^']+)'", step).group(1)


def image_path(module: str) -> str | None:
    """Where a module of ours lies in the code stage's folder, as the -x pattern sees it; None for one not ours."""
    if module.split(".")[0] not in IMAGE_PACKAGES:
        return None
    path = REPO.joinpath(*module.split("."))
    if (path / "__init__.py").is_file():
        return f"{IMAGE_ROOT}{path.relative_to(REPO)}/__init__.py"
    if path.with_suffix(".py").is_file():
        return f"{IMAGE_ROOT}{path.relative_to(REPO)}.py"
    return None


def without_bytecode(modules) -> list[str]:
    pattern = re.compile(excluded_pattern())
    return [module for module in modules if (path := image_path(module)) and pattern.search(path)]


def test_the_list_names_only_modules_there_are():
    pattern = excluded_pattern()
    named = re.findall(r"(?<=[(|/])(\w+)(?=[|)])", pattern)
    matched = [path for package in IMAGE_PACKAGES for path in (REPO / package).rglob("*.py")
               if re.search(pattern, IMAGE_ROOT + str(path.relative_to(REPO)))]
    # each name names modules there are, and each module left out is named (a family's launches.py: one
    # name for every family's)
    assert len(named) >= 10 and {path.stem for path in matched} == set(named), (named, matched)
    assert len(matched) >= len(named), (named, matched)


def test_no_module_a_start_imports_is_left_without_bytecode():
    done = subprocess.run([sys.executable, "-c", START], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded["answered"] >= 3 * 20, "the table answers the built-in models, so their lookups ran through"
    assert "patches.fitcheck.lookup" in loaded["modules"] and "entrypoint.fetch.fetch_model" in loaded["modules"]
    assert without_bytecode(["patches.fitcheck.compiler", "entrypoint.start"]) == ["patches.fitcheck.compiler"], \
        "the search finds a planted build-side module"
    assert without_bytecode(loaded["modules"]) == []
