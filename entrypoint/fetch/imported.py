"""`fetch --from DIR|TARBALL`: a model fetched elsewhere, imported with no network. The copy must carry
the manifest its fetch wrote (vllm-turing-fetch.json): it records the Hub's own sizes and hashes at the
pinned commit, so every file is verified against the Hub's metadata as a download is, never against
the copy itself (a copy altered with its manifest left alone is refused)."""
from __future__ import annotations

import contextlib
import os
import posixpath

from door import archives, files
from door.problem import Problem, UsageError
from . import manifest
from .listing import HubFile

CHUNK = 8 * 2**20
# A model's tar: shards of tens of GiB, a few hundred GiB in all, a few thousand files at most.
LIMITS = archives.Limits(member_cap=2**40, max_members=100_000, total_cap=2**42)


class Folder:
    def __init__(self, path: str):
        self.path = path

    def manifest(self) -> manifest.Manifest:
        found = manifest.read(self.path)
        if found is None:
            raise UsageError(f"--from {self.path} has no {manifest.NAME} to verify its files against",
                             "copy the whole folder a `fetch` wrote (its manifest with it), or fetch it here")
        return found

    def copy(self, file: HubFile, handle) -> None:
        """Through door.files: a regular file only, opened without blocking (a FIFO there is refused)."""
        path = os.path.join(self.path, file.path)
        if not os.path.lexists(path):
            raise UsageError(f"--from {self.path} lacks {file.path}, which its manifest lists",
                             "copy the whole folder a `fetch` wrote")
        try:
            with files.opened(path, f"--from {self.path}: {file.path}") as (fd, _):
                while chunk := os.read(fd, CHUNK):
                    handle.write(chunk)
        except Problem as problem:
            raise UsageError(str(problem), "copy the whole folder a `fetch` wrote, its files as regular files") \
                from None


class Tarball:
    """A tar (plain or compressed) of a fetched folder, at its top or under one folder, read through
    door.archives: members judged from the listing (contained names, no links, sizes within LIMITS)."""

    def __init__(self, path: str):
        self.path = path
        self.name = f"--from {path}"
        with self._opened() as archive:
            self.members = {member.name: member for member in archive.members}
        names = [name for name in self.members if posixpath.basename(name) == manifest.NAME]
        if len(names) != 1:
            raise UsageError(f"--from {path} holds {len(names)} {manifest.NAME} files, not one",
                             "tar one folder a `fetch` wrote, its manifest with it")
        self.prefix = posixpath.dirname(names[0])

    @contextlib.contextmanager
    def _opened(self):
        try:
            with archives.open_tar(self.path, self.name, LIMITS) as archive:
                yield archive
        except Problem as problem:
            raise UsageError(str(problem), "give the folder, or a tar of it (tar czf model.tgz -C models NAME)") \
                from None

    def _member(self, path: str) -> archives.Member:
        member = self.members.get(posixpath.join(self.prefix, path) if self.prefix else path)
        if member is None:
            raise UsageError(f"--from {self.path} lacks {path}, which its manifest lists",
                             "tar the whole folder a `fetch` wrote")
        return member

    def manifest(self) -> manifest.Manifest:
        member = self._member(manifest.NAME)
        if member.size > manifest.MANIFEST_CAP:
            raise UsageError(f"--from {self.path}: its {manifest.NAME} is {member.size} bytes, not a manifest",
                             "tar the folder a `fetch` wrote")
        with self._opened() as archive:
            data = archive.read(member)
        return manifest.parse_bytes(data, f"{self.path}:{member.name}")

    def copy(self, file: HubFile, handle) -> None:
        member = self._member(file.path)
        with self._opened() as archive:
            archive.copy(member, handle)


def source(path: str) -> Folder | Tarball:
    if os.path.isdir(path):
        return Folder(path)
    if os.path.isfile(path):
        return Tarball(path)
    raise UsageError(f"--from {path} is neither a folder nor a file", "give the folder or tarball of a fetch")
