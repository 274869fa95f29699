"""Disk: each path (HF cache, TMPDIR, Triton and vLLM caches) measured on its own filesystem, since
they often sit on different ones; the needs of paths sharing a filesystem add up."""
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
MAKE_ROOM = "free space there or point the variable at a larger volume"


@dataclasses.dataclass(frozen=True)
class Target:
    label: str
    path: str
    need: int


def existing_ancestor(path: str) -> str:
    """The path itself or its nearest existing parent: where a missing cache will be created."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


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
            findings.append(Result(NAME, Status.FAIL, f"{names}: read-only filesystem", "mount a writable volume there"))
        elif free < need:
            findings.append(Result(NAME, Status.FAIL, f"{names}: {gib(free)} free on that filesystem, need {gib(need)}",
                                   MAKE_ROOM))
        elif free < 2 * need:
            findings.append(Result(NAME, Status.WARN, f"{names}: only {gib(free)} free on that filesystem "
                                                      f"(need {gib(need)})", MAKE_ROOM))
        else:
            findings.append(passed(NAME, f"{names}: {gib(free)} free"))
    status = worst(findings)
    if status is not Status.PASS:
        return next(finding for finding in findings if finding.status is status)
    return passed(NAME, f"{len(targets)} paths on {len(groups)} filesystem(s), each with room: "
                        + "; ".join(finding.message for finding in findings))
