"""A start ledger on the cache volume, and a compile cache that heals itself.

A damaged compile cache is a crash loop: a compiled `.so` cut short (a full disk, an interrupted
copy, a kill mid-write) makes every later start die loading it, after the preflight passed, until
someone deletes the volume. So, on each start (after the preflight passed, before the exec):

- the ledger (contract.layout.START_LEDGER_NAME in VLLM_CACHE_ROOT) says whether the last start
  became healthy: the entrypoint records "started", the server's start report marks it "healthy"
  when vLLM announces its HTTP server (entrypoint/start_report.py);
- every `.so` in VLLM_CACHE_ROOT and TRITON_CACHE_DIR gets a cheap integrity check: not empty, a
  valid ELF header, as long as its section and program header tables say;
- a cache with a damaged `.so`, and VLLM_CACHE_ROOT when the last start died before it became
  healthy (torch.compile writes its artefacts in place; Triton's cache writes each file under a
  temporary name and renames it, so a death does not damage it), has its entries moved aside into
  a named folder inside it (ASIDE_DIR/<UTC time>: the root is usually a volume's mount point, which
  cannot be renamed), at most KEEP_ASIDE of them kept, and the start compiles afresh, with one line.

The ledger is held under an exclusive flock for the server's life (the descriptor survives the
exec): a second server on the same volume sees it held and leaves the caches alone.
`decide` is pure; the rest are thin effects. Standard library only (this runs in the image)."""
from __future__ import annotations

import dataclasses
import datetime
import fcntl
import json
import os
import shutil
import struct
from typing import Callable

from contract.layout import CACHE_STAMP_NAME, START_LEDGER_NAME
from door import files
from door.problem import Problem

LEDGER_FORMAT = 1
LEDGER_MAX_BYTES = 4096
ASIDE_DIR = "vllm-turing-aside"
KEEP_ASIDE = 2
SCAN_LIMIT = 50_000  # directory entries read per cache before the scan stops (a bounded start)
SHOWN = 3  # damaged files named in the line
ELF_MAGIC = b"\x7fELF"
# After the 16-byte e_ident: e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags,
# e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx, by EI_CLASS (1: 32-bit, 2: 64-bit).
ELF_HEADER = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
BYTE_ORDER = {1: "<", 2: ">"}


@dataclasses.dataclass(frozen=True)
class Last:
    """What the ledger says of the last start: "none" (no ledger), "started" (it never became
    healthy), "healthy", or "unreadable"; `at` its start time (epoch seconds, 0 when unknown)."""
    state: str
    at: float = 0.0


@dataclasses.dataclass(frozen=True)
class Damage:
    path: str
    problem: str


@dataclasses.dataclass(frozen=True)
class CacheFindings:
    setting: str  # the variable naming the cache: VLLM_CACHE_ROOT, TRITON_CACHE_DIR
    root: str
    holds_entries: bool  # anything besides the ledger, the stamp and the aside folder
    damage: tuple[Damage, ...] = ()
    keeps_ledger: bool = False


@dataclasses.dataclass(frozen=True)
class Heal:
    setting: str
    root: str
    reason: str


def elf_problem(size: int, header: bytes) -> str:
    """Why a file of `size` bytes starting with `header` (its first 64 bytes or all of it) is not a
    whole ELF shared object, or "" when it looks whole."""
    if size == 0:
        return "empty"
    if header[:4] != ELF_MAGIC[:len(header)] or not header:
        return "not an ELF file"
    if len(header) < 16:
        return f"truncated ({size} bytes, inside its ELF header)"
    layout, order = ELF_HEADER.get(header[4]), BYTE_ORDER.get(header[5])
    if layout is None or order is None:
        return "not an ELF file (unknown class or byte order)"
    needed = 16 + struct.calcsize(order + layout)
    if len(header) < needed:
        return f"truncated ({size} bytes, its ELF header alone takes {needed})"
    fields = struct.unpack_from(order + layout, header, 16)
    phoff, shoff, phentsize, phnum, shentsize, shnum = fields[4], fields[5], fields[8], fields[9], fields[10], fields[11]
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum, needed)
    if size < end:
        return f"truncated ({size} bytes, its headers say at least {end})"
    return ""


