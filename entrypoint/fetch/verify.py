"""A downloaded file against the Hub's metadata: its size, then its SHA-256 (LFS) or git blob id."""
from __future__ import annotations

import hashlib
import os
import time

from door.problem import Problem
from .listing import HubFile

CHUNK = 8 * 2**20


def file_problem(path: str, expected: HubFile, check_hash: bool = True, deadline: float | None = None) -> str | None:
    """Why the file at `path` is not the Hub's `expected` one; None when it is. With a `deadline`
    (time.monotonic()), Problem when hashing passes it."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return f"{expected.path} is missing"
    if size != expected.size:
        return f"{expected.path} is {size} bytes, the Hub's is {expected.size}"
    if not check_hash:
        return None
    digest = hashlib.sha256() if expected.sha256 else hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            if deadline is not None and time.monotonic() > deadline:
                raise Problem(expected.path)
    wanted = expected.sha256 or expected.blob_id
    if digest.hexdigest() != wanted:
        kind = "SHA-256" if expected.sha256 else "git blob id"
        return f"{expected.path}: {kind} {digest.hexdigest()} differs from the Hub's {wanted}"
    return None
