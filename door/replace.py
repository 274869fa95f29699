"""Atomic replace: the new copy is staged beside the old one, verified, then renamed into place. The
old copy stays byte-identical through any failure or signal, and nothing is deleted before its
replacement is verified.

A file: `replace_file(path, data, verify)` writes `data` beside `path`, syncs it, has `verify` look
at the staged copy, then renames it over `path` in one step.

A folder: `Staged(target)` is a stage folder beside `target` (`.NAME.staged`), kept between runs
(an interrupted run's work is resumed from it); `carry()` hard-links the target's files into it
(the same inodes: nothing is copied, and nothing written to the stage ever writes into them, since
every write renames a new file over its name); `swap()` puts the verified stage in the target's place
with two renames, during which SIGTERM, SIGINT and SIGHUP are held and then delivered, and which a
failure or a kill between them is undone from (`recover()`, run first by every Staged)."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Callable, Iterator

HELD_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM, SIGINT and SIGHUP recorded, not acted on, inside the block; then re-delivered to this
    process under the handlers that were there before. Outside the main thread (where Python runs
    signal handlers) it holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    for signum in HELD_SIGNALS:
        previous[signum] = signal.signal(signum, lambda number, frame: arrived.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(arrived):
            os.kill(os.getpid(), signum)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_file(path: Path, data: bytes, verify: Callable[[Path], None] | None = None) -> Path:
    """`data` at `path`, atomically: a reader sees the old file or the new one. `verify(staged)` raises
    to refuse the staged copy (removed then, the old file untouched)."""
    path = Path(path)
    staged = path.with_name(f".{path.name}.staged")
    try:
        with open(staged, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if verify is not None:
            verify(staged)
        with signals_held():
            os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(staged)
        raise
    _sync_folder(path.parent)
    return path


def replace_files(items: list[tuple[Path, bytes]]) -> list[Path]:
    """Several files replaced as one step: each one staged beside its target and synced first, then all
    renamed into place with the signals held. A failure while staging (a full disk, a target that is a
    folder) removes every staged copy and leaves every old file byte-identical. OSError names the file."""
    for path, _ in items:
        if os.path.lexists(path) and not os.path.isfile(path):
            raise IsADirectoryError(errno.EISDIR, "not a regular file, so not replaced", str(path))
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in items:
            stage = Path(path).with_name(f".{Path(path).name}.staged")
            staged.append((stage, Path(path)))
            with open(stage, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        for stage, _ in staged:
            with contextlib.suppress(OSError):
                os.remove(stage)
        raise
    with signals_held():
        for stage, path in staged:
            os.replace(stage, path)
    for folder in dict.fromkeys(path.parent for _, path in staged):
        _sync_folder(folder)
    return [path for _, path in staged]


def link_or_copy(source: Path, destination: Path) -> None:
    """`source` at `destination` as a hard link (the same bytes, nothing copied), or a copy where the
    filesystem cannot link."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, destination)
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        shutil.copy2(source, destination)


class Staged:
    """A stage folder beside `target`, whose verified content `swap()` puts in its place."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.path = self.target.with_name(f".{self.target.name}.staged")
        self.previous = self.target.with_name(f".{self.target.name}.previous")
        self.recover()
        self.path.mkdir(parents=True, exist_ok=True)

    def recover(self) -> None:
        """Undoes a swap a kill stopped half-way: the target moved aside and the stage not yet in its place."""
        if self.previous.exists() and not self.target.exists():
            os.rename(self.previous, self.target)
        elif self.previous.exists():  # the swap was done; only the old copy's removal was not
            shutil.rmtree(self.previous)

    def carry(self, names: list[str], skip: Callable[[str], bool]) -> list[str]:
        """Each of the target's files `names` (relative, as local paths) that the stage lacks, hard-linked
        into it unless `skip(name)`; the names carried."""
        carried = []
        for name in names:
            if skip(name):
                continue
            source, destination = self.target / name, self.path / name
            if os.path.lexists(destination) or not source.is_file() or source.is_symlink():
                continue
            link_or_copy(source, destination)
            carried.append(name)
        return carried

    def swap(self, verify: Callable[[Path], None] | None = None) -> Path:
        """The stage in the target's place (its old copy removed only once the new one is there);
        `verify(stage)` raises to refuse it first (the target untouched)."""
        if verify is not None:
            verify(self.path)
        with signals_held():
            moved_aside = False
            try:
                if self.target.exists():
                    os.rename(self.target, self.previous)
                    moved_aside = True
                os.rename(self.path, self.target)
            except OSError as error:
                if moved_aside and not self.target.exists():
                    os.rename(self.previous, self.target)
                if error.errno in (errno.EBUSY, errno.EXDEV, errno.EPERM) and not moved_aside:
                    self._move_files_in()  # the target is a mount point: its files replaced one by one
                    return self.target
                raise
            _sync_folder(self.target.parent)
        shutil.rmtree(self.previous, ignore_errors=True)
        return self.target

    def _move_files_in(self) -> None:
        """Where the target cannot be renamed (a mount point), each verified staged file put over its name
        in it: moved (copied first where the stage is on another filesystem) beside it, then renamed over
        it, each one atomic; the stage goes last."""
        for root, _, files in os.walk(self.path):
            for name in files:
                source = Path(root) / name
                destination = self.target / source.relative_to(self.path)
                destination.parent.mkdir(parents=True, exist_ok=True)
                beside = destination.with_name(f".{destination.name}.staged")
                shutil.move(source, beside)
                os.replace(beside, destination)
        shutil.rmtree(self.path, ignore_errors=True)