def so_damage(path: str) -> Damage | None:
    """The integrity finding for one `.so` file, None when it looks whole (or cannot be opened:
    then the server cannot load it either, and says so itself)."""
    try:  # a regular file only: a FIFO named *.so in the cache must not hang the start
        with files.opened(path, path) as (fd, size):
            header = files.read_at(fd, 0, 64, path)
    except Problem:
        return None
    problem = elf_problem(size, header)
    return Damage(path, problem) if problem else None


KEPT_NAMES = (START_LEDGER_NAME, CACHE_STAMP_NAME, ASIDE_DIR)


def entries(root: str, kept: tuple[str, ...]) -> list[str]:
    """The root's entries that a heal moves aside (not the ledger, the stamp or earlier asides)."""
    try:
        return sorted(name for name in os.listdir(root) if name not in kept)
    except OSError:
        return []


def scan(root: str, limit: int = SCAN_LIMIT) -> tuple[Damage, ...]:
    """Every damaged `.so` below `root` (not under ASIDE_DIR; symlinks not followed), reading at
    most `limit` directory entries."""
    found, pending, seen = [], [root], 0
    while pending and seen < limit:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    seen += 1
                    if seen > limit:
                        break
                    if entry.is_dir(follow_symlinks=False):
                        if not (directory == root and entry.name == ASIDE_DIR):
                            pending.append(entry.path)
                    elif entry.name.endswith(".so") and entry.is_file(follow_symlinks=False):
                        damage = so_damage(entry.path)
                        if damage:
                            found.append(damage)
        except OSError:
            continue
    return tuple(sorted(found, key=lambda damage: damage.path))


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def decide(last: Last, busy: bool, caches: list[CacheFindings]) -> list[Heal]:
    """Which caches to move aside, and why. Nothing while another server holds the ledger (its
    caches are in use); a cache with damaged compiled files; the ledger's cache when the last start
    died before it became healthy and left entries behind."""
    if busy:
        return []
    heals = []
    for findings in caches:
        if findings.damage:
            shown = ", ".join(f"{os.path.relpath(d.path, findings.root)} ({d.problem})" for d in findings.damage[:SHOWN])
            more = f" and {len(findings.damage) - SHOWN} more" if len(findings.damage) > SHOWN else ""
            heals.append(Heal(findings.setting, findings.root, f"damaged compiled files: {shown}{more}"))
        elif findings.keeps_ledger and last.state == "started" and findings.holds_entries:
            since = f" (started {_when(last.at)})" if last.at else ""
            heals.append(Heal(findings.setting, findings.root, f"the last start{since} died before it became healthy"))
    return heals


def heal_line(heal: Heal, moved_to: str | None, error: str = "") -> str:
    """The one line a heal prints in the start report."""
    where = f"{heal.setting} {heal.root}"
    if moved_to is None:
        return f"vllm-turing: WARN cache: {where}: {heal.reason}; cannot move it aside ({error}): remove its entries by hand"
    return f"vllm-turing: cache healed: {where}: {heal.reason}; its entries moved to {moved_to}, this start compiles afresh"


def aside_name(now: float, existing: list[str]) -> str:
    """A new aside folder's name: its UTC time, with a counter where one of that second exists."""
    base = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name, number = base, 1
    while name in existing:
        number += 1
        name = f"{base}-{number}"
    return name


def to_delete(names: list[str], keep: int = KEEP_ASIDE) -> list[str]:
    """The aside folders beyond the newest `keep` (names sort by their time)."""
    ordered = sorted(names)
    return ordered[:max(len(ordered) - keep, 0)]


def move_aside(root: str, kept: tuple[str, ...], now: float, keep: int = KEEP_ASIDE) -> str:
    """Moves the root's entries (but `kept`) into a new ASIDE_DIR/<time> folder inside it and deletes
    the oldest asides beyond `keep`; returns the new folder. Raises OSError."""
    aside = os.path.join(root, ASIDE_DIR)
    os.makedirs(aside, exist_ok=True)
    target = os.path.join(aside, aside_name(now, os.listdir(aside)))
    os.mkdir(target)
    for name in entries(root, kept):
        os.rename(os.path.join(root, name), os.path.join(target, name))
    for old in to_delete(os.listdir(aside), keep):
        shutil.rmtree(os.path.join(aside, old), ignore_errors=True)
    return target


