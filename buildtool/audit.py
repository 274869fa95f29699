"""`build.py audit`: a lock's packages checked against a vulnerability database, findings per package.

Online (the default), pip-audit's PyPI service asks the package index's vulnerability data for each
pinned version; `--osv-url` names an OSV API (a mirror's /v1/query) instead, asked one package a POST.
Every online read goes through door.remote (a deadline and a byte cap per answer): pip-audit's own
session is replaced. Offline, `--database PATH` reads OSV records on this host: a folder of OSV JSON
files, a zip of them (OSV's per-ecosystem dump), or one file, through door.files, door.archives and
door.data (regular files only, size, depth and member limits).

The report claims only what it checked. OSV records (and an OSV API's answers) are judged here, by
one engine (judge_record): a package counts as audited only when the source holds records of the
PyPI ecosystem, and a record naming it whose range does not parse makes it "not evaluated", never
clean. A source of another schema or ecosystem, or one that knows none of the packages, audits
nothing and is refused in one line (exit 2). Otherwise a report: it exits 0 whatever it finds,
unless --fail-on-findings (then 1 when a package has a finding or could not be evaluated).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from packaging.version import InvalidVersion, Version

from buildtool import flags
from door import archives, remote
from door.data import load_json
from door.files import MiB, json_kind, read_bytes, shown, size_text
from door.problem import Problem, UsageError
from buildtool.hostconfig import host_ca_bundle, index_urls
from buildtool.lock import LockedPackage, base_target, cpu_target, lock_for, normalized, read_lock
from contract import pins

# A record file larger than this is no OSV record (the largest PyPI ones are tens of KB).
RECORD_CAP = 4 * MiB
RECORD_DEPTH = 16  # an OSV record nests 6 deep (affected, ranges, events, one event)
# OSV's PyPI dump holds some tens of thousands of records, a few hundred MiB unpacked.
MAX_RECORDS = 200_000
DATABASE_CAP = 2 * 2**30
EVENT_KINDS = ("introduced", "fixed", "last_affected", "limit")


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
    not_audited: tuple[tuple[str, str], ...] = ()  # (package, why): the source does not know it
    not_evaluated: tuple[tuple[str, str], ...] = ()  # (package, why): a record names it, but cannot be evaluated


def _version(text) -> Version | None:
    return _parsed_version(text) if isinstance(text, str) else None


@functools.lru_cache(maxsize=2**16)  # a dump names the same few thousand versions again and again
def _parsed_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _bound(event, record_id: str) -> tuple[str, Version | None]:
    """An ECOSYSTEM range event as (kind, version): None for introduced "0" and limit "*"."""
    if not isinstance(event, dict) or len(event) != 1 or next(iter(event)) not in EVENT_KINDS:
        raise Problem(f"{record_id} has a range event {shown(json.dumps(event))[:60]} that is not one of "
                           f"{', '.join(EVENT_KINDS)}")
    kind, value = next(iter(event.items()))
    if (kind, value) in (("introduced", "0"), ("limit", "*")):
        return kind, None
    version = _version(value)
    if version is None:
        raise Problem(f"{record_id}'s range names {shown(str(value))[:40]!r}, not a version")
    return kind, version


def _in_range(version: Version, events: list, record_id: str) -> bool:
    """OSV's evaluation of one ECOSYSTEM range's events (introduced, fixed, last_affected, limit);
    Problem when an event does not parse (such a range is never read as "not affected")."""
    bounds = sorted((_bound(e, record_id) for e in events), key=lambda b: (b[1] is not None, b[1] or Version("0")))
    if not any(kind == "introduced" for kind, _ in bounds):
        raise Problem(f"{record_id} has a range with no introduced event")
    affected = False
    for kind, bound in bounds:
        if kind == "introduced":
            if bound is None or version >= bound:
                affected = True
        elif kind == "fixed":
            if version >= bound:
                affected = False
        elif kind == "last_affected":
            if version > bound:
                affected = False
        elif kind == "limit":
            if bound is not None and version >= bound:
                affected = False
    return affected


def _fixed_versions(ranges: list) -> tuple[str, ...]:
    return tuple(str(e["fixed"]) for r in ranges for e in r["events"] if isinstance(e, dict) and "fixed" in e)


@dataclass(frozen=True)
class Verdict:
    """What one OSV record says of the locked packages."""
    findings: tuple[Finding, ...] = ()
    not_evaluated: tuple[tuple[str, str], ...] = ()  # (package, why)
    ecosystems: frozenset[str] = frozenset()  # of its affected packages


def osv_record(record) -> bool:
    """Whether `record` has the shape of an OSV record (schema 1.x: an object with a string id and modified)."""
    return isinstance(record, dict) and isinstance(record.get("id"), str) and isinstance(record.get("modified"), str)


def _ecosystems(record: dict) -> frozenset[str]:
    affected = record.get("affected")
    return frozenset(a["package"]["ecosystem"] for a in (affected if isinstance(affected, list) else [])
                     if isinstance(a, dict) and isinstance(a.get("package"), dict)
                     and isinstance(a["package"].get("ecosystem"), str))


def judge_record(record, locked: dict[str, LockedPackage]) -> Verdict:
    """The findings one OSV record makes against the locked packages, and the locked packages it names
    but cannot be evaluated against (pure). A record of another ecosystem, a withdrawn one, or one
    naming no locked package makes neither; a range that does not parse never reads as "not affected"."""
    if not isinstance(record, dict):
        return Verdict()
    ecosystems = _ecosystems(record)
    if record.get("withdrawn") or not isinstance(record.get("affected"), list):
        return Verdict(ecosystems=ecosystems)
    record_id = shown(str(record.get("id", "?")))[:80]
    found, unknown = [], []
    for affected in record["affected"]:
        package = affected.get("package") if isinstance(affected, dict) else None
        if not isinstance(package, dict) or package.get("ecosystem") != "PyPI" or not isinstance(package.get("name"), str):
            continue
        pin = locked.get(normalized(package["name"]))
        if pin is None:
            continue
        version = _version(pin.version)
        listed = affected.get("versions", [])
        ranges = affected.get("ranges", [])
        try:
            if version is None:
                raise Problem(f"its locked version {pin.version!r} is not a PEP 440 version")
            if not isinstance(listed, list) or not isinstance(ranges, list):
                raise Problem(f"{record_id} gives its versions or ranges as something other than a list")
            hit = any(_version(v) == version for v in listed)
            evaluated = [r for r in ranges if isinstance(r, dict) and r.get("type") in ("ECOSYSTEM", "SEMVER")]
            for r in evaluated:
                if not isinstance(r.get("events"), list):
                    raise Problem(f"{record_id} has a range whose events are not a list")
            if not hit and not listed and not evaluated:
                raise Problem(f"{record_id} gives no version list or ECOSYSTEM range for it")
            problems = []
            for r in evaluated:
                try:
                    hit = _in_range(version, r["events"], record_id) or hit
                except Problem as why:
                    problems.append(why)
            if problems and not hit:
                raise problems[0]
        except Problem as why:
            unknown.append((pin.name, str(why)))
            continue
        if hit:
            summary = record.get("summary") or str(record.get("details") or "").strip().split("\n", 1)[0]
            found.append(Finding(package=pin.name, version=pin.version, id=record_id,
                                 aliases=tuple(a for a in _list(record.get("aliases")) if isinstance(a, str)),
                                 fixed_in=_fixed_versions(evaluated), summary=shown(str(summary))[:200]))
    return Verdict(tuple(found), tuple(unknown), ecosystems)


def _list(value) -> list:
    """A record's list field, or [] where a malformed record has something else there."""
    return value if isinstance(value, list) else []


