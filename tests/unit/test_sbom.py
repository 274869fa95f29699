"""The SBOM (buildtool/sbom.py): written from the lock and an image's inventory with
cyclonedx-python-lib, validated against the CycloneDX 1.6 schema by the library's validator, its
component sets the inventory's; the inventory read from the text the image's commands print."""
import datetime
import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from hypothesis import given, settings, strategies as st

from buildtool.lock import base_target, cpu_target, parse_lock
from buildtool.sbom import DebianPackage, Inventory, make_bom, parse_inventory, sbom_json, sbom_sets
from contract import pins
from door.problem import Problem

LOCKED = parse_lock(base_target(pins.VLLM_VERSION).path.read_text())
DEBIAN = (DebianPackage("libc6", "2.36-9+deb12u13", "amd64"), DebianPackage("python3.11", "3.11.2-6+deb12u6", "amd64"),
          DebianPackage("tzdata", "2025b-0+deb12u2", "all"))
CREATED = datetime.datetime(2026, 12, 4, 3, 0, 0, tzinfo=datetime.timezone.utc)


def inventory(python=None, debian=DEBIAN):
    return Inventory(distro="debian-12", python=python if python is not None else {p.name: p.version for p in LOCKED},
                     debian=debian)


def document(inv, locked=LOCKED, lock_sha="c" * 64):
    return sbom_json(make_bom(title="vllm-turing-base", version=pins.VLLM_VERSION, locked=locked, inventory=inv,
                              created=CREATED, lock_sha256=lock_sha))


def test_the_sbom_validates_and_lists_every_python_and_debian_package_with_the_locks_hashes():
    text = document(inventory())
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    parsed = json.loads(text)
    python, debian = sbom_sets(parsed)
    assert python == {(p.name, p.version) for p in LOCKED}
    assert debian == {(d.name, d.version) for d in DEBIAN}
    hashes = {c["name"]: [h["content"] for h in c.get("hashes", [])] for c in parsed["components"]}
    assert all(hashes[p.name] == list(p.hashes) for p in LOCKED)
    assert parsed["metadata"]["component"]["properties"] == [{"name": "io.vllm-turing.lock.sha256", "value": "c" * 64}]


def test_the_same_image_gives_the_same_document_and_another_lock_another_serial():
    assert document(inventory()) == document(inventory())
    assert json.loads(document(inventory()))["serialNumber"] != json.loads(document(inventory(), lock_sha="d" * 64))["serialNumber"]


def test_the_vehicles_alias_is_listed_without_hashes():
    locked = parse_lock(cpu_target().path.read_text())
    python = {p.name: p.version for p in locked} | {"vllm": pins.CPU_VLLM_VERSION}
    parsed = json.loads(document(inventory(python), locked=locked))
    [alias] = [c for c in parsed["components"] if c["purl"].startswith("pkg:pypi/vllm@")]
    assert "hashes" not in alias
    assert sbom_sets(parsed)[0] == set(python.items())


INVENTORY_TEXT = """--- os
debian-12
--- python
[{"name": "Torch", "version": "2.14.0"}, {"name": "typing_extensions", "version": "4.15.0"}]
--- debian
installed\tlibc6\t2.36-9+deb12u13\tamd64
config-files\told-package\t1.0\tamd64
installed\ttzdata\t2025b-0+deb12u2\tall
"""


def test_the_inventory_is_pips_list_and_dpkgs_installed_packages():
    inv = parse_inventory(INVENTORY_TEXT)
    assert inv.distro == "debian-12"
    assert inv.python == {"torch": "2.14.0", "typing-extensions": "4.15.0"}
    assert inv.debian == (DebianPackage("libc6", "2.36-9+deb12u13", "amd64"), DebianPackage("tzdata", "2025b-0+deb12u2", "all"))


def test_an_inventory_without_a_section_is_refused_naming_what_it_found():
    with pytest.raises(Problem, match="found debian, os of os, python, debian"):
        parse_inventory(INVENTORY_TEXT.replace("--- python", "--- pythn").split("--- pythn")[0] + "--- debian\n")


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
                       st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}(\+[a-z0-9]{1,4})?", fullmatch=True), max_size=6),
       st.lists(st.tuples(st.from_regex(r"[a-z0-9][a-z0-9.+-]{0,12}", fullmatch=True),
                          st.from_regex(r"[0-9]{1,2}:?[0-9a-z.+~-]{1,12}", fullmatch=True), st.sampled_from(["amd64", "all"])),
                max_size=6, unique_by=lambda t: (t[0], t[2])))
@settings(max_examples=20)  # each example runs the schema validator (about 0.4 s)
def test_any_inventory_makes_a_valid_document_whose_sets_are_the_inventorys(python, debian):
    inv = inventory(python, tuple(sorted((DebianPackage(*d) for d in debian), key=lambda d: (d.name, d.architecture))))
    parsed = json.loads(document(inv))
    assert sbom_sets(parsed) == (set(python.items()), {(d[0], d[1]) for d in debian})


@pytest.mark.parametrize("python", ["not json", '[{"name": "torch"}]', '{"a": 1}', "[1]"])
def test_a_pip_list_that_is_not_names_and_versions_is_refused_in_one_line(python):
    text = INVENTORY_TEXT.replace('[{"name": "Torch", "version": "2.14.0"}, {"name": "typing_extensions", "version": "4.15.0"}]', python)
    with pytest.raises(Problem, match="pip list"):
        parse_inventory(text)
