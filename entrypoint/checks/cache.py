"""Cache: whether VLLM_CACHE_ROOT (torch.compile's artifacts, kept on a volume across restarts)
belongs to this image. The entrypoint keeps a stamp there (contract.layout.CACHE_STAMP_NAME) naming
the image that filled it: vLLM, torch and Triton versions, and a digest of the build reports that
change with the image. A cache from another image, one without a stamp, or a cache root that is not
a directory is a warning: vLLM keys its artifacts itself, so a stale cache costs a full compile and
disk space, not correctness. A cache root that cannot be written fails, as the disk check fails it:
vLLM's compile creates its folder there (os.makedirs, vLLM 0.33.0) and dies after the load.

Every other cache the server writes (Triton's, the Hub's, XDG_CACHE_HOME, torch inductor's when
set, the folders the extra words name) is probed by creating and removing a file in it (or in its
nearest existing parent, where it will be created) as the uid the server runs as: Triton's raises
PermissionError at the first kernel compile, after the load (measured in the image as uid 4242:4242
with the units' cache paths), so an unwritable Triton cache fails the check; the others warn.

A cache the server loads compiled code from (VLLM_CACHE_ROOT, Triton's, inductor's, a compilation
cache_dir) on a mount with `noexec` fails: the load dies tens of seconds in, naming the wrong folder.
Free space is the disk check's to judge, not this one's.

`check` only reports; the serve path stamps (after the preflight passed, right before exec)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import tempfile
from typing import Callable, Mapping

from contract import distributions
from imagefacts.shape import PACKAGES
from contract.layout import CACHE_STAMP_NAME, CLAMP_REPORT, FIT_TABLE, IMAGE_FACTS, VERSIONS_REPORT
from contract.verdict import Result, Status, failed, passed, warned
from door import files
from door.files import own_json
from door.problem import Problem

from .. import mounts
from .disk import existing_ancestor

NAME = "cache"
STAMP_FORMAT = 1
# Build outputs whose bytes change with the image (the clamp, its proof, the stack's versions).
IDENTITY_FILES = (VERSIONS_REPORT, FIT_TABLE, CLAMP_REPORT, IMAGE_FACTS)
IDENTITY_CAP = 16 * files.MiB
STAMP_MAX_BYTES = 64 * 1024
PER_IMAGE = ("give each image version its own cache volume, or empty this one "
             "(docker compose down -v drops the volumes)")


@dataclasses.dataclass(frozen=True)
class Identity:
    """Which image this is, as far as its caches care."""
    versions: Mapping[str, str | None]
    digest: str

    def to_dict(self) -> dict:
        return {"versions": dict(self.versions), "digest": self.digest}

    @classmethod
    def from_dict(cls, data) -> "Identity | None":
        if not isinstance(data, dict) or not isinstance(data.get("versions"), dict) \
                or not isinstance(data.get("digest"), str):
            return None
        return cls({k: v for k, v in data["versions"].items() if isinstance(v, (str, type(None)))}, data["digest"])

    def describe(self) -> str:
        names = {"vllm": "vLLM", "torch": "torch", "triton": "Triton"}
        return ", ".join([f"{names[p]} {self.versions[p]}" for p in PACKAGES if self.versions.get(p)]
                         + [f"image {self.digest[:12]}"])


@dataclasses.dataclass(frozen=True)
class CacheState:
    """What VLLM_CACHE_ROOT holds, read without opening anything that could block (a FIFO)."""
    kind: str  # "missing", "directory", or what else it is ("a FIFO", "a regular file", ...)
    writable: bool
    unwritable_why: str = ""
    has_files: bool = False
    stamp: Identity | None = None
    stamp_problem: str = ""  # set when a stamp exists but cannot be read as one


def _content(path: str) -> bytes | None:
    """A build report's bytes, None where it is absent or not a readable regular file."""
    try:
        return files.read_bytes(path, path, IDENTITY_CAP)
    except Problem:
        return None


