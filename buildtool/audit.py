"""`build.py audit`: a lock's packages checked against a vulnerability database, findings per package.

Online (the default), pip-audit asks the package index's vulnerability data for each pinned
version (`--osv-url` names an OSV API, a mirror's, instead). Offline, `--database PATH` reads OSV
records on this host: a folder of OSV JSON files, a zip of them (OSV's per-ecosystem dump), or one
file; each record's PyPI ranges and versions are matched here against the lock. A report: it exits 0
whatever it finds, unless --fail-on-findings (then 1 when a package has a finding).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from packaging.version import InvalidVersion, Version

from buildtool import flags
from door import children
from buildtool.errors import BuildError
from buildtool.hostconfig import host_ca_bundle, index_urls
from buildtool.lock import LockedPackage, base_target, cpu_target, lock_for, normalized, parse_lock
from contract import pins

# A record file larger than this is no OSV record (the largest PyPI ones are tens of KB).
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...]
    fixed_in: tuple[str, ...]
    summary: str


@dataclass(frozen=True)
class Audit:
    source: str  # where the data came from, for the report
    findings: tuple[Finding, ...]
    not_audited: tuple[tuple[str, str], ...] = ()  # (package, why)


def _version(text) -> Version | None:
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def _in_range(version: Version, events: list) -> bool:
    """OSV's evaluation of one ECOSYSTEM range's events (introduced, fixed, last_affected, limit)."""
    def key(event):
        value = next(iter(event.values()), "0") if isinstance(event, dict) and event else "0"
        return (0, Version("0")) if value == "0" else (1, _version(value) or Version("0"))

    affected = False
    for event in sorted((e for e in events if isinstance(e, dict)), key=key):
        if "introduced" in event:
            start = event["introduced"]
            if start == "0" or ((v := _version(start)) is not None and version >= v):
                affected = True
        elif "fixed" in event:
            if (v := _version(event["fixed"])) is not None and version >= v:
                affected = False
        elif "last_affected" in event:
            if (v := _version(event["last_affected"])) is not None and version > v:
                affected = False
        elif "limit" in event:
            if event["limit"] != "*" and (v := _version(event["limit"])) is not None and version >= v:
                affected = False
    return affected


def _list(value) -> list:
    """A record's list field, or [] where a malformed record has something else there."""
    return value if isinstance(value, list) else []


def _fixed_versions(ranges: list) -> tuple[str, ...]:
    return tuple(str(e["fixed"]) for r in ranges for e in _list(r.get("events")) if isinstance(e, dict) and "fixed" in e)


def record_findings(record: dict, locked: dict[str, LockedPackage]) -> list[Finding]:
    """The findings one OSV record makes against the locked packages (pure; a record of another
    ecosystem, a withdrawn one, or one naming no locked package makes none)."""
    if not isinstance(record, dict) or record.get("withdrawn") or not isinstance(record.get("affected"), list):
        return []
    found = []
    for affected in record["affected"]:
        package = affected.get("package") if isinstance(affected, dict) else None
        if not isinstance(package, dict) or package.get("ecosystem") != "PyPI" or not isinstance(package.get("name"), str):
            continue
        pin = locked.get(normalized(package["name"]))
        version = _version(pin.version) if pin else None
        if version is None:
            continue
        listed = _list(affected.get("versions"))
        ranges = [r for r in _list(affected.get("ranges")) if isinstance(r, dict) and r.get("type") in ("ECOSYSTEM", "SEMVER")
                  and isinstance(r.get("events"), list)]
        hit = any(_version(v) == version for v in listed) or any(_in_range(version, r["events"]) for r in ranges)
        if hit:
            summary = record.get("summary") or str(record.get("details") or "").strip().split("\n", 1)[0]
            found.append(Finding(package=pin.name, version=pin.version, id=str(record.get("id", "?")),
                                 aliases=tuple(a for a in _list(record.get("aliases")) if isinstance(a, str)),
                                 fixed_in=_fixed_versions(ranges), summary=str(summary)[:200]))
    return found


