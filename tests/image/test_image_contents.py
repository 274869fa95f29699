"""What is inside a built image, checked without trusting the build log (testinfra)."""
import json
import re
from pathlib import PurePosixPath

import pytest

from patches.fp16_upcast.placement import TARGET_IN_PACKAGE as FP16_TARGET
from patches.turing_clamp import SITES
from contract.layout import CODE_ZIP, INSTALL_DIR
from tests.image.containers import idle_container, run_json, run_python

ATTENTION = "vllm/v1/attention/ops/triton_unified_attention.py"

HASH_PACKAGE = r"""
import hashlib, json, os, sys, importlib.util
root = os.path.dirname(importlib.util.find_spec('vllm').origin)
out = {}
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        with open(p, 'rb') as fh:
            out[os.path.relpath(p, os.path.dirname(root))] = hashlib.sha256(fh.read()).hexdigest()
print(json.dumps(out))
"""

VERSIONS = r"""
import importlib.metadata as m, json, torch
print(json.dumps({"vllm": m.version("vllm"), "torch": m.version("torch"), "triton": m.version("triton"),
                  "torch_cuda": torch.version.cuda, "arch_flags": torch._C._cuda_getArchFlags()}))
"""

CLAMP_TARGET = "import patches.turing_clamp as c, json; print(json.dumps(str(c.find_target())))"
FP16_FILE = "import patches.fp16_upcast as u, json; print(json.dumps(str(u.find_target())))"

# Our code in the image (contract.layout.CODE_ZIP, argv[1]): the modules of the zip whose bytecode Python would
# not take as the source beside it (missing, or not the unchecked-hash bytecode of that source), every module
# of the zip, and the modules of ours lying loose in the install folder (sitecustomize.py alone may).
STALE_BYTECODE = r"""
import glob, importlib.util, json, os, struct, sys, zipfile
archive = zipfile.ZipFile(sys.argv[1])
names = set(archive.namelist())
stale, every = [], sorted(name for name in names if name.endswith(".py"))
for name in every:
    header = archive.read(name + "c")[:16] if name + "c" in names else b""
    if (len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER or struct.unpack("<I", header[4:8])[0] != 0b01
            or header[8:16] != importlib.util.source_hash(archive.read(name))):
        stale.append(name)
loose = [path for path in glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "**", "*.py*"), recursive=True)
         if not os.path.basename(path).startswith("sitecustomize.")]
print(json.dumps({"stale": stale, "every": every, "loose": sorted(loose)}))
"""
# As root, in a throwaway container: a module's source changed under its bytecode, one without bytecode, and
# a loose module beside the zip.
PLANT_STALE = r"""
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as old:
    entries = {info.filename: old.read(info) for info in old.infolist()}
entries["entrypoint/__init__.py"] += b"# changed\n"
entries["planted.py"] = b"x = 1\n"
with zipfile.ZipFile(sys.argv[1], "w") as new:
    for name, data in entries.items():
        new.writestr(name, data)
open(sys.argv[1].rsplit("/", 1)[0] + "/planted.py", "w").write("x = 1\n")
"""


@pytest.fixture(scope="module")
def host(docker_client, image):
    with idle_container(docker_client, image) as host:
        yield host


@pytest.fixture(scope="module")
def base_host(docker_client, image_base):
    with idle_container(docker_client, image_base) as host:
        yield host


def test_the_vllm_that_serves_carries_the_clamp_once(host):
    result = host.run("python3 -m patches.turing_clamp check --site unified --json")
    assert result.rc == 0, f"the clamp check failed in the image: {result.stdout}{result.stderr}"
    report = json.loads(result.stdout)
    assert report["outcome"] in ("present", "upstream"), f"clamp check outcome is {report['outcome']!r}"
    imported = run_json(host, "import vllm, os; import json; print(json.dumps(os.path.dirname(vllm.__file__)))")
    target = run_json(host, CLAMP_TARGET)
    assert target.startswith(imported + "/"), f"the clamp checked {target}, but python3 imports vLLM from {imported}"


def test_the_patched_file_matches_the_sha256_label(host, image_labels):
    target = run_json(host, CLAMP_TARGET)
    assert host.file(target).sha256sum == image_labels["io.vllm-turing.clamp.sha256"], \
        "the attention file in the image differs from the one the io.vllm-turing.clamp.sha256 label describes"


def test_the_12b_embedder_carries_the_fp16_upcast_and_its_labels_describe_it(host, image_labels):
    result = host.run("python3 -m patches.fp16_upcast check --json")
    assert result.rc == 0, f"the fp16 upcast check failed in the image: {result.stdout}{result.stderr}"
    report = json.loads(result.stdout)
    assert report["outcome"] == "present", f"fp16 upcast check outcome is {report['outcome']!r}"
    assert host.file(run_json(host, FP16_FILE)).sha256sum == image_labels["io.vllm-turing.fp16.sha256"]
    assert image_labels["io.vllm-turing.fp16.layers"] == "vision_embedder.patch_dense,vision_embedder.patch_ln2"
    assert image_labels["io.vllm-turing.fp16.outcome"] in ("applied", "already")


