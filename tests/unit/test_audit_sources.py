"""`build.py audit` claims only what it checked: a source that cannot be read, holds another schema or
another ecosystem, or answers with more than an answer can be, audits nothing and is refused in one
line naming it (exit 2); a record it cannot evaluate names the package "not evaluated", never clean;
a lock that pins a package twice is refused. Driven in-process through build.py's own main (the CLI's
one-line refusal), the FIFOs in a child with a timeout (a blocking open must fail the test, not hang it)."""
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from buildtool import audit as audit_module
from buildtool.lock import base_target, parse_lock
from tests.support.build_py import build_py
from tests.support.hostile.peer import HostileServer, declared_huge, huge_body, ok_json, once, stall_after_headers
from tests.support.slack import SCHEDULING_SLACK_S
from tests.support.zip_bomb import bomb_zip
from tests.unit.test_audit import AIOHTTP, LOCKED, PLANTED, TORCH, bump, osv, write_database
from tests import REPO

LOCK_LINES = base_target("0.33.0").path.read_text().splitlines()


def audit(capsys, *args) -> tuple[int, str, str]:
    code = build_py().main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def refusal(capsys, *args) -> str:
    code, _, err = audit(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def small_lock(tmp_path, *names) -> Path:
    """A lock of the committed lock's blocks for `names` (real pins and hashes)."""
    text = base_target("0.33.0").path.read_text()
    blocks = [b for b in text.split("\n") if b]
    keep, out = False, []
    for line in blocks:
        if not line.startswith((" ", "#")):
            keep = parse_lock(line + " \\\n    --hash=sha256:" + "0" * 64 + "\n")[0].name in names if "==" in line else False
        if keep:
            out.append(line)
    path = tmp_path / "small.txt"
    path.write_text("\n".join(out) + "\n")
    assert {p.name for p in parse_lock(path.read_text())} == set(names)
    return path


def test_a_folder_of_json_that_is_not_osv_audits_nothing_and_names_the_file(tmp_path, capsys):
    folder = tmp_path / "npm-meta"
    folder.mkdir()
    (folder / "package.json").write_text(json.dumps({"name": "left-pad", "version": "1.3.0", "dependencies": {}}))
    (folder / "lock.json").write_text(json.dumps([{"name": "torch", "version": TORCH}]))
    line = refusal(capsys, "--database", str(folder))
    assert str(folder / "lock.json") in line and "not an OSV record" in line


def test_a_zip_of_npm_records_audits_nothing_and_says_so(tmp_path, capsys):
    dump = tmp_path / "npm-all.zip"
    with zipfile.ZipFile(dump, "w") as archive:
        for n in range(3):
            record = osv(f"GHSA-npm{n}-aaaa-bbbb", "torch", ecosystem="npm", ranges=[[{"introduced": "0"}]])
            archive.writestr(f"{record['id']}.json", json.dumps(record))
    line = refusal(capsys, "--database", str(dump))
    assert str(dump) in line and "none of its 3 OSV records is of the PyPI ecosystem (npm 3)" in line
    assert "audits nothing" in line


def test_a_range_that_does_not_parse_names_the_package_not_evaluated_never_clean(tmp_path, capsys):
    records = [osv("PYSEC-2026-9101", "torch", ranges=[[{"introduced": "0"}, {"fixed": "2.x-rc!"}]]),
               # a range that parses and hits: the finding stands beside a record that cannot be read
               osv("PYSEC-2026-9102", "aiohttp", ranges=[[{"introduced": "0"}, {"fixed": bump(AIOHTTP)}],
                                                         [{"introduced": "junk"}]]),
               # only a GIT range: nothing to evaluate a release against
               {**osv("PYSEC-2026-9103", "numpy"), "affected": [{"package": {"ecosystem": "PyPI", "name": "numpy"},
                                                                  "ranges": [{"type": "GIT", "repo": "r", "events": [{"introduced": "0"}]}]}]}]
    database = write_database(tmp_path / "db", records)
    code, out, _ = audit(capsys, "--database", str(database))
    assert code == 0
    assert "torch: not evaluated, never counted clean: PYSEC-2026-9101's range names '2.x-rc!', not a version" in out
    assert "numpy: not evaluated, never counted clean: PYSEC-2026-9103 gives no version list or ECOSYSTEM range" in out
    assert f"aiohttp {AIOHTTP}: 1 finding" in out and "PYSEC-2026-9102" in out
    assert f"{len(LOCKED) - 2} of {len(LOCKED)} locked packages audited (2 not evaluated)" in out
    assert audit(capsys, "--database", str(database), "--fail-on-findings")[0] == 1
    only_unknown = write_database(tmp_path / "db2", records[:1])
    assert audit(capsys, "--database", str(only_unknown), "--fail-on-findings")[0] == 1, "not evaluated is never a pass"


def test_a_lock_that_pins_a_package_twice_is_refused_naming_both_lines(tmp_path, capsys):
    lock = small_lock(tmp_path, "torch", "aiohttp")
    text = lock.read_text()
    first = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("torch==")][0]
    lock.write_text(text + f"Torch=={bump(TORCH)} \\\n    --hash=sha256:{'3' * 64}\n")
    second = len(text.splitlines()) + 1
    line = refusal(capsys, "--lock", str(lock), "--database", str(write_database(tmp_path / "db", PLANTED)))
    assert f"--lock {lock} lines {first} and {second}: torch is pinned twice ({TORCH} and {bump(TORCH)})" in line


