"""`fetch --from DIR|TARBALL`: a model fetched elsewhere, imported with no network. The copy must carry
the manifest its fetch wrote (vllm-turing-fetch.json): it records the Hub's own sizes and hashes at the
pinned commit, so every file is verified against the Hub's metadata as a download is, never against
the copy itself (a copy altered with its manifest left alone is refused)."""
from __future__ import annotations

import os
import posixpath
import shutil
import tarfile

from door import files
from . import manifest
from .listing import HubFile

CHUNK = 8 * 2**20


class SourceProblem(Exception):
    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


class Folder:
    def __init__(self, path: str):
        self.path = path

    def manifest(self) -> manifest.Manifest:
        found = manifest.read(self.path)
        if found is None:
            raise SourceProblem(f"--from {self.path} has no {manifest.NAME} to verify its files against",
                                "copy the whole folder a `fetch` wrote (its manifest with it), or fetch it here")
        return found

    def copy(self, file: HubFile, handle) -> None:
        """Through door.files: a regular file only, opened without blocking (a FIFO there is refused)."""
        path = os.path.join(self.path, file.path)
        if not os.path.lexists(path):
            raise SourceProblem(f"--from {self.path} lacks {file.path}, which its manifest lists",
                                "copy the whole folder a `fetch` wrote")
        try:
            with files.opened(path, f"--from {self.path}: {file.path}") as (fd, _):
                while chunk := os.read(fd, CHUNK):
                    handle.write(chunk)
        except files.FileProblem as problem:
            raise SourceProblem(str(problem), "copy the whole folder a `fetch` wrote, its files as regular files") \
                from None


class Tarball:
    """A tar (plain or compressed) of a fetched folder, at its top or under one folder."""

    def __init__(self, path: str):
        self.path = path
        try:
            with tarfile.open(path) as archive:
                self.members = {member.name: member for member in archive.getmembers() if member.isfile()}
        except (tarfile.TarError, EOFError) as error:
            raise SourceProblem(f"--from {path} is not a readable tarball ({error})",
                                "give the folder, or a tar of it (tar czf model.tgz -C models NAME)") from None
        names = [name for name in self.members if posixpath.basename(name) == manifest.NAME]
        if len(names) != 1:
            raise SourceProblem(f"--from {path} holds {len(names)} {manifest.NAME} files, not one",
                                "tar one folder a `fetch` wrote, its manifest with it")
        self.prefix = posixpath.dirname(names[0])

    def _member(self, path: str) -> tarfile.TarInfo:
        member = self.members.get(posixpath.join(self.prefix, path) if self.prefix else path)
        if member is None:
            raise SourceProblem(f"--from {self.path} lacks {path}, which its manifest lists",
                                "tar the whole folder a `fetch` wrote")
        return member

    def _read(self, path: str, handle) -> None:
        with tarfile.open(self.path) as archive:
            extracted = archive.extractfile(self._member(path))
            shutil.copyfileobj(extracted, handle, CHUNK)

    def manifest(self) -> manifest.Manifest:
        member = self._member(manifest.NAME)
        if member.size > manifest.MANIFEST_CAP:
            raise SourceProblem(f"--from {self.path}: its {manifest.NAME} is {member.size} bytes, not a manifest",
                                "tar the folder a `fetch` wrote")
        with tarfile.open(self.path) as archive:
            data = archive.extractfile(member).read()
        return manifest.parse_bytes(data, f"{self.path}:{member.name}")

    def copy(self, file: HubFile, handle) -> None:
        self._read(file.path, handle)


def source(path: str) -> Folder | Tarball:
    if os.path.isdir(path):
        return Folder(path)
    if os.path.isfile(path):
        return Tarball(path)
    raise SourceProblem(f"--from {path} is neither a folder nor a file", "give the folder or tarball of a fetch")