def ledger_path(root: str) -> str:
    return os.path.join(root, START_LEDGER_NAME)


def parse_ledger(raw: bytes) -> Last:
    try:
        data = files.own_json(raw)
    except ValueError:
        return Last("unreadable")
    if not isinstance(data, dict) or data.get("state") not in ("started", "healthy"):
        return Last("unreadable")
    at = data.get("started_at")
    return Last(data["state"], float(at) if isinstance(at, (int, float)) and 0 <= at < 2**40 else 0.0)


def ledger_text(state: str, started_at: float) -> bytes:
    return json.dumps({"format": LEDGER_FORMAT, "state": state, "started_at": round(started_at, 3)}).encode() + b"\n"


def _rewrite(fd: int, content: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, content)
    os.fsync(fd)


class Held:
    """The open, locked ledger of this start (None fields: no ledger could be kept)."""

    def __init__(self, fd: int | None, last: Last, busy: bool):
        self.fd, self.last, self.busy = fd, last, busy


def open_ledger(root: str) -> Held:
    """Opens (creating) the ledger in `root` and takes its lock without waiting. busy: another live
    process holds it. A root that cannot hold the ledger gives fd None and state "none"."""
    try:
        os.makedirs(root, exist_ok=True)
        fd = os.open(ledger_path(root), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o664)
    except OSError:
        return Held(None, Last("none"), False)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return Held(None, Last("none"), True)
    raw = os.pread(fd, LEDGER_MAX_BYTES, 0)
    return Held(fd, parse_ledger(raw) if raw else Last("none"), False)


def mark_healthy(path: str) -> None:
    """Marks the ledger's start healthy (from the server, when vLLM announces its HTTP server)."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        last = parse_ledger(os.pread(fd, LEDGER_MAX_BYTES, 0))
        _rewrite(fd, ledger_text("healthy", last.at))
    finally:
        os.close(fd)


def findings(setting: str, root: str, kept: tuple[str, ...], keeps_ledger: bool) -> CacheFindings:
    return CacheFindings(setting, root, bool(entries(root, kept)), scan(root) if os.path.isdir(root) else (),
                         keeps_ledger)


def nested(one: str, other: str) -> bool:
    """Whether one folder is, or lies inside, the other (then moving one's entries moves the other)."""
    one, other = os.path.realpath(one), os.path.realpath(other)
    return one == other or one.startswith(other.rstrip("/") + "/") or other.startswith(one.rstrip("/") + "/")


def prepare(vllm_cache_root: str, triton_cache_dir: str, now: float, say: Callable[[str], None]) -> str | None:
    """The start's ledger work: read and lock the ledger, heal what `decide` says, record this start.
    Returns the ledger's path for the server to mark healthy (its descriptor stays open and locked,
    inherited by the exec'd server), or None when no ledger is kept."""
    held = open_ledger(vllm_cache_root)
    if held.busy:
        say(f"vllm-turing: cache: another server holds {ledger_path(vllm_cache_root)}: its caches are left alone")
        return None
    caches = [findings("VLLM_CACHE_ROOT", vllm_cache_root, KEPT_NAMES, True)]
    if not nested(triton_cache_dir, vllm_cache_root):
        caches.append(findings("TRITON_CACHE_DIR", triton_cache_dir, KEPT_NAMES, False))
    for heal in decide(held.last, held.busy, caches):
        try:
            say(heal_line(heal, move_aside(heal.root, KEPT_NAMES, now)))
        except OSError as error:
            say(heal_line(heal, None, error.strerror or str(error)))
    if held.fd is None:
        return None
    try:
        _rewrite(held.fd, ledger_text("started", now))
        os.set_inheritable(held.fd, True)
    except OSError:
        os.close(held.fd)
        return None
    return ledger_path(vllm_cache_root)
