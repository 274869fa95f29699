"""Archives from outside (a zip of OSV records, a tar of a fetched model): their members listed and
read within limits, or refused in one line naming the archive (a door.problem.Problem).

Before a byte of any member is read, the whole listing is judged:
- the archive is a regular file (door.files.opened: a FIFO or device is refused without blocking);
- at most `max_members` members: a zip's count is read from its end record before its central
  directory is parsed, a tar's while its headers are walked;
- every member name is relative and stays inside the archive: no absolute path, no `..`, no
  backslash, NUL or drive letter; symlinks, hard links, devices and FIFOs are refused, not skipped;
- no member larger than `member_cap`, and their declared sizes together at most `total_cap` (a bomb
  of 3,000 members of 1 GiB each is refused from its listing).
A read then stops at the member's declared size (zipfile and tarfile both stop there), so a listing
that lies gets a short member or a CRC error, never more bytes.
"""
from __future__ import annotations

import contextlib
import io
import os
import stat
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from typing import Iterable, Iterator

from door.files import opened, shown, size_text
from door.problem import Problem

MAX_MEMBERS = 200_000
TAR_BLOCK = 512
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")  # gzip, bzip2, xz
TOTAL_CAP = 2 * 2**30

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"


@dataclass(frozen=True)
class Limits:
    member_cap: int  # the largest one member may be, uncompressed
    max_members: int = MAX_MEMBERS
    total_cap: int = TOTAL_CAP  # all members together, uncompressed


@dataclass(frozen=True)
class Member:
    name: str
    size: int  # uncompressed, as the archive declares it


def member_name_problem(name: str) -> str | None:
    """Why a member name would leave the archive's folder, or None for a contained relative name."""
    if not name or "\0" in name or "\\" in name:
        return "is empty or holds a NUL or backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in name.split("/"):
        return "climbs out with `..`"
    return None


CHUNK = 8 * 2**20
_READ_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError, NotImplementedError)


class Archive:
    """An open archive's listed regular-file members, each read (`read`, or `copy` to a file in
    pieces) up to its declared size and refused when it holds fewer bytes."""

    def __init__(self, name: str, members: tuple[Member, ...], opener):
        self.name = name
        self.members = members
        self._opener = opener  # Member -> a binary stream of its bytes

    def read(self, member: Member) -> bytes:
        return b"".join(self._pieces(member))

    def copy(self, member: Member, sink) -> None:
        """The member's bytes written to `sink` in pieces of at most CHUNK (a weight of many GiB);
        an OSError of `sink` is the caller's (its disk), not the archive's: it is written here, outside
        the reading that turns an OSError into a Problem."""
        with contextlib.closing(self._pieces(member)) as pieces:
            for piece in pieces:
                sink.write(piece)

    def _pieces(self, member: Member) -> Iterator[bytes]:
        got = 0
        try:
            with self._opener(member) as stream:
                while got <= member.size and (piece := stream.read(min(CHUNK, member.size + 1 - got))):
                    got += len(piece)
                    yield piece
        except _READ_ERRORS as error:
            raise Problem(f"{self.name}: {shown(member.name)} cannot be read ({shown(str(error))[:120]})") from None
        if got != member.size:
            raise Problem(f"{self.name}: {shown(member.name)} holds {got} bytes, "
                          f"not the {member.size} its listing declares")


def _judge(name: str, listed: Iterable[tuple[str, int, str | None]], limits: Limits) -> tuple[Member, ...]:
    """The regular-file members of a listing of (name, size, kind or None for a regular file, "dir"
    for a folder, else what it is), judged one by one as they come, or Problem."""
    members, total = [], 0
    for member_name, size, kind in listed:
        why = member_name_problem(member_name)
        if why:
            raise Problem(f"{name}: the member {shown(member_name)[:120]!r} {why}: not an archive to read")
        if kind == "dir":
            continue
        if kind is not None:
            raise Problem(f"{name}: the member {shown(member_name)[:120]!r} is {kind}: not an archive to read")
        if size > limits.member_cap:
            raise Problem(f"{name}: the member {shown(member_name)[:120]!r} is {size} bytes, more than "
                                 f"the {size_text(limits.member_cap)} one member can be")
        total += size
        if total > limits.total_cap:
            raise Problem(f"{name} unpacks to more than {size_text(limits.total_cap)}: "
                                 "not an archive to read (a bomb, or the wrong archive)")
        members.append(Member(member_name, size))
    return tuple(members)


def _too_many(name: str, count: int | str, limits: Limits) -> Problem:
    return Problem(f"{name} has {count} members, more than the {limits.max_members} it may have")


