"""The mount a path lives on, read from /proc/self/mountinfo: which mount point holds it and its
per-mount options (noexec, ro). `parse_mountinfo` and `mount_of` are pure; `mount_of_path` reads.

A cache the server loads compiled code from (Triton's kernels and launcher stubs, torch.compile's
artefacts) on a `noexec` mount fails at the first load, tens of seconds into the start, with
"failed to map segment from shared object": Docker mounts a tmpfs `noexec` unless told otherwise."""
from __future__ import annotations

import dataclasses
import os
import re
from door import files

MOUNTINFO = "/proc/self/mountinfo"
MOUNTINFO_MAX_BYTES = 4 * 2**20
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclasses.dataclass(frozen=True)
class Mount:
    mount_point: str
    options: frozenset[str]  # the per-mount options (field 6): rw/ro, noexec, nosuid, ...
    fstype: str
    source: str

    @property
    def noexec(self) -> bool:
        return "noexec" in self.options


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as \\040, \\011, \\012, \\134."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Every well-formed line of a mountinfo text, in its order (a later mount over the same point
    hides the earlier one); malformed lines are skipped, never raised on."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        if len(fields) < separator + 3 or not fields[4].startswith("/"):
            continue
        mounts.append(Mount(_unescape(fields[4]), frozenset(fields[5].split(",")), fields[separator + 1],
                            _unescape(fields[separator + 2])))
    return mounts


def _contains(mount_point: str, path: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding the absolute, resolved `path`: the longest mount point that is a path
    prefix of it, the last one listed where several share that point; None when none does."""
    best: Mount | None = None
    for mount in mounts:
        if _contains(mount.mount_point, path) and (best is None or len(mount.mount_point) >= len(best.mount_point)):
            best = mount
    return best


def read_mountinfo(path: str = MOUNTINFO) -> str:
    """The mountinfo text, "" where it cannot be read (no /proc: nothing is judged)."""
    return files.read_system(path, MOUNTINFO_MAX_BYTES) or ""


def resolved(path: str) -> str:
    """`path` with its symlinks resolved, up to its nearest existing parent (a missing cache folder
    is created on the mount of that parent)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path, tail = os.path.split(path)
        missing.append(tail)
    return os.path.join(os.path.realpath(path), *reversed(missing))


def mount_of_path(path: str, mountinfo: str | None = None) -> Mount | None:
    return mount_of(resolved(path), parse_mountinfo(read_mountinfo() if mountinfo is None else mountinfo))