@pytest.mark.parametrize("content, said", [
    (b"torch==2.0 \\\n    --hash=sha256:" + b"\xff" * 64 + b"\n", "is not UTF-8 text (byte 31 is invalid)"),
    (b"", "is empty"),
    (None, "is a directory, not a regular file"),
], ids=["not-utf8", "empty", "folder"])
def test_a_lock_that_cannot_be_read_as_text_is_refused_naming_it(tmp_path, capsys, content, said):
    lock = tmp_path / "lock.txt"
    lock.mkdir() if content is None else lock.write_bytes(content)
    assert f"--lock {lock} {said}" in refusal(capsys, "--lock", str(lock), "--database", str(tmp_path))


def test_a_database_nested_200000_deep_is_one_line(tmp_path, capsys):
    (tmp_path / "deep.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    line = refusal(capsys, "--database", str(tmp_path / "deep.json"))
    assert f"--database {tmp_path / 'deep.json'} nests more than 16 levels deep" in line


def test_a_zip_of_3000_large_members_is_refused_from_its_listing(tmp_path, capsys):
    dump = bomb_zip(tmp_path / "bomb.zip", members=3000, size=4 * 2**20)
    started = time.monotonic()
    line = refusal(capsys, "--database", str(dump))
    assert f"--database {dump} unpacks to more than 2048 MiB" in line
    assert time.monotonic() - started < SCHEDULING_SLACK_S


@pytest.mark.parametrize("flag", ["--database", "--lock"])
def test_a_fifo_as_database_or_lock_is_refused_without_blocking(tmp_path, flag):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = subprocess.run([sys.executable, str(REPO / "build.py"), "audit", flag, str(fifo)], cwd=REPO,
                         capture_output=True, text=True, timeout=60 + SCHEDULING_SLACK_S)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert f"{flag} {fifo} is a named pipe (FIFO), not a regular file" in run.stderr


def test_a_database_member_that_leaves_the_archive_is_refused(tmp_path, capsys):
    dump = tmp_path / "slip.zip"
    with zipfile.ZipFile(dump, "w") as archive:
        archive.writestr("../PYSEC-1.json", json.dumps(PLANTED[0]))
    assert "climbs out with `..`" in refusal(capsys, "--database", str(dump))


# -- online: the OSV API at --osv-url and the package index, through door.remote ----------------------

@pytest.fixture
def one_package_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    return small_lock(tmp_path, "torch")


@pytest.mark.parametrize("behaviour, said", [
    (declared_huge(), "declared 2147483648 bytes, more than the 16777216 expected"),  # a 2 GiB answer
    (huge_body(declared=False), "sent more than the 16777216 bytes expected"),  # 8 GiB, no length: read to the cap
    (once(ok_json({"results": [{"vulns": [{"id": "x"}]}]})), "is not an OSV API answer"),  # another schema
    (once(ok_json({"vulns": [{"name": "torch", "version": "1"}]})), "is not an OSV API answer"),
    (once(ok_json([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])), "nests more than 32 levels"),
    (once(ok_json({}, status=403)), "answered 403"),
], ids=["2GiB-declared", "8GiB-undeclared", "another-schema", "not-osv-records", "deep", "403"])
def test_a_hostile_osv_api_is_refused_in_one_line_naming_osv_url(one_package_lock, capsys, behaviour, said):
    with HostileServer(behaviour) as server:
        started = time.monotonic()
        line = refusal(capsys, "--lock", str(one_package_lock), "--osv-url", f"{server.url}/v1/query")
    assert line.startswith("build.py audit: --osv-url's answer for torch") and said in line, line
    assert time.monotonic() - started < audit_module.QUERY_DEADLINE_S + SCHEDULING_SLACK_S


def test_an_osv_api_that_stalls_ends_at_its_deadline(one_package_lock, capsys, monkeypatch):
    monkeypatch.setattr(audit_module, "QUERY_DEADLINE_S", 1.0)
    with HostileServer(stall_after_headers(declared=4096)) as server:
        started = time.monotonic()
        line = refusal(capsys, "--lock", str(one_package_lock), "--osv-url", f"{server.url}/v1/query")
    assert "--osv-url" in line and "did not finish within its deadline" in line
    assert time.monotonic() - started < 1.0 + SCHEDULING_SLACK_S


def test_an_osv_apis_records_are_judged_as_the_databases_are(one_package_lock, capsys):
    """An answer with one record that hits and one whose range does not parse."""
    records = [PLANTED[0], osv("PYSEC-2026-9201", "torch", ranges=[[{"introduced": "0"}, {"fixed": "not.a.version!"}]])]
    with HostileServer(once(ok_json({"vulns": records}))) as server:
        code, out, _ = audit(capsys, "--lock", str(one_package_lock), "--osv-url", f"{server.url}/v1/query")
    assert code == 0 and f"torch {TORCH}: 1 finding" in out and "PYSEC-2026-9001" in out
    assert "torch: not evaluated" in out and "0 of 1 locked packages audited (1 not evaluated)" in out


class LocalIndex(audit_module.IndexSession):
    """The index session, sent to a loopback peer: pip-audit's URL with its scheme and host replaced."""
    base = ""

    def get(self, url, timeout=None, **unused):
        return super().get(self.base + urlsplit(url).path, timeout)


def index_answer(vulnerabilities) -> bytes:
    """The index's JSON API answer for one release, as pip-audit's PyPI service reads it."""
    return ok_json({"info": {"name": "torch", "version": TORCH, "description": "x" * 4096}, "urls": [],
                    "vulnerabilities": vulnerabilities})


def test_the_index_path_reads_through_the_door_and_names_the_index(one_package_lock, capsys, monkeypatch):
    monkeypatch.setattr(audit_module, "IndexSession", LocalIndex)
    vulnerability = {"id": "PYSEC-2026-9301", "aliases": ["CVE-2026-9301"], "details": "planted\nmore", "summary": None,
                     "fixed_in": [bump(TORCH)], "link": "x", "source": "osv", "withdrawn": None}
    with HostileServer(once(index_answer([vulnerability]))) as server:
        LocalIndex.base = server.url
        code, out, _ = audit(capsys, "--lock", str(one_package_lock))
        assert code == 0 and f"torch {TORCH}: 1 finding" in out, out
        assert f"PYSEC-2026-9301 (CVE-2026-9301): fixed in {bump(TORCH)}: planted more" in out
        assert "1 of 1 locked packages audited" in out
        pins = parse_lock(one_package_lock.read_text())
        server.behaviour = once(index_answer([{**vulnerability, "fixed_in": ["not a version!"]}]))
        found = audit_module.audit_index(pins)
        assert not found.findings and found.not_evaluated[0][0] == "torch" and "does not parse" in found.not_evaluated[0][1]
        server.behaviour = once(ok_json({"message": "Not Found"}, status=404))
        line = refusal(capsys, "--lock", str(one_package_lock))  # the index knows none of the packages
        assert "0 of 1 locked packages audited" in line and "nothing was audited" in line
        server.behaviour = declared_huge()
        line = refusal(capsys, "--lock", str(one_package_lock))
        assert "the package index's vulnerability data (torch)" in line and "more than the 16777216 expected" in line
        assert "--osv-url" in line
