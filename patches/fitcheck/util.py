"""Small helpers the fit check's modules share, below every one of them (no imports from the package)."""
from __future__ import annotations

import contextlib


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
