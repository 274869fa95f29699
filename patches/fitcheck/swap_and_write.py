"""Small helpers the fit check's modules share, below every one of them (no imports from the package)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def swapped(owner, name: str, value):
    """`owner.name` is `value` for the duration, then what it was (vLLM's module-level choices that a
    CPU host answers otherwise than the simulated device)."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def write_atomically(path: Path, text: str) -> None:
    """Atomic replace, so a reader never sees half a file; readable by every uid (mkstemp makes 0600, and
    the image runs its server as root or as any uid). Nothing is left behind on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