def installed_versions() -> dict[str, str | None]:
    """vllm/torch/triton from the installed distributions' metadata (no import of the packages)."""
    return distributions.installed_versions(PACKAGES)


def image_identity(files=IDENTITY_FILES, versions_file: str = VERSIONS_REPORT,
                   fallback: Callable[[], dict] = installed_versions) -> Identity:
    """The versions the build recorded (versions.json; the installed metadata where the build wrote
    none, as in the CPU vehicle) and a digest of the versions and of every identity file present."""
    raw = _content(versions_file)
    try:
        recorded = own_json(raw) if raw is not None else None
    except ValueError:
        recorded = None
    versions = {p: recorded.get(p) for p in PACKAGES} if isinstance(recorded, dict) else fallback()
    digest = hashlib.sha256(json.dumps(versions, sort_keys=True).encode())
    for path in files:
        content = _content(path)
        if content is not None:
            digest.update(f"\0{os.path.basename(path)}\0{len(content)}\0".encode())
            digest.update(content)
    return Identity(versions, digest.hexdigest())


def stamp_path(root: str) -> str:
    return os.path.join(root, CACHE_STAMP_NAME)


def _read_stamp(root: str) -> tuple[Identity | None, str]:
    """The stamp's identity, or why it is unreadable ("" with None: no stamp)."""
    path = stamp_path(root)
    if not os.path.lexists(path):
        return None, ""
    try:
        data = files.read_object(path, CACHE_STAMP_NAME, STAMP_MAX_BYTES)
    except Problem as problem:
        return None, str(problem)
    identity = Identity.from_dict(data.get("image"))
    return (identity, "") if identity else (None, f"{CACHE_STAMP_NAME} is not a stamp of this format")


def _unwritable_why(path: str) -> str:
    """Why `path` (an existing directory) cannot take new files as this process's uid, or "" when it
    can: a file is created there and removed (os.access answers for the real uid, and not for a
    read-only mount or an ACL)."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only filesystem"
        fd, probe = tempfile.mkstemp(prefix=".vllm-turing-probe-", dir=path)
    except OSError as error:
        return (error.strerror or str(error)).lower()
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return ""


def writable_why(path: str) -> str:
    """Why the server cannot write under `path` (created where missing), or "" when it can."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return _unwritable_why(existing_ancestor(path))
    except (OSError, ValueError) as error:
        return (getattr(error, "strerror", None) or str(error)).lower()
    if not stat.S_ISDIR(info.st_mode):
        return f"it is {files.kind(info.st_mode)}, not a directory"
    return _unwritable_why(path)


@dataclasses.dataclass(frozen=True)
class Written:
    """A cache folder the server writes: the setting (or option) that names it, the path, whether
    an unwritable one fails the preflight, and what happens when the server cannot write it."""
    setting: str
    path: str
    required: bool
    consequence: str
    loads_code: bool = False  # the server maps compiled code (.so files) from it


TRITON_CONSEQUENCE = "Triton raises PermissionError at the first kernel compile, after the model has loaded"


def unwritable(written: Written, why: str) -> str:
    return f"{written.setting} {written.path} is not writable by uid {os.geteuid()} ({why}): {written.consequence}"


def writable_fix(written: list[Written]) -> str:
    names = " and ".join(dict.fromkeys(item.setting for item in written))
    return (f"mount a volume writable by uid {os.geteuid()} (gid {os.getegid()}) there (chown or chmod g+w on the host "
            f"with the group the container runs in), point {names} at a writable folder, or run the container as the "
            "folder's owner")


NOEXEC_FIX = ("mount a named volume there (the units do), or a tmpfs with the exec option "
              "(docker run --tmpfs PATH:exec,size=4g; Docker mounts a tmpfs noexec by default)")


