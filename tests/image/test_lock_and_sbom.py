"""The image's Python packages are its lock's, and its SBOM lists exactly what pip and dpkg report
in it: the lock and the SBOM named by the labels the PyPI base gave it (`pytest tests/image --image
REF` on an image built with `build.py --base pypi`, or on the base itself)."""
import hashlib
import json
import re

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from buildtool.lock import LOCKS_DIR, installed_mismatch, normalized, parse_lock
from buildtool.sbom import LABEL_LOCK, LABEL_LOCK_SHA256, LABEL_SBOM, LABEL_SBOM_SHA256, sbom_sets
from buildtool.vehicle import ALIASES
from tests.image.containers import file_in_image


def in_image(docker_client, image: str, command: str) -> str:
    out = docker_client.containers.run(image, ["sh", "-c", command], entrypoint=[], user="0:0", remove=True,
                                       stdout=True, stderr=True)
    return out.decode()


@pytest.fixture(scope="module")
def lock_label(image_labels):
    name = image_labels.get(LABEL_LOCK)
    if not name:
        pytest.fail(f"the image has no {LABEL_LOCK} label: test an image built on the PyPI base "
                    "(`build.py --base pypi`), whose packages come from a lock", pytrace=False)
    return name


def test_the_lock_label_names_a_committed_lock_by_its_sha256(image_labels, lock_label):
    lock = LOCKS_DIR / lock_label
    assert lock.is_file(), f"{lock_label}: no such lock in contract/locks/"
    assert image_labels[LABEL_LOCK_SHA256] == hashlib.sha256(lock.read_bytes()).hexdigest()


def test_the_images_python_packages_are_its_locks(docker_client, image, lock_label):
    freeze = in_image(docker_client, image, "python3 -m pip freeze --all --disable-pip-version-check")
    installed = dict(re.fullmatch(r"([^=\s]+)==(\S+)", line).groups() for line in freeze.split())
    installed = {normalized(k): v for k, v in installed.items()}
    locked = parse_lock((LOCKS_DIR / lock_label).read_text(), lock_label)
    extra = ALIASES if lock_label.startswith("vllm-cpu-") else frozenset()
    assert installed_mismatch(locked, installed, extra) == []


def test_the_sbom_validates_and_lists_what_pip_and_dpkg_report(docker_client, image, image_labels, lock_label):
    path = image_labels.get(LABEL_SBOM)
    assert path, f"the image has no {LABEL_SBOM} label"
    data = file_in_image(docker_client, image, path)
    assert image_labels[LABEL_SBOM_SHA256] == hashlib.sha256(data).hexdigest()
    text = data.decode()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    python, debian = sbom_sets(json.loads(text))
    pip_list = json.loads(in_image(docker_client, image, "python3 -m pip list --format=json --disable-pip-version-check"))
    assert python == {(normalized(p["name"]), p["version"]) for p in pip_list}
    dpkg = in_image(docker_client, image, "dpkg-query -W -f='${db:Status-Status} ${Package} ${Version}\\n'")
    assert debian == {tuple(line.split()[1:]) for line in dpkg.splitlines() if line.startswith("installed ")}
    locked = {p.name: p.hashes for p in parse_lock((LOCKS_DIR / lock_label).read_text())}
    for component in json.loads(text)["components"]:
        if component["name"] in locked:
            assert tuple(h["content"] for h in component["hashes"]) == locked[component["name"]]
