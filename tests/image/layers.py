"""Searching an exported image (`docker save`) for byte strings, layer by layer."""
import tarfile

import docker

CHUNK = 1 << 20
# The engine tars a 10 GB image before the first byte arrives: the SDK's 60 s is too short.
EXPORT_TIMEOUT_S = 1800


def find_in_image(image_id: str, needles: list[bytes]) -> list[str]:
    """Paths ("layer/file") of every file in every layer that contains a needle."""
    api = docker.from_env(timeout=EXPORT_TIMEOUT_S).api
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
