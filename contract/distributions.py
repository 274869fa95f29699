"""Installed distributions read from their dist-info folder names (the wheel format's
`{name}-{version}.dist-info`, which pip writes for every install), standard library only and without
importlib.metadata, whose import and METADATA reads cost the preflight about 0.1 s each."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SUFFIX = ".dist-info"


def normalized(name: str) -> str:
    """The name as the package index compares names (lowercase, runs of -_. as one -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def in_folder(site: Path) -> list[tuple[str, str]]:
    """(normalized name, version) of each distribution installed in the folder `site`."""
    try:
        names = [entry[:-len(SUFFIX)] for entry in os.listdir(site) if entry.endswith(SUFFIX)]
    except OSError:
        return []
    return [(normalized(name), version) for name, _, version in (n.rpartition("-") for n in names) if name]


def version_in(site: Path, name: str) -> str | None:
    """`name`'s version in the folder `site`, None unless exactly one is installed there."""
    found = [version for dist, version in in_folder(site) if dist == normalized(name)]
    return found[0] if len(found) == 1 else None


def installed(path: list[str] | None = None) -> list[tuple[str, str]]:
    """(normalized name, version) of every distribution on sys.path, the first of each name winning
    (the import system's order)."""
    seen: dict[str, str] = {}
    for entry in sys.path if path is None else path:
        for name, version in in_folder(Path(entry or ".")):
            seen.setdefault(name, version)
    return sorted(seen.items())


def installed_version(name: str, path: list[str] | None = None) -> str | None:
    return dict(installed(path)).get(normalized(name))


def installed_versions(names: tuple[str, ...], path: list[str] | None = None) -> dict[str, str | None]:
    """{name: version or None} for several names, the path read once."""
    found = dict(installed(path))
    return {name: found.get(normalized(name)) for name in names}