def noexec_problems(loaded: list[tuple[str, str]], mounted: list[mounts.Mount]) -> list[str]:
    """For each (setting, resolved path) the server loads compiled code from, why it cannot: the
    mount holding it has `noexec`."""
    problems = []
    for setting, path in loaded:
        mount = mounts.mount_of(path, mounted)
        if mount is not None and mount.noexec:
            problems.append(f"{setting} {path} is on {mount.mount_point} ({mount.fstype}), mounted noexec: the "
                            "server loads its compiled kernels from there and would die at the first load "
                            "(\"failed to map segment from shared object\")")
    return problems


def check_executable(loaded: list[tuple[str, str]], mountinfo: str | None = None) -> Result | None:
    """A failure when a cache the server loads code from is on a noexec mount, else None."""
    text = mounts.read_mountinfo() if mountinfo is None else mountinfo
    problems = noexec_problems([(setting, mounts.resolved(path)) for setting, path in loaded],
                               mounts.parse_mountinfo(text))
    return failed(NAME, "; ".join(problems), NOEXEC_FIX) if problems else None


WALK_LIMIT = 10_000  # directory entries read before a cache of empty directories counts as filled


def holds_files(root: str, limit: int = WALK_LIMIT) -> bool:
    """Whether anything but empty directories lies below `root` (a tree of empty directories, as an
    image can carry where a build step made a cache folder, holds no cache). The stamp counts as a
    file too: the judge reads the stamp before it asks this. Symlinks are not followed: a symlink,
    FIFO or socket counts as a file. Unreadable directories count as empty; past `limit` entries the
    answer is yes."""
    pending, seen = [root], 0
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > limit:
                        return True
                    if not entry.is_dir(follow_symlinks=False):
                        return True
                    pending.append(entry.path)
        except OSError:
            continue
    return False


def inspect(root: str, walk: bool = True) -> CacheState:
    """The cache root's state; `walk=False` leaves `has_files` unread (False), for callers that only
    need the stamp and whether the root takes files."""
    try:
        info = os.stat(root)
    except FileNotFoundError:
        why = _unwritable_why(existing_ancestor(root))
        return CacheState("missing", not why, why)
    except OSError as error:
        return CacheState(error.strerror or "unreadable", False, error.strerror or str(error))
    if not stat.S_ISDIR(info.st_mode):
        return CacheState(files.kind(info.st_mode), False, "not a directory")
    why = _unwritable_why(root)
    stamp, problem = _read_stamp(root)
    return CacheState("directory", not why, why, walk and holds_files(root), stamp, problem)


def judge(root: str, state: CacheState, ours: Identity, compiles: bool = True) -> Result:
    """`compiles`: whether the server writes VLLM_CACHE_ROOT on its way to serving (torch.compile, or
    the peer-to-peer table of a multi-GPU server); without, an unwritable root only warns."""
    where = f"VLLM_CACHE_ROOT {root}"
    if state.kind not in ("missing", "directory"):
        return warned(NAME, f"{where} is {state.kind}, not a directory: vLLM cannot keep its compiles there",
                      "point VLLM_CACHE_ROOT at a directory (the units mount a volume at it)")
    if not state.writable and compiles:  # vLLM 0.33.0 makes its torch.compile folder there (os.makedirs) and dies
        return failed(NAME, f"{where} is not writable ({state.unwritable_why}): vLLM's compile makes its "
                            "folder there and would die after the load", "mount a writable volume at VLLM_CACHE_ROOT")
    if not state.writable:  # measured: eager on one device serves, its model-info and start-plan caches unkept
        return warned(NAME, f"{where} is not writable ({state.unwritable_why}): with ENFORCE_EAGER on one GPU vLLM "
                            "serves without it, logging a PermissionError traceback for the model-info cache it "
                            "cannot keep, and a later start without ENFORCE_EAGER would die after the load",
                      "mount a writable volume at VLLM_CACHE_ROOT")
    if state.stamp_problem:
        return warned(NAME, f"{where}: its stamp is unreadable ({state.stamp_problem}); "
                            f"the server stamps it for this image at start ({ours.describe()})",
                      f"nothing, unless it stays: then remove {stamp_path(root)}")
    if state.stamp is None and state.has_files:
        return warned(NAME, f"{where} holds a cache without a stamp (an older vllm-turing or another vLLM "
                            f"image filled it); the server stamps it for this image at start ({ours.describe()})",
                      "nothing, if this image filled it; otherwise " + PER_IMAGE)
    if state.stamp is None:
        return passed(NAME, f"{where}: empty; the server stamps it for this image at start ({ours.describe()})")
    if state.stamp.digest != ours.digest:
        return warned(NAME, f"{where} was filled by another image ({state.stamp.describe()}; this one is "
                            f"{ours.describe()}): its compiles do not apply, old entries keep their space",
                      PER_IMAGE)
    return passed(NAME, f"{where} belongs to this image ({ours.describe()}): a restart reuses its compiles")


