"""The software bill of materials of a base: a CycloneDX 1.6 JSON document of every Python package
(`pip list` in the image; name, version and the lock's hashes) and every installed Debian package
(`dpkg-query -W`), written with cyclonedx-python-lib, validated against the CycloneDX schema, stored
in the image at contract.layout.SBOM and in reports/sbom/ on the host, and named by the image's labels.

The base's Python packages must be its lock's, no more and no fewer: a base whose installed set
differs fails its build here (buildtool.lock.installed_mismatch)."""
from __future__ import annotations

import datetime
import hashlib
import json
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker
from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from buildtool.docker import buildkit
from buildtool.lock import LockedPackage, file_sha256, installed_mismatch, normalized, read_lock
from contract.layout import SBOM
from door import files
from door.problem import Problem

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports" / "sbom"
LABEL_SBOM = "io.vllm-turing.sbom"
LABEL_SBOM_SHA256 = "io.vllm-turing.sbom.sha256"
LABEL_LOCK = "io.vllm-turing.lock"
LABEL_LOCK_SHA256 = "io.vllm-turing.lock.sha256"

# Run in the image as root: the OS, then pip's own list, then dpkg's, each after its marker line.
INVENTORY_SCRIPT = r"""set -e
echo '--- os'; . /etc/os-release; echo "${ID}-${VERSION_ID}"
echo '--- python'; python3 -m pip list --format=json --disable-pip-version-check
echo '--- debian'; dpkg-query -W -f='${db:Status-Status}\t${Package}\t${Version}\t${Architecture}\n'
"""


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    architecture: str


@dataclass(frozen=True)
class Inventory:
    """What an image holds: its OS (`debian-12`), its Python packages (normalized name -> version, as
    pip lists them) and its installed Debian packages (sorted)."""
    distro: str
    python: dict[str, str]
    debian: tuple[DebianPackage, ...]


def parse_inventory(text: str) -> Inventory:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        marker = re.fullmatch(r"--- (\w+)", line.strip())
        if marker:
            current = sections.setdefault(marker.group(1), [])
        elif current is not None and line.strip():
            current.append(line)
    if set(sections) != {"os", "python", "debian"}:
        raise Problem("the image's inventory is incomplete (found %s of os, python, debian): is it a Debian "
                         "image with python3 and pip?" % (", ".join(sorted(sections)) or "none"))
    try:
        python = {normalized(p["name"]): p["version"] for p in files.own_json("\n".join(sections["python"]))}
    except (ValueError, TypeError, KeyError) as exc:
        raise Problem(f"the image's `pip list --format=json` is not a list of names and versions ({str(exc)[:80]})") from None
    if not sections["os"]:
        raise Problem("the image's /etc/os-release names no ID and VERSION_ID")
    debian = set()
    for row in sections["debian"]:
        status, name, version, arch = (row.split("\t") + ["", "", "", ""])[:4]
        if status == "installed":
            debian.add(DebianPackage(name, version, arch))
    return Inventory(distro=sections["os"][0].strip(), python=python, debian=tuple(sorted(debian, key=lambda d: (d.name, d.architecture))))


def _python_purl(name: str, version: str) -> PackageURL:
    return PackageURL(type="pypi", name=name, version=version)


def _debian_purl(package: DebianPackage, distro: str) -> PackageURL:
    return PackageURL(type="deb", namespace="debian", name=package.name, version=package.version,
                      qualifiers={"arch": package.architecture, "distro": distro})


def make_bom(*, title: str, version: str, locked: tuple[LockedPackage, ...], inventory: Inventory,
             created: datetime.datetime, lock_sha256: str) -> Bom:
    """The bill of materials (pure): one component a Python package pip lists, with the lock's
    hashes, and one a Debian package. Its serial number and timestamp come from its contents and the
    image's creation time, so the same image gives the same document."""
    hashes = {p.name: p.hashes for p in locked}
    python = [Component(name=name, version=ver, type=ComponentType.LIBRARY, purl=_python_purl(name, ver),
                        bom_ref=str(_python_purl(name, ver)),
                        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h) for h in hashes.get(name, ())])
              for name, ver in sorted(inventory.python.items())]
    debian = [Component(name=d.name, version=d.version, type=ComponentType.LIBRARY, purl=_debian_purl(d, inventory.distro),
                        bom_ref=str(_debian_purl(d, inventory.distro))) for d in inventory.debian]
    digest = hashlib.sha256(json.dumps([lock_sha256, sorted(inventory.python.items()),
                                        [(d.name, d.version, d.architecture) for d in inventory.debian]]).encode()).hexdigest()
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"vllm-turing-sbom:{digest}"))
    bom.metadata.timestamp = created
    root = Component(name=title, version=version, type=ComponentType.CONTAINER, bom_ref=f"{title}@{version}",
                     properties=[Property(name=LABEL_LOCK_SHA256, value=lock_sha256)])
    bom.metadata.component = root
    for component in python + debian:
        bom.components.add(component)
    bom.register_dependency(root, python + debian)
    return bom