def record_findings(record, locked: dict[str, LockedPackage]) -> list[Finding]:
    return list(judge_record(record, locked).findings)


def _records(database: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each JSON record under `database`: a folder (searched recursively, symlinked
    folders not followed), a zip, a file; within the database limits, or Problem naming the file."""
    shown_path = f"--database {database}"
    if database.is_dir():
        files = []
        for folder, dirs, names in os.walk(database, onerror=_unreadable_folder):
            dirs.sort()
            files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".json")]
            if len(files) > MAX_RECORDS:
                raise Problem(f"{shown_path} holds more than {MAX_RECORDS} JSON files, more than an OSV dump")
        total = 0
        for file in files:
            data = read_bytes(file, f"--database {file}", RECORD_CAP)
            total += len(data)
            if total > DATABASE_CAP:
                raise Problem(f"{shown_path} holds more than {size_text(DATABASE_CAP)} of JSON, more than an OSV dump")
            yield f"--database {file}", data
    elif archives.is_zip(str(database), shown_path):
        limits = archives.Limits(member_cap=RECORD_CAP, max_members=MAX_RECORDS, total_cap=DATABASE_CAP)
        with archives.open_zip(str(database), shown_path, limits) as archive:
            for member in sorted(archive.members, key=lambda m: m.name):
                if member.name.endswith(".json"):
                    yield f"{shown_path}:{shown(member.name)}", archive.read(member)
    else:
        yield shown_path, read_bytes(str(database), shown_path, RECORD_CAP)


def _unreadable_folder(error: OSError) -> None:
    raise Problem(f"--database {error.filename} cannot be read ({error.strerror or error})")


def audit_offline(database: Path, packages: Iterable[LockedPackage]) -> Audit:
    """The lock against the OSV records at `database`; UsageError (exit 2) for a database that cannot
    be read, holds something other than OSV records, or holds no PyPI records (it audits nothing)."""
    if not os.path.lexists(database):
        raise UsageError(f"--database {database}: no such file or directory; give a folder of OSV JSON records, "
                         "a zip of them or one record file")
    locked = {p.name: p for p in packages}
    findings: set[Finding] = set()
    unknown: dict[str, str] = {}
    ecosystems: Counter[str] = Counter()
    count = 0
    try:
        for name, data in _records(database):
            parsed = load_json(data, name, RECORD_CAP, max_depth=RECORD_DEPTH, unique_keys=False)
            for one in parsed if isinstance(parsed, list) else [parsed]:
                if not osv_record(one):
                    raise UsageError(f"{shown(name)} holds {json_kind(one)} that is not an OSV record "
                                     "(no string \"id\" and \"modified\"): give OSV's PyPI records")
                verdict = judge_record(one, locked)
                findings.update(verdict.findings)
                for package, why in verdict.not_evaluated:
                    unknown.setdefault(package, why)
                ecosystems.update(verdict.ecosystems or {"none"})
                count += 1
    except UsageError:
        raise  # the audit's own refusal, one line with its fix
    except Problem as problem:
        raise UsageError(f"{problem}; give a folder of OSV JSON records, a zip of them or one record file") from None
    if count == 0:
        raise UsageError(f"--database {database}: no OSV JSON records in it (*.json files, a zip of them, or one file)")
    if not ecosystems["PyPI"]:
        held = ", ".join(f"{shown(e)[:40]} {n}" for e, n in ecosystems.most_common(3))
        raise UsageError(f"--database {database}: none of its {count} OSV records is of the PyPI ecosystem ({held}), "
                         "so it audits nothing; give OSV's PyPI records (the PyPI folder or its all.zip)")
    return Audit(source=f"{count} OSV records ({ecosystems['PyPI']} of PyPI) in {database}",
                 findings=tuple(sorted(findings, key=_order)),
                 not_evaluated=tuple(sorted(unknown.items())))


def _order(finding: Finding):
    return (finding.package, finding.id)


# One answer of the index's JSON API or an OSV API: a package's record with its README, or the OSV
# records of one package (torch's some tens, a few KiB each).
ANSWER_CAP = 16 * MiB
ANSWER_DEPTH = 32
QUERY_DEADLINE_S = 30.0  # one package's answer, connection and redirects included (an OSV answer takes < 5 s)
INDEX = "the package index's vulnerability data"
OSV_ANSWER_KEYS = frozenset(("vulns", "next_page_token"))


class _Answer:
    """A 2xx answer (or a 404) as pip-audit's PyPI service reads a requests.Response."""

    def __init__(self, status: int, body: bytes, name: str):
        self.status_code, self.body, self.name = status, body, name

    def raise_for_status(self) -> None:
        import requests

        if self.status_code >= 400:
            raise requests.HTTPError(f"{self.status_code}", response=self)

    def json(self):
        return load_json(self.body, self.name, ANSWER_CAP, ANSWER_DEPTH, unique_keys=False)


class IndexSession:
    """pip-audit's PyPI service's session: every read through door.remote (a deadline, a byte cap);
    a 404 is the service's "not found" (the package skipped), any other failure a RemoteProblem."""

    def get(self, url: str, timeout=None, **_unused) -> _Answer:
        name = f"{INDEX} ({shown(url.rstrip('/').rsplit('/', 3)[-3])})"
        try:
            reply = remote.request(url, name=name, deadline_s=QUERY_DEADLINE_S, cap_bytes=ANSWER_CAP)
        except remote.RemoteProblem as problem:
            if problem.status == 404:
                return _Answer(404, b"", name)
            raise
        return _Answer(reply.status, reply.body, name)


def _index_findings(pin: LockedPackage, version: Version, service) -> tuple[list[Finding], str | None]:
    """The index's findings for one pin, or the reason it was skipped."""
    from pip_audit._service.interface import ResolvedDependency, SkippedDependency

    spec, results = service.query(ResolvedDependency(name=pin.name, version=version))
    if isinstance(spec, SkippedDependency):
        return [], spec.skip_reason
    return [Finding(package=pin.name, version=pin.version, id=str(r.id), aliases=tuple(sorted(map(str, r.aliases))),
                    fixed_in=tuple(str(v) for v in r.fix_versions),
                    summary=shown(str(r.description or "").strip().split("\n", 1)[0])[:200]) for r in results], None


def audit_index(packages: Iterable[LockedPackage]) -> Audit:
    """The lock against the package index's vulnerability data, asked by pip-audit's PyPI service
    (its URL and its reading of the answer) through door.remote (IndexSession)."""
    from pip_audit._service import PyPIService
    from pip_audit._service.interface import ServiceError

    findings, skipped, unknown = [], [], []
    with tempfile.TemporaryDirectory(prefix="vllm-turing-audit-") as tmp:
        service = PyPIService(cache_dir=Path(tmp))
        service.session = IndexSession()
        for pin in packages:
            version = _version(pin.version)
            if version is None:
                unknown.append((pin.name, f"its locked version {pin.version!r} is not a PEP 440 version"))
                continue
            try:
                found, skip = _index_findings(pin, version, service)
            except ServiceError as error:  # a fixed_in that is not a version
                unknown.append((pin.name, f"{INDEX} for it does not parse ({shown(str(error))[:80]})"))
                continue
            except (KeyError, TypeError, AttributeError, ValueError):
                raise UsageError(f"{INDEX} for {pin.name} is not the index's JSON API answer (its \"vulnerabilities\" "
                                 "not OSV-like entries): give --osv-url (a mirror's OSV API) or --database PATH") from None
            findings += found
            if skip:
                skipped.append((pin.name, skip))
    return Audit(source=f"{INDEX} (pip-audit's PyPI service)", findings=tuple(sorted(findings, key=_order)),
                 not_audited=tuple(skipped), not_evaluated=tuple(unknown))


def osv_answer(data: bytes, name: str) -> list:
    """An OSV API's answer to one query: its records (a list of OSV records, none for {}), or Problem."""
    answer = load_json(data, name, ANSWER_CAP, ANSWER_DEPTH, unique_keys=False)
    records = answer.get("vulns", []) if isinstance(answer, dict) and set(answer) <= OSV_ANSWER_KEYS else None
    if not isinstance(records, list) or not all(osv_record(r) for r in records):
        raise UsageError(f"{name} is not an OSV API answer ({{\"vulns\": [OSV records]}} or {{}}): "
                         "give --osv-url an OSV API's /v1/query URL")
    if isinstance(answer, dict) and answer.get("next_page_token"):
        raise UsageError(f"{name} holds more records than one answer (a next_page_token): "
                         "give --database PATH (OSV's PyPI dump) instead")
    return records


def audit_osv_api(url: str, packages: Iterable[LockedPackage]) -> Audit:
    """The lock against an OSV API (a mirror's /v1/query), one POST a package through door.remote;
    each answer's records judged here as the offline database's are."""
    findings: set[Finding] = set()
    unknown: dict[str, str] = {}
    for pin in packages:
        name = f"--osv-url's answer for {pin.name}"
        query = json.dumps({"package": {"name": pin.name, "ecosystem": "PyPI"}, "version": pin.version}).encode()
        body = remote.request(url, name=name, method="POST", body=query, deadline_s=QUERY_DEADLINE_S,
                              cap_bytes=ANSWER_CAP, headers={"Content-Type": "application/json"}).body
        for record in osv_answer(body, name):
            verdict = judge_record(record, {pin.name: pin})
            findings.update(verdict.findings)
            for package, why in verdict.not_evaluated:
                unknown.setdefault(package, why)
    return Audit(source="the OSV API at --osv-url", findings=tuple(sorted(findings, key=_order)),
                 not_evaluated=tuple(sorted(unknown.items())))


@contextlib.contextmanager
def _host_ca(osv_url: str | None) -> Iterator[None]:
    """The host's CA bundle (pip's, where it has one) for door.remote, which verifies with OpenSSL's
    default paths: SSL_CERT_FILE names it while the audit reads over TLS, and is restored after."""
    ca = host_ca_bundle() if osv_url is None or osv_url.lower().startswith("https:") else None
    if ca is None or ca[1] in ("SSL_CERT_FILE", "the system store"):  # OpenSSL reads these already
        yield
        return
    before = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(ca[0])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SSL_CERT_FILE", None)
        else:
            os.environ["SSL_CERT_FILE"] = before


def audit_online(packages: tuple[LockedPackage, ...], osv_url: str | None) -> Audit:
    try:
        with _host_ca(osv_url):
            return audit_osv_api(osv_url, packages) if osv_url else audit_index(packages)
    except remote.RemoteProblem as problem:
        raise UsageError(f"{problem}; " + ("check --osv-url, or with no network give --database PATH" if osv_url else
                         "give --osv-url (a mirror's OSV API) or, with no network, --database PATH")) from None
    except UsageError:
        raise  # the audit's own refusal, one line with its fix
    except Problem as problem:
        raise UsageError(f"{problem}; " + ("give --osv-url an OSV API's /v1/query URL" if osv_url else
                         "give --osv-url (a mirror's OSV API) or, with no network, --database PATH")) from None
    except ImportError:
        raise UsageError("`build.py audit` needs pip-audit: python3 -m pip install -r requirements.txt") from None


def audited_count(audit: Audit, locked_count: int) -> int:
    return locked_count - len({p for p, _ in audit.not_audited} | {p for p, _ in audit.not_evaluated})


def knows_none(audit: Audit, locked_count: int) -> bool:
    """Whether the source knew none of the locked packages (it audited nothing: a refusal, not a report)."""
    return locked_count > 0 and len({p for p, _ in audit.not_audited}) == locked_count


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
    for package, why in audit.not_evaluated:
        lines.append(f"{package}: not evaluated, never counted clean: {why}")
    if audit.not_audited:
        reasons = sorted({why.split(":", 1)[0] for _, why in audit.not_audited})
        lines.append(f"not audited: {len(audit.not_audited)} of {locked_count} packages ({'; '.join(reasons)[:200]})")
    audited = audited_count(audit, locked_count)
    unknown = f" ({len(audit.not_evaluated)} not evaluated)" if audit.not_evaluated else ""
    lines.append(f"{len(audit.findings)} findings in {len(by_package)} packages; {audited} of {locked_count} locked "
                 f"packages audited{unknown}, against {audit.source}")
    if knows_none(audit, locked_count):
        lines.append("nothing was audited: this source knows none of the packages; give --database PATH "
                     "(an OSV dump) or --osv-url (a mirror's OSV API)")
    return lines


def osv_url(text: str) -> str:
    """--osv-url: an http(s) URL with a host (credentials in it stay out of every message)."""
    try:
        urls = index_urls("--osv-url", text)
    except Problem as exc:
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
    parser.add_argument("--fail-on-findings", action="store_true",
                        help="exit 1 when a package has a finding or a record naming it cannot be evaluated (default: a report, exit 0)")


def run(args) -> int:
    lock = args.lock or lock_for(cpu_target() if args.vehicle else base_target(args.vllm_version))
    packages = read_lock(lock, f"--lock {lock}" if args.lock else str(lock))
    print(f"auditing {len(packages)} packages of {lock.name}", flush=True)
    audit = audit_offline(args.database, packages) if args.database else audit_online(packages, args.osv_url)
    lines = report_lines(audit, len(packages))
    if knows_none(audit, len(packages)):
        raise UsageError(f"{lines[-2]}; {lines[-1]}")
    for line in lines:
        print(line, flush=True)
    return 1 if args.fail_on_findings and (audit.findings or audit.not_evaluated) else 0