def test_every_other_vllm_file_is_the_base_images_own(host, base_host):
    ours = run_json(host, HASH_PACKAGE)
    base = run_json(base_host, HASH_PACKAGE)
    changed = sorted(p for p in set(ours) | set(base) if ours.get(p) != base.get(p))
    # the clamp's two sites and the fp16 upcast's file (docs/fp16.md)
    clamped = {f"vllm/{site.target_in_package}" for site in SITES.values()} | {f"vllm/{FP16_TARGET}"}
    pyc_of_patched = {p for p in changed for target in clamped
                      if p.startswith(f"{PurePosixPath(target).parent}/__pycache__/{PurePosixPath(target).stem}.")}
    unexpected = [p for p in changed if p not in clamped and p not in pyc_of_patched]
    assert ATTENTION in changed, "the attention file is identical to the base's: the clamp is not applied"
    assert not unexpected, f"files of the vLLM package differ from the base image's: {unexpected[:10]}"


def test_versions_equal_the_labels_and_torch_is_a_cuda_build_for_sm75(host, image_labels):
    versions = run_json(host, VERSIONS)
    for package in ("vllm", "torch", "triton"):
        assert versions[package] == image_labels[f"io.vllm-turing.{package}.version"], \
            f"{package} {versions[package]} in the image, label says {image_labels[f'io.vllm-turing.{package}.version']}"
    assert versions["torch_cuda"] and "+cpu" not in versions["torch"], f"torch {versions['torch']} is not a CUDA build"
    assert "sm_75" in versions["arch_flags"].split(), f"torch was built without sm_75: {versions['arch_flags']}"


def test_entrypoint_healthcheck_port_and_labels(docker_client, image, image_labels):
    config = docker_client.images.get(image).attrs["Config"]
    assert config["Entrypoint"] == ["python3", "-m", "entrypoint"], f"entrypoint is {config['Entrypoint']}"
    assert not config.get("Cmd"), f"CMD should be empty so container arguments reach vLLM, is {config.get('Cmd')}"
    health = config.get("Healthcheck") or {}
    assert any("/health" in part for part in health.get("Test", [])), f"no /health healthcheck: {health}"
    assert health.get("StartPeriod", 0) >= 240 * 10**9, f"healthcheck start period {health.get('StartPeriod')} ns < 4 min"
    assert "8000/tcp" in (config.get("ExposedPorts") or {}), "port 8000 is not exposed"
    wanted = ["org.opencontainers.image." + k for k in ("title", "version", "created", "revision", "base.name", "base.digest")]
    wanted += ["io.vllm-turing." + k for k in ("vllm.version", "torch.version", "triton.version", "clamp.version",
                                               "clamp.sha256", "fit.max-shared", "fit.limit")]
    missing = [k for k in wanted if not image_labels.get(k)]
    assert not missing, f"labels missing: {missing}"
    assert int(image_labels["io.vllm-turing.fit.max-shared"]) <= int(image_labels["io.vllm-turing.fit.limit"]), \
        "the fit labels say the largest launch exceeds the limit"


def test_the_build_leaves_nothing_in_tmp(docker_client, image, image_base):
    """The build's Python steps (the fit check, the image facts) import torch and vLLM, which make
    cache folders under /tmp (torchinductor_root, root/cutlass_python_cache): the image removes them,
    so /tmp holds what the base's held and nothing else. Fresh containers: the module's own ones
    import torch themselves."""
    def tmp_entries(ref, plant=""):
        with idle_container(docker_client, ref) as fresh:
            if plant:
                fresh.run(f"mkdir -p {plant}")
            return set(fresh.run("find /tmp -mindepth 1 -maxdepth 2").stdout.split())

    assert "/tmp/root/planted" in tmp_entries(image, "/tmp/root/planted") - tmp_entries(image_base)  # the search finds one
    assert not tmp_entries(image) - tmp_entries(image_base), tmp_entries(image) - tmp_entries(image_base)


def test_our_modules_ship_their_bytecode_so_no_start_compiles_them(docker_client, image):
    """A read-only root or an arbitrary uid cannot write __pycache__ (and zipimport writes none): without
    bytecode every start and every health check (sitecustomize) compiled these modules again. Only the build
    side's modules, the code stage's -x list, have none (tests/unit/test_bytecode.py holds that no start
    imports them). The bytecode is what the source beside it compiles to (its hash), and no module of ours lies
    loose beside the zip, where an import could take it instead."""
    from tests.unit.test_bytecode import excluded_pattern

    build_side = re.compile(excluded_pattern())
    with idle_container(docker_client, image, user="root") as fresh:  # the image's uid may not write there
        run_python(fresh, PLANT_STALE, CODE_ZIP)
        planted = run_json(fresh, STALE_BYTECODE, CODE_ZIP)
        assert {"entrypoint/__init__.py", "planted.py"} <= set(planted["stale"])  # found
        assert planted["loose"] == [f"{INSTALL_DIR}/planted.py"]
    with idle_container(docker_client, image) as fresh:
        found = run_json(fresh, STALE_BYTECODE, CODE_ZIP)
    assert found["stale"] == [name for name in found["every"] if build_side.search(f"/{name}")]
    assert len(found["stale"]) >= 10 and "patches/fitcheck/compiler.py" in found["stale"]
    assert "entrypoint/__main__.py" in found["every"] and not found["loose"]