def sbom_json(bom: Bom) -> str:
    """The document as JSON, validated against the CycloneDX 1.6 schema (Problem when it is not)."""
    text = JsonV1Dot6(bom).output_as_string(indent=1)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise Problem(f"the SBOM does not validate against the CycloneDX 1.6 schema: {str(error)[:200]}")
    return text


def sbom_sets(document: dict) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(Python (name, version), Debian (name, version)) of an SBOM document, by its purls."""
    python, debian = set(), set()
    for component in document.get("components", []):
        purl = PackageURL.from_string(component["purl"])
        (python if purl.type == "pypi" else debian).add((purl.name, purl.version))
    return python, debian


def read_inventory(client: docker.DockerClient, image: str) -> Inventory:
    container = client.containers.create(image, command=["sh", "-c", INVENTORY_SCRIPT], entrypoint=[], user="0:0")
    try:
        container.start()
        exit_code = container.wait()["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        if exit_code != 0:
            err = container.logs(stdout=False, stderr=True).decode(errors="replace").strip().splitlines()
            raise Problem(f"listing the packages of {image} failed: " + (err[-1] if err else f"exit {exit_code}"))
    finally:
        container.remove(force=True)
    return parse_inventory(out)


def image_created(attrs: dict) -> datetime.datetime:
    """The image's creation time, to the second ("2026-12-04T03:01:02.123456789Z")."""
    return datetime.datetime.strptime(attrs["Created"][:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)


def report_path(tag: str) -> Path:
    return REPORTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", tag) + ".cdx.json")


def add_sbom(client: docker.DockerClient, built: str, tag: str, lock: Path, *, title: str, version: str,
             extra_allowed: frozenset[str] = frozenset()) -> Path:
    """Tags `tag`: the image `built` with its SBOM added at contract.layout.SBOM and the labels that
    name it and the lock, once its Python packages are found equal to the lock's. Returns the host copy."""
    locked = read_lock(lock, str(lock.name))
    inventory = read_inventory(client, built)
    differences = installed_mismatch(locked, inventory.python, extra_allowed)
    if differences:
        raise Problem(f"{len(differences)} Python packages of the image differ from {lock.name}: "
                         + "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else ""))
    lock_sha = file_sha256(lock)
    text = sbom_json(make_bom(title=title, version=version, locked=locked, inventory=inventory,
                              created=image_created(client.images.get(built).attrs), lock_sha256=lock_sha))
    host_copy = report_path(tag)
    host_copy.parent.mkdir(parents=True, exist_ok=True)
    host_copy.write_text(text)
    labels = {LABEL_SBOM: SBOM, LABEL_SBOM_SHA256: hashlib.sha256(text.encode()).hexdigest(),
              LABEL_LOCK: lock.name, LABEL_LOCK_SHA256: lock_sha}
    with tempfile.TemporaryDirectory(prefix="vllm-turing-sbom-") as ctx:
        (Path(ctx) / "sbom.cdx.json").write_text(text)
        buildkit.build(buildkit.BuildRequest(
            context=Path(ctx), dockerfile=Path("-"), tag=tag, labels=labels,
            stdin_dockerfile=f"FROM {built}\nCOPY --chmod=0644 sbom.cdx.json {SBOM}\n"))
    print(f"{tag}: SBOM of {len(inventory.python)} Python and {len(inventory.debian)} Debian packages at {SBOM} "
          f"(host copy {host_copy.relative_to(REPO)}), lock {lock.name} sha256 {lock_sha[:16]}", flush=True)
    return host_copy
