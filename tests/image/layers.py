"""Searching an image's layers for byte strings, layer by layer.

With `base`, only the layers the image adds to it are searched: a build on that base cannot have
changed the base's layers. On an overlay2 engine whose storage this process can read (the CI host),
those layers are read where the engine keeps them (`GraphDriver` of `docker image inspect`: one
folder per layer); elsewhere, from `docker save`, which exports every layer (minutes for 10 GB).
"""
import os
import tarfile
from pathlib import Path

import docker

CHUNK = 1 << 20
# The engine tars a 10 GB image before the first byte arrives: the SDK's 60 s is too short.
EXPORT_TIMEOUT_S = 1800


def find_in_image(image_id: str, needles: list[bytes], base: str | None = None) -> list[str]:
    """Paths ("layer:file") of every file in the image's layers (those `base` lacks, with `base`)
    that contains a needle."""
    api = docker.from_env(timeout=EXPORT_TIMEOUT_S).api
    folders = layer_folders(api, image_id)
    if folders is not None and base is not None:
        lacking = layer_folders(api, base)
        if lacking is not None:
            return [hit for folder in folders if folder not in lacking for hit in _find_in_folder(folder, needles)]
    return _find_in_export(api, image_id, needles)


def layer_folders(api, ref: str) -> list[str] | None:
    """The folders holding the image's layers, top first, or None where the engine is not overlay2
    or they cannot be read from here."""
    driver = api.inspect_image(ref).get("GraphDriver") or {}
    data = driver.get("Data") or {}
    folders = [data["UpperDir"]] if data.get("UpperDir") else []
    folders += [f for f in (data.get("LowerDir") or "").split(":") if f]
    if driver.get("Name") != "overlay2" or not folders or not all(os.access(f, os.R_OK | os.X_OK) for f in folders):
        return None
    return folders


def _find_in_folder(folder: str, needles: list[bytes]) -> list[str]:
    hits = []
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            if path.is_file() and not path.is_symlink():  # whiteouts are device files, links point elsewhere
                with path.open("rb") as handle:
                    if _contains(handle, needles):
                        hits.append(f"{folder}:{path.relative_to(folder)}")
    return hits


def _find_in_export(api, image_id: str, needles: list[bytes]) -> list[str]:
    stream = _ChunkReader(api.get_image(image_id))
    hits = []
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not member.isfile():
                continue
            handle = outer.extractfile(member)
            if member.name.endswith("layer.tar"):
                with tarfile.open(fileobj=handle, mode="r|") as layer:
                    for entry in layer:
                        if entry.isfile() and _contains(layer.extractfile(entry), needles):
                            hits.append(f"{member.name}:{entry.name}")
            elif _contains(handle, needles):
                hits.append(member.name)
    return hits


def _contains(handle, needles: list[bytes]) -> bool:
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    while True:
        chunk = handle.read(CHUNK)
        if not chunk:
            return False
        window = tail + chunk
        if any(n in window for n in needles):
            return True
        tail = window[-overlap:] if overlap else b""


class _ChunkReader:
    """A file-like view over the SDK's iterator of byte chunks."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._buffer = b""

    def read(self, size=-1):
        while size < 0 or len(self._buffer) < size:
            try:
                self._buffer += next(self._chunks)
            except StopIteration:
                break
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data
