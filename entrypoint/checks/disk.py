"""Disk: each path (HF cache, TMPDIR, Triton and vLLM caches) measured on its own filesystem, since
they often sit on different ones; the needs of paths sharing a filesystem add up.

What a read-only or full filesystem does, as the cache check and docs/deploy.md say it too:
- read-only: a path the server must write (TMPDIR: gcc builds Triton's launchers there; Triton's
  cache: PermissionError at the first kernel compile; vLLM's cache: its compile makes a folder there)
  fails; the Hub cache warns (a model already in it is read, nothing new is kept);
- writable but with less free space than the need: fails, since a compile that runs out of space
  leaves cut files behind; less than twice the need warns.
The needs are floors from the seed deployments: docs/benchmarks.md has no measured compile-cache
size per model class to derive them from."""
from __future__ import annotations

import dataclasses
import os

from contract.verdict import Result, Status, passed, worst
from .model import gib

NAME = "disk"
GIB = 2**30
# Floors from the seed deployments: Triton and torch.compile artefacts of one model take a few
# hundred MB each, gcc builds Triton's launcher stubs under TMPDIR.
NEED_HF_CACHE = 1 * GIB
NEED_TMPDIR = 1 * GIB
NEED_TRITON_CACHE = 1 * GIB
NEED_VLLM_CACHE = 2 * GIB


@dataclasses.dataclass(frozen=True)
class Target:
    label: str
    path: str
    need: int
    must_write: bool = True  # False: a cache the server keeps but can run without (it recompiles)
    setting: str = ""        # the variable that moves it (VLLM_CACHE_ROOT); "" for a mount only


def make_room(members: list[Target]) -> str:
    """The fix for a filesystem short of space: the variables that would move its paths elsewhere."""
    settings = [member.setting for member in members if member.setting]
    if not settings:
        return "free space there or mount a larger volume there"
    return f"free space there or point {' or '.join(settings)} at a larger volume"


def existing_ancestor(path: str) -> str:
    """The path itself or its nearest existing parent: where a missing cache will be created."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def read_only(members: list[Target], names: str) -> Result:
    """A read-only filesystem: a failure where the server must write, else a warning (nothing is kept)."""
    if any(member.must_write for member in members):
        return Result(NAME, Status.FAIL, f"{names}: read-only filesystem", "mount a writable volume there")
    return Result(NAME, Status.WARN, f"{names}: read-only filesystem: nothing is kept there, every start "
                                     "compiles (and downloads) afresh", "mount a writable volume there")


def check_disk(targets: list[Target]) -> Result:
    groups: dict[int, list[Target]] = {}
    stats = {}
    for target in targets:
        where = existing_ancestor(target.path)
        device = os.stat(where).st_dev
        groups.setdefault(device, []).append(target)
        stats[device] = os.statvfs(where)
    findings = []
    for device, members in groups.items():
        vfs = stats[device]
        free = vfs.f_bavail * vfs.f_frsize
        need = sum(member.need for member in members)
        names = ", ".join(f"{member.label} {member.path}" for member in members)
        if vfs.f_flag & os.ST_RDONLY:
            findings.append(read_only(members, names))
        elif free < need:
            findings.append(Result(NAME, Status.FAIL, f"{names}: {gib(free)} free on that filesystem, need {gib(need)}",
                                   make_room(members)))
        elif free < 2 * need:
            findings.append(Result(NAME, Status.WARN, f"{names}: only {gib(free)} free on that filesystem "
                                                      f"(need {gib(need)})", make_room(members)))
        else:
            findings.append(passed(NAME, f"{names}: {gib(free)} free"))
    status = worst(findings)
    if status is not Status.PASS:
        return next(finding for finding in findings if finding.status is status)
    return passed(NAME, f"{len(targets)} paths on {len(groups)} filesystem(s), each with room: "
                        + "; ".join(finding.message for finding in findings))