def zip_entry_count(handle, size: int) -> int | None:
    """The member count a zip's end record declares (its zip64 record's where it has one), or None."""
    tail_length = min(size, 22 + 65535)
    handle.seek(size - tail_length)
    tail = handle.read(tail_length)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        return None
    count = struct.unpack("<H", tail[at + 10:at + 12])[0]
    locator = tail[at - 20:at] if at >= 20 else b""
    if count == 0xFFFF and locator.startswith(_ZIP64_LOCATOR):
        record_at = struct.unpack("<Q", locator[8:16])[0]
        if record_at + 40 > size:
            return None
        handle.seek(record_at)
        record = handle.read(40)
        if record[:4] != b"PK\x06\x06":
            return None
        count = struct.unpack("<Q", record[32:40])[0]
    return count


def _zip_kind(info: zipfile.ZipInfo) -> str | None:
    if info.is_dir():
        return "dir"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if info.create_system == 3 and kind not in (0, stat.S_IFREG):  # made on Unix: the mode's type bits
        return "a symlink" if kind == stat.S_IFLNK else "not a regular file"
    return None


@contextlib.contextmanager
def open_zip(path: str, name: str, limits: Limits) -> Iterator[Archive]:
    """The zip at `path` (called `name` in messages), its listing judged; Problem."""
    with opened(path, name) as (fd, size), os.fdopen(os.dup(fd), "rb") as handle:
        count = zip_entry_count(handle, size)
        if count is None:
            raise Problem(f"{name} is not a zip archive (no end-of-archive record)")
        if count > limits.max_members:
            raise _too_many(name, count, limits)
        handle.seek(0)
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as error:
            raise Problem(f"{name} is not a readable zip archive ({shown(str(error))[:120]})") from None
        with archive:
            infos = archive.infolist()
            if len(infos) > limits.max_members:
                raise _too_many(name, len(infos), limits)
            by_name = {info.filename: info for info in infos}
            if len(by_name) != len(infos):
                raise Problem(f"{name} lists a member name twice: not an archive to read")
            members = _judge(name, [(i.filename, i.file_size, _zip_kind(i)) for i in infos], limits)

            yield Archive(name, members, lambda member: archive.open(by_name[member.name]))


def _tar_kind(info: tarfile.TarInfo) -> str | None:
    if info.isdir():
        return "dir"
    if info.isreg():
        return None
    return "a symlink" if info.issym() else "a hard link" if info.islnk() else "not a regular file"


@contextlib.contextmanager
def open_tar(path: str, name: str, limits: Limits) -> Iterator[Archive]:
    """The tar (plain, gzip, bzip2 or xz) at `path`, its listing judged; Problem."""
    with opened(path, name) as (fd, _size), os.fdopen(os.dup(fd), "rb") as handle:
        head = handle.read(TAR_BLOCK)
        handle.seek(0)
        if not (head.startswith(COMPRESSED_MAGIC) or head[257:262] == b"ustar"):
            # tarfile reads a file of zeros to its end before it finds no member (an 8 GiB one: minutes)
            raise Problem(f"{name} is not a tar archive (no ustar header, no gzip, bzip2 or xz magic)")
        try:
            archive = tarfile.open(fileobj=handle, mode="r:*")
        except (tarfile.TarError, EOFError, OSError) as error:
            raise Problem(f"{name} is not a readable tar archive ({shown(str(error))[:120]})") from None
        with archive:
            by_name: dict[str, tarfile.TarInfo] = {}

            def headers():
                """Each header as it is read: judged before tarfile skips its member's data (a
                compressed tar declaring a TiB member is refused there, not decompressed)."""
                try:
                    while (info := archive.next()) is not None:
                        if len(by_name) >= limits.max_members:
                            raise _too_many(name, f"over {limits.max_members}", limits)
                        if info.name in by_name:
                            raise Problem(f"{name} lists a member name twice: not an archive to read")
                        by_name[info.name] = info
                        yield info.name, info.size, _tar_kind(info)
                except (tarfile.TarError, EOFError, OSError) as error:
                    raise Problem(f"{name} is not a readable tar archive ({shown(str(error))[:120]})") from None

            members = _judge(name, headers(), limits)

            def stream(member: Member):
                found = archive.extractfile(by_name[member.name])
                return found if found is not None else io.BytesIO()

            yield Archive(name, members, stream)


def is_zip(path: str, name: str) -> bool:
    """Whether the regular file at `path` starts as a zip does (Problem for what is no regular file)."""
    with opened(path, name) as (fd, size):
        return size >= 22 and os.pread(fd, 4, 0) in (b"PK\x03\x04", _EOCD)
