"""Local paths from remote names: a name a listing, manifest or archive gives (`config.json`,
`sub/tokenizer.json`) becomes a path under its root, or is refused. Refused: an empty name or part,
`.` and `..` parts, an absolute name, a backslash, a NUL or another unprintable character, a part
longer than a file name can be, and a name whose existing folders lead out of the root by a symlink."""
from __future__ import annotations

import os
from pathlib import Path

from door.files import shown
from door.problem import Problem

NAME_MAX = 255      # bytes of one part (ext4, xfs, btrfs)
PATH_MAX = 4096


def problem(name: object) -> str | None:
    """Why `name` cannot be a relative path under a root (pure: no filesystem), None when it can."""
    if not isinstance(name, str) or not name:
        return "is empty" if name == "" else "is not text"
    if not name.isprintable() or "\0" in name:
        return "holds an unprintable character"
    if "\\" in name:
        return "holds a backslash"
    if name.startswith("/"):
        return "is an absolute path"
    if len(name.encode("utf-8", "surrogatepass")) > PATH_MAX:
        return "is longer than a path can be"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return f"has a {part} part" if part else "has an empty part"
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            return "has a part longer than a file name can be"
    return None


def contained(root: Path, remote_name: str, what: str) -> Path:
    """`remote_name` as a path under `root`; Problem (one line naming `what` and the name) when it
    would lead anywhere else, by its text or by a symlink among the folders that already exist."""
    found = problem(remote_name)
    if found is not None:
        raise Problem(f"{what} names {shown(str(remote_name))[:200]!r}, which {found}: "
                          f"refused, nothing is written outside {shown(str(root))}")
    root = Path(root)
    path = root.joinpath(*remote_name.split("/"))
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise Problem(f"{what} names {shown(remote_name)[:200]!r}, which leads out of {shown(str(root))} by "
                          "a symlink: refused, nothing is written there")
    return path