def _records(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each JSON record under `path`: a folder (searched recursively), a zip, a file."""
    if path.is_dir():
        for file in sorted(path.rglob("*.json")):
            if file.is_file():
                yield str(file), _bounded(file.name, file.stat().st_size, file.read_bytes)
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                if info.filename.endswith(".json") and not info.is_dir():
                    yield f"{path}:{info.filename}", _bounded(info.filename, info.file_size, lambda: archive.read(info))
    else:
        yield str(path), _bounded(path.name, path.stat().st_size, path.read_bytes)


def _bounded(name: str, size: int, read) -> bytes:
    if size > MAX_RECORD_BYTES:
        raise BuildError(f"--database: {name} is {size} bytes, larger than an OSV record ({MAX_RECORD_BYTES}): "
                         "give a folder or zip of OSV JSON records", 2)
    return read()


def audit_offline(database: Path, packages: Iterable[LockedPackage]) -> Audit:
    if not database.exists():
        raise BuildError(f"--database {database}: no such file or directory; give a folder of OSV JSON records, "
                         "a zip of them or one record file", 2)
    locked = {p.name: p for p in packages}
    findings: list[Finding] = []
    count = 0
    for name, data in _records(database):
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BuildError(f"--database: {name} is not JSON ({str(exc)[:80]}): give OSV JSON records", 2) from None
        for one in record if isinstance(record, list) else [record]:
            findings += record_findings(one, locked)
        count += 1
    if count == 0:
        raise BuildError(f"--database {database}: no OSV JSON records in it (*.json files, a zip of them, or one file)", 2)
    return Audit(source=f"{count} OSV records in {database}", findings=tuple(sorted(set(findings), key=_order)))


def _order(finding: Finding):
    return (finding.package, finding.id)


def pip_audit_argv(lock: Path, output: Path, osv_url: str | None) -> list[str]:
    argv = [sys.executable, "-m", "pip_audit", "--requirement", str(lock), "--no-deps", "--disable-pip",
            "--format", "json", "--output", str(output), "--progress-spinner", "off", "--aliases", "on", "--desc", "on"]
    if osv_url:
        argv += ["--vulnerability-service", "osv", "--osv-url", osv_url]
    return argv


def parse_pip_audit(report: dict, source: str) -> Audit:
    """pip-audit's JSON report as findings (pure)."""
    findings, skipped = [], []
    for dep in report.get("dependencies", []):
        name = normalized(str(dep.get("name", "?")))
        if "skip_reason" in dep:
            skipped.append((name, str(dep["skip_reason"])))
            continue
        for vuln in dep.get("vulns") or []:
            findings.append(Finding(package=name, version=str(dep.get("version", "?")), id=str(vuln.get("id", "?")),
                                    aliases=tuple(vuln.get("aliases") or ()), fixed_in=tuple(vuln.get("fix_versions") or ()),
                                    summary=str(vuln.get("description") or "").strip().split("\n", 1)[0][:200]))
    return Audit(source=source, findings=tuple(sorted(findings, key=_order)), not_audited=tuple(skipped))


def audit_online(lock: Path, osv_url: str | None) -> Audit:
    env = dict(os.environ)
    ca = host_ca_bundle()
    if ca is not None:
        env.setdefault("REQUESTS_CA_BUNDLE", str(ca[0]))
    with tempfile.TemporaryDirectory(prefix="vllm-turing-audit-") as tmp:
        output = Path(tmp) / "report.json"
        run = children.run(pip_audit_argv(lock, output, osv_url), env=env)
        if not output.is_file():
            if "No module named pip_audit" in run.stderr:
                raise BuildError("`build.py audit` needs pip-audit: python3 -m pip install -r requirements.txt", 2)
            lines = [l for l in run.stderr.strip().splitlines() if l.strip() and not l.startswith("WARNING")]
            raise BuildError("pip-audit failed: " + (lines[-1].strip() if lines else f"exit {run.returncode}")
                             + "; where there is no network, give --database PATH (OSV records)")
        report = json.loads(output.read_text())
    return parse_pip_audit(report, "the OSV API at --osv-url" if osv_url else "the package index's vulnerability data (pip-audit)")


def report_lines(audit: Audit, locked_count: int) -> list[str]:
    lines = []
    by_package: dict[tuple[str, str], list[Finding]] = {}
    for finding in audit.findings:
        by_package.setdefault((finding.package, finding.version), []).append(finding)
    for (package, version), findings in sorted(by_package.items()):
        lines.append(f"{package} {version}: {len(findings)} finding{'s' if len(findings) != 1 else ''}")
        for f in findings:
            also = f" ({', '.join(f.aliases)})" if f.aliases else ""
            fixed = f"fixed in {', '.join(f.fixed_in)}" if f.fixed_in else "no fixed release"
            lines.append(f"  {f.id}{also}: {fixed}: {f.summary or 'no summary'}")
    if audit.not_audited:
        reasons = sorted({why.split(":", 1)[0] for _, why in audit.not_audited})
        lines.append(f"not audited: {len(audit.not_audited)} of {locked_count} packages ({'; '.join(reasons)[:200]})")
    audited = locked_count - len(audit.not_audited)
    lines.append(f"{len(audit.findings)} findings in {len(by_package)} packages; {audited} of {locked_count} locked "
                 f"packages audited, against {audit.source}")
    if audited == 0:
        lines.append("nothing was audited: this source knows none of the packages; give --database PATH "
                     "(an OSV dump) or --osv-url (a mirror's OSV API)")
    return lines


def osv_url(text: str) -> str:
    """--osv-url: an http(s) URL with a host (credentials in it stay out of every message)."""
    try:
        urls = index_urls("--osv-url", text)
    except BuildError as exc:
        raise flags.argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    if len(urls) != 1:
        raise flags.argparse.ArgumentTypeError("give one http(s) URL of an OSV API's query endpoint, such as "
                                               "https://osv.mirror.example/v1/query")
    return urls[0]


def add_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--vllm-version", type=flags.vllm_version, default=pins.VLLM_VERSION,
                       help="audit the lock of this release's PyPI base (default %(default)s)")
    which.add_argument("--vehicle", action="store_true", help="audit the CPU vehicle's lock instead")
    which.add_argument("--lock", type=flags.file_to_read, default=None, help="audit this lock file instead")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--database", type=flags.file_to_read, default=None, metavar="PATH",
                        help="offline: OSV records on this host (a folder of OSV JSON files, a zip of them, or one file)")
    source.add_argument("--osv-url", type=osv_url, default=None,
                        help="online: an OSV API's query URL (a mirror's) instead of the package index's data")
    parser.add_argument("--fail-on-findings", action="store_true", help="exit 1 when a package has a finding (default: a report, exit 0)")


def run(args) -> int:
    lock = args.lock or lock_for(cpu_target() if args.vehicle else base_target(args.vllm_version))
    try:
        packages = parse_lock(lock.read_text(), str(lock))
        print(f"auditing {len(packages)} packages of {lock.name}", flush=True)
        audit = audit_offline(args.database, packages) if args.database else audit_online(lock, args.osv_url)
    except (OSError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise BuildError(f"cannot read {getattr(exc, 'filename', None) or args.database or lock}: "
                         f"{getattr(exc, 'strerror', None) or exc}; give a readable lock and OSV database", 2) from None
    for line in report_lines(audit, len(packages)):
        print(line, flush=True)
    return 1 if args.fail_on_findings and audit.findings else 0
