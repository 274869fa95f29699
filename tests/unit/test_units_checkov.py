"""An external scanner on what this project ships: checkov over the Kubernetes render and the
Dockerfile. The 13 checks of the restricted profile pass, with no skip annotation anywhere; every
other finding is one of the few that belong to the site (its namespace, its image digest), each with
its reason; and the same run over planted breaks fails each of them, so a pass means something.

checkov lives in its own virtual environment (tests/requirements-checkov.txt; tests/run makes it)."""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from buildtool.units.kubernetes import MANIFEST_PATH
from tests.support.build_py import build_py
from tests import REPO

CHECKOV_VENV = REPO / ".cache/checkov-venv/bin/checkov"

# The restricted profile: the pod's privileges and resources, and the image's user.
RESTRICTED = {
    "CKV_K8S_10": "CPU requests",
    "CKV_K8S_11": "CPU limits",
    "CKV_K8S_12": "memory requests",
    "CKV_K8S_13": "memory limits",
    "CKV_K8S_16": "not privileged",
    "CKV_K8S_20": "no privilege escalation",
    "CKV_K8S_22": "read-only root filesystem",
    "CKV_K8S_23": "no root containers",
    "CKV_K8S_28": "no NET_RAW",
    "CKV_K8S_31": "seccomp RuntimeDefault",
    "CKV_K8S_35": "secrets as files, not environment variables",
    "CKV_K8S_40": "a uid of 10000 or more",
    "CKV_DOCKER_3": "a non-root USER in the image",
}
# What belongs to the site, not to the render (docs/deploy.md, security): none is a restricted check.
THE_SITES = {
    "CKV_K8S_21": "the namespace: `kubectl -n` or the overlay's `namespace:` sets it",
    "CKV_K8S_43": "an image digest: render with --image NAME@sha256:... (the default is the release's tag)",
    "CKV_K8S_15": "pull policy Always: IfNotPresent keeps an air-gapped node serving from its own copy",
    "CKV_DOCKER_7": "the base image's tag: BASE_IMAGE is a build argument whose default is the pinned tag",
}
RENDERS = {"one replica": [], "four replicas of a tensor-parallel pair, key file": [
    "--replicas", "4", "--gpus", "2", "--cpus", "8", "--api-key-file", "/etc/vllm-turing/key"]}


def checkov() -> str:
    found = str(CHECKOV_VENV) if CHECKOV_VENV.exists() else shutil.which("checkov")
    assert found, ("checkov is needed for this test: python3 -m venv .cache/checkov-venv && "
                   ".cache/checkov-venv/bin/python -m pip install -r tests/requirements-checkov.txt")
    return found


def scan(folder: Path) -> dict[str, dict[str, set[str]]]:
    """check id -> {"passed" | "failed" | "skipped": the resources}, over every file under `folder`."""
    done = subprocess.run([checkov(), "-d", str(folder), "--framework", "kubernetes", "dockerfile",
                           "--skip-download", "--output", "json"], capture_output=True, text=True, timeout=600,
                          cwd=folder)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    reports = json.loads(done.stdout)
    found: dict[str, dict[str, set[str]]] = {}
    for report in reports if isinstance(reports, list) else [reports]:
        assert report["summary"]["parsing_errors"] == 0, report["summary"]
        for outcome in ("passed", "failed", "skipped"):
            for check in report["results"][f"{outcome}_checks"]:
                found.setdefault(check["check_id"], {}).setdefault(outcome, set()).add(
                    f"{check['file_path']}:{check['resource']}")
    return found


def render(folder: Path, *args: str) -> Path:
    assert build_py().main(["units", "--kubernetes", "--weights-gib", "10", "--out", str(folder), *args]) == 0
    return folder / MANIFEST_PATH


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """The renders and the Dockerfile, side by side as checkov reads a repository."""
    folder = tmp_path_factory.mktemp("shipped")
    for number, args in enumerate(RENDERS.values()):
        render(folder / f"render-{number}", *args)
    shutil.copy(REPO / "Dockerfile", folder / "Dockerfile")
    return folder


def test_every_restricted_check_is_run_and_passes_on_the_render_and_the_dockerfile(shipped):
    found = scan(shipped)
    for check, what in RESTRICTED.items():
        outcomes = found.get(check, {})
        assert outcomes.get("passed"), f"{check} ({what}) was not run"
        assert not outcomes.get("failed"), f"{check} ({what}) fails: {sorted(outcomes['failed'])}"
    assert not [c for c, outcomes in found.items() if outcomes.get("skipped")]
    # each render's Deployment and fetch Job passed the pod checks, not only one of them
    passed = found["CKV_K8S_22"]["passed"]
    assert len(passed) == 2 * len(RENDERS) and sum(":Job." in resource for resource in passed) == len(RENDERS)
    failed = {check for check, outcomes in found.items() if outcomes.get("failed")}
    assert failed <= set(THE_SITES), {c: sorted(found[c]["failed"]) for c in failed - set(THE_SITES)}


def test_nothing_shipped_carries_a_skip_annotation(shipped):
    """A `checkov:skip=` comment or annotation would pass a check by not running it."""
    texts = [path.read_text() for path in shipped.rglob("*") if path.is_file()]
    texts += [(REPO / path).read_text() for path in ("Dockerfile", MANIFEST_PATH)]
    assert texts and not [text for text in texts if "checkov:skip" in text or "checkov.io/skip" in text]


def _planted_breaks(manifest: Path, dockerfile: Path) -> None:
    """The six failures of the render before this work, planted back into a copy."""
    docs = [doc for doc in yaml.safe_load_all(manifest.read_text()) if doc]
    pod = next(doc for doc in docs if doc["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    for side in ("requests", "limits"):
        del container["resources"][side]["cpu"]
    container["securityContext"]["readOnlyRootFilesystem"] = False
    pod["securityContext"]["runAsUser"] = 2000
    container["env"].append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "vllm-turing-hf",
                                                                                "key": "HF_TOKEN"}}})
    manifest.write_text(yaml.safe_dump_all(copy.deepcopy(docs)))
    dockerfile.write_text("\n".join(line for line in dockerfile.read_text().splitlines()
                                    if not line.startswith("USER ")) + "\n")


def test_the_same_scan_fails_each_check_planted_back(tmp_path):
    manifest = render(tmp_path / "render")
    shutil.copy(REPO / "Dockerfile", tmp_path / "Dockerfile")
    _planted_breaks(manifest, tmp_path / "Dockerfile")
    found = scan(tmp_path)
    planted = {"CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_22", "CKV_K8S_35", "CKV_K8S_40", "CKV_DOCKER_3"}
    assert {check for check in RESTRICTED if found.get(check, {}).get("failed")} == planted