def needs_stamp(state: CacheState, ours: Identity) -> bool:
    """Whether the serve path should (re)write the stamp: the root can hold it and it names another image."""
    return state.kind in ("missing", "directory") and state.writable and \
        (state.stamp is None or state.stamp.digest != ours.digest)


def check_cache(root: str, ours: Identity | None = None, written: tuple[Written, ...] = (),
                mountinfo: str | None = None, compiles: bool = True) -> Result:
    """A cache the server loads code from on a noexec mount fails; then VLLM_CACHE_ROOT judged
    (judge), and every other cache in `written` probed: a required one that is not writable fails,
    any other warns (with the VLLM_CACHE_ROOT finding after it)."""
    noexec = check_executable([("VLLM_CACHE_ROOT", root)] + [(item.setting, item.path) for item in written
                                                             if item.loads_code], mountinfo)
    if noexec is not None:
        return noexec
    problems = [(item, why) for item in written for why in [writable_why(item.path)] if why]
    result = judge(root, inspect(root), ours or image_identity(), compiles)
    if not problems:
        return result
    # Every unwritable cache named in one line (a uid outside the folders' group meets them all at
    # once): the required ones first, then the VLLM_CACHE_ROOT finding, then the rest; a failure of
    # any of them fails the check.
    required = [unwritable(item, why) for item, why in problems if item.required]
    others = [unwritable(item, why) for item, why in problems if not item.required]
    root_finding = [result.message] if result.status is not Status.PASS else []
    fixes = ([result.fix] if root_finding and not required else []) + [writable_fix([item for item, _ in problems])] \
        + ([result.fix] if root_finding and required else [])
    verdict = failed if required or result.status is Status.FAIL else warned
    return verdict(NAME, "; ".join(required + root_finding + others), "; ".join(fixes))


def write_stamp(root: str, ours: Identity) -> None:
    """The stamp, written atomically (creating VLLM_CACHE_ROOT as vLLM would); raises OSError."""
    os.makedirs(root, exist_ok=True)
    partial = os.path.join(root, f".{CACHE_STAMP_NAME}.{os.getpid()}.tmp")
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump({"format": STAMP_FORMAT, "image": ours.to_dict()}, handle, indent=2)
            handle.write("\n")
        os.replace(partial, stamp_path(root))
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)


def stamp_before_start(root: str, skip_checks=(), ours: Identity | None = None) -> str | None:
    """Stamp the cache for this image where it needs it (not when SKIP_CHECKS names this check: then
    the cache is left as it is); a one-line warning instead of an error."""
    if NAME in skip_checks:
        return None
    ours = ours or image_identity()
    state = inspect(root, walk=False)  # needs_stamp reads no file count
    if not needs_stamp(state, ours):
        return None
    try:
        write_stamp(root, ours)
    except OSError as error:
        return f"cannot stamp VLLM_CACHE_ROOT {root} for this image: {error.strerror or error}"
    return None
