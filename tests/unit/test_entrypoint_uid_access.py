"""What a uid that owns neither the caches nor the model sees (rootless podman with keep-id, compose
`user:`, OpenShift): the entrypoint runs as uid 4242:4242 against root-owned folders. An unwritable
Triton cache fails the cache check naming TRITON_CACHE_DIR and the fix (Triton would raise
PermissionError at the first kernel compile, after the load); an unwritable vLLM or Hub cache warns;
a model folder the uid cannot read is reported as a permission problem, not a missing config.json."""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.entrypoint_cli import can_switch_uid, run_entrypoint_as
from tests.support.model_files import write_model_dir

pytestmark = pytest.mark.skipif(not can_switch_uid(), reason="needs root and a Python another uid can run")
UID = GID = 4242
NOT_JUDGED_HERE = "devices,driver,torch,clamp,fit,port,parallel,shm,memory,disk"


@pytest.fixture
def root_owned():
    """A folder under /tmp that uid 4242 can enter and read but not write (pytest's own tmp_path
    is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="vllm-turing-uid-"))
    os.chmod(folder, 0o755)
    write_model_dir(folder / "model")
    for path in (folder / "model", *(folder / "model").iterdir()):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    yield folder
    shutil.rmtree(folder)


def checks(folder: Path, **env) -> dict:
    base = {"MODEL": str(folder / "model"), "SKIP_CHECKS": NOT_JUDGED_HERE, "HF_HOME": str(folder / "hf"),
            "VLLM_CACHE_ROOT": str(folder / "vllm"), "TRITON_CACHE_DIR": str(folder / "triton")}
    done = run_entrypoint_as(UID, GID, {**base, **env}, "check", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return {check["name"]: check for check in json.loads(done.stdout)["checks"]}


def writable(folder: Path) -> Path:
    folder.mkdir()
    os.chmod(folder, 0o777)
    return folder


def test_an_unwritable_triton_cache_fails_naming_the_setting_and_the_fix(root_owned):
    (root_owned / "triton").mkdir()
    cache = checks(root_owned)["cache"]
    assert cache["status"] == "fail", cache
    assert f"TRITON_CACHE_DIR {root_owned / 'triton'} is not writable by uid {UID}" in cache["message"]
    assert "PermissionError at the first kernel compile" in cache["message"]
    assert "point TRITON_CACHE_DIR and HF_HUB_CACHE at a writable folder" in cache["fix"]
    # the vLLM and Hub caches, unwritable too, are named in the same line, not after the Triton fix
    assert f"VLLM_CACHE_ROOT {root_owned / 'vllm'} is not writable" in cache["message"]
    assert f"HF_HUB_CACHE {root_owned / 'hf' / 'hub'} is not writable by uid {UID}" in cache["message"]
    assert "mount a writable volume at VLLM_CACHE_ROOT" in cache["fix"]


def test_a_missing_triton_cache_is_judged_by_the_folder_it_would_be_made_in(root_owned):
    cache = checks(root_owned, TRITON_CACHE_DIR=str(root_owned / "not" / "yet"))["cache"]
    assert cache["status"] == "fail" and "TRITON_CACHE_DIR" in cache["message"], cache
    cache = checks(root_owned, TRITON_CACHE_DIR=str(writable(root_owned / "open") / "not" / "yet"))["cache"]
    assert "TRITON_CACHE_DIR" not in cache["message"], cache


def test_an_unwritable_hub_cache_warns_and_an_unwritable_vllm_cache_fails(root_owned):
    triton = str(writable(root_owned / "triton"))
    cache = checks(root_owned, TRITON_CACHE_DIR=triton, VLLM_CACHE_ROOT=str(writable(root_owned / "vllm-open")))["cache"]
    assert cache["status"] == "warn", cache
    assert f"HF_HUB_CACHE {root_owned / 'hf' / 'hub'} is not writable by uid {UID}" in cache["message"]
    # vLLM's compile makes its folder in VLLM_CACHE_ROOT and would die after the load
    cache = checks(root_owned, TRITON_CACHE_DIR=triton)["cache"]
    assert cache["status"] == "fail", cache
    assert f"VLLM_CACHE_ROOT {root_owned / 'vllm'} is not writable" in cache["message"]
    assert f"HF_HUB_CACHE {root_owned / 'hf' / 'hub'} is not writable by uid {UID}" in cache["message"]


def test_every_cache_writable_passes(root_owned):
    open_folder = writable(root_owned / "open")
    cache = checks(root_owned, TRITON_CACHE_DIR=str(open_folder / "triton"), HF_HOME=str(open_folder / "hf"),
                   VLLM_CACHE_ROOT=str(open_folder / "vllm"), XDG_CACHE_HOME=str(open_folder / "xdg"))["cache"]
    assert cache["status"] == "pass", cache
    assert sorted(os.listdir(open_folder)) == []  # the probes leave nothing behind


def test_a_model_folder_the_uid_cannot_read_is_a_permission_problem(root_owned):
    os.chmod(root_owned / "model", 0o700)
    model = checks(root_owned, TRITON_CACHE_DIR=str(writable(root_owned / "triton")))["model"]
    assert model["status"] == "fail", model
    assert f"{root_owned / 'model'} cannot be read by uid {UID} (gid {GID}): permission denied" in model["message"]
    assert "chmod -R a+rX" in model["fix"] and "--user" in model["fix"]
    assert "download the model again" not in model["message"] + model["fix"]


def test_a_model_file_the_uid_cannot_read_is_a_permission_problem(root_owned):
    os.chmod(root_owned / "model" / "config.json", 0o600)
    model = checks(root_owned, TRITON_CACHE_DIR=str(writable(root_owned / "triton")))["model"]
    assert model["status"] == "fail" and "Permission denied" in model["message"], model
    assert f"readable by uid {UID}" in model["fix"] and "download" not in model["fix"]
