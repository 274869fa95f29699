"""door.paths: a remote name is a path under its root or a one-line refusal, whatever its text or the
symlinks already there. door.replace: the old copy stays byte-identical through a failed verification,
a signal in the middle of the swap, and a kill between its two renames."""
import errno
import hashlib
import os
import pathlib
import signal
import subprocess
import sys

import pytest
from hypothesis import example, given, strategies as st

from door import paths, replace
from door.problem import Problem
from tests import REPO



def state(root: pathlib.Path) -> dict:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


@given(st.text(max_size=40))
@example("../escape.json")
@example("/models/abs.json")
@example("a/../../b")
@example("a\\..\\b")
@example("ok/\x00.json")
@example(".")
def test_any_remote_name_is_under_its_root_or_refused_in_one_line(tmp_path_factory, name):
    root = tmp_path_factory.mktemp("root")
    try:
        path = paths.contained(root, name, "the listing")
    except Problem as problem:
        assert "\n" not in str(problem) and str(problem).startswith("the listing names ")
        return
    real = os.path.realpath(path)
    assert os.path.commonpath([os.path.realpath(root), real]) == os.path.realpath(root) and real != os.path.realpath(root)


def test_a_name_through_a_symlink_out_of_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "sub").symlink_to(outside)
    with pytest.raises(Problem, match="by a symlink"):
        paths.contained(root, "sub/config.json", "the listing")
    assert paths.contained(root, "other/config.json", "the listing") == root / "other" / "config.json"


def folder_with(root: pathlib.Path, files: dict) -> pathlib.Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


def test_a_staged_copy_refused_by_its_verification_leaves_the_old_one(tmp_path):
    target = folder_with(tmp_path / "model", {"config.json": b"old", "w.safetensors": b"good"})
    before = state(target)
    staged = replace.Staged(target)
    staged.carry(["config.json", "w.safetensors"], skip=lambda name: False)
    (staged.path / "config.json").unlink()  # as the fetch replaces a file: a new one at its name
    (staged.path / "config.json").write_bytes(b"new")

    def refuse(stage):
        raise ValueError("wrong bytes")
    with pytest.raises(ValueError):
        staged.swap(verify=refuse)
    assert state(target) == before
    staged.swap()
    assert state(target) == {**before, "config.json": hashlib.sha256(b"new").hexdigest()}
    assert not staged.path.exists() and not staged.previous.exists()


def test_a_file_replaced_only_once_verified(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_bytes(b"old")

    def refuse(staged):
        raise ValueError("not a manifest")
    with pytest.raises(ValueError):
        replace.replace_file(path, b"new", refuse)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["manifest.json"]
    replace.replace_file(path, b"new")
    assert path.read_bytes() == b"new"


SIGNALLED_SWAP = """
import os, signal, sys, pathlib
from door import replace
from entrypoint.stop_signals import end_on_stop_signals
end_on_stop_signals()  # the image's fetch: SIGTERM ends the process at once (os._exit)
target = pathlib.Path(sys.argv[1])
staged = replace.Staged(target)
(staged.path / "config.json").write_bytes(b"new")
rename = os.rename
def rename_then_signalled(source, destination):
    rename(source, destination)
    os.kill(os.getpid(), signal.SIGTERM)  # between the two renames of the swap
os.rename = rename_then_signalled
staged.swap()
print("the swap returned")
"""


def test_sigterm_between_the_two_renames_is_held_until_the_swap_is_whole(tmp_path):
    target = folder_with(tmp_path / "model", {"config.json": b"old"})
    done = subprocess.run([sys.executable, "-c", SIGNALLED_SWAP, str(target)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "the swap returned" not in done.stdout  # the signal ended it, once the swap was whole
    assert (target / "config.json").read_bytes() == b"new"
    replace.Staged(target)  # the next run: the old copy's removal finished
    assert not (tmp_path / ".model.previous").exists()


def test_a_kill_between_the_two_renames_is_undone_by_the_next_run(tmp_path):
    target = folder_with(tmp_path / "model", {"config.json": b"old", "w.safetensors": b"good"})
    before = state(target)
    os.rename(target, tmp_path / ".model.previous")  # what a SIGKILL after the first rename leaves
    replace.Staged(target)
    assert state(target) == before


def test_a_target_that_cannot_be_renamed_has_its_files_replaced_one_by_one(tmp_path, monkeypatch):
    """A mount point (EBUSY on rename): each verified staged file renamed over its name in it."""
    target = folder_with(tmp_path / "model", {"config.json": b"old", "keep.txt": b"mine"})
    staged = replace.Staged(target)
    (staged.path / "config.json").write_bytes(b"new")
    rename = os.rename

    def busy(source, destination):
        if pathlib.Path(source) == target:
            raise OSError(errno.EBUSY, "Device or resource busy")
        rename(source, destination)
    monkeypatch.setattr(os, "rename", busy)
    staged.swap()
    assert state(target) == {"config.json": hashlib.sha256(b"new").hexdigest(),
                             "keep.txt": hashlib.sha256(b"mine").hexdigest()}
    assert not staged.path.exists()
