"""Bytes read per decode token, from a checkpoint's safetensors headers only.

A decode step streams every weight the language model touches once per token.
That is the decoder layers (and the other per-token weights of the language
model: final norm, per-layer input projection) plus the output layer. With tied
embeddings the output layer is the embedding matrix, counted once; the
embedding *lookup* reads one row and is not counted. Per-layer embedding tables
(Gemma's ``embed_tokens_per_layer``) are lookups too, and vision/audio towers sit
idle during text decode: both are excluded by name pattern.

Only the 8-byte length and the JSON header of each file are read, never the
weights. Standard library only.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
import pathlib
import struct
from door import files
from door.problem import Problem, UsageError

# Bytes per element as safetensors names the dtypes.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}

DEFAULT_EXCLUDES = (
    "*embed_tokens_per_layer*",   # per-layer embedding lookups (one row per token)
    "*vision_tower*", "*embed_vision*", "*vision_model*", "*multi_modal_projector*",
    "*audio_tower*", "*embed_audio*",
    "*.weight_shape",             # compressed-tensors shape metadata, not read by kernels
)
OUTPUT_PATTERNS = ("*lm_head*",)
EMBEDDING_PATTERNS = ("*embed_tokens*",)
DECODER_LAYER_PATTERNS = ("*.layers.*",)

# Categories a tensor falls into; the first three are read per decode token.
DECODER_LAYERS = "decoder layers"
OTHER_PER_TOKEN = "other per-token weights"
OUTPUT_LAYER = "output layer"
EMBEDDING_LOOKUP = "embedding lookup (not counted)"
EXCLUDED = "excluded by pattern"
COUNTED = (DECODER_LAYERS, OTHER_PER_TOKEN, OUTPUT_LAYER)

MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclasses.dataclass
class CeilingReport:
    files: list[str]
    bytes_by_category: dict[str, int]
    tensors_by_category: dict[str, int]
    bytes_by_dtype: dict[str, int]
    tied_embedding: bool
    excludes: list[str]

    @property
    def bytes_per_token(self) -> int:
        return sum(self.bytes_by_category.get(c, 0) for c in COUNTED)

    def ceiling_tok_s(self, bandwidth_gb_s: float) -> float:
        return bandwidth_gb_s * 1e9 / self.bytes_per_token

    def to_dict(self, bandwidth_gb_s: float | None = None) -> dict:
        out = {
            "files": self.files,
            "bytes_per_token": self.bytes_per_token,
            "bytes_by_category": self.bytes_by_category,
            "tensors_by_category": self.tensors_by_category,
            "bytes_by_dtype": self.bytes_by_dtype,
            "tied_embedding": self.tied_embedding,
            "excludes": self.excludes,
        }
        if bandwidth_gb_s is not None:
            out["bandwidth_gb_s"] = bandwidth_gb_s
            out["ceiling_tok_s"] = self.ceiling_tok_s(bandwidth_gb_s)
        return out


def read_header(path: pathlib.Path) -> tuple[dict, int]:
    """The JSON header of one safetensors file and the size of its data region.

    Reads 8 + header-length bytes; the data region's size comes from the file size."""
    try:  # a regular file only (a FIFO would block), the header capped, strict UTF-8 JSON
        with files.opened(str(path), str(path)) as (fd, size):
            head = files.read_at(fd, 0, 8, str(path))
            if len(head) != 8:
                raise UsageError(f"{path}: {size} bytes, expected a safetensors file (8-byte header length first)")
            (length,) = struct.unpack("<Q", head)
            if length > min(MAX_HEADER_BYTES, size - 8):
                raise UsageError(f"{path}: header length {length} does not fit a {size}-byte file; "
                                      "expected a safetensors file")
            raw = files.read_at(fd, 8, length, str(path))
        header = files.parse_json(raw, f"{path}'s header", unique_keys=False)
    except Problem as problem:
        raise UsageError(f"{problem}; expected a safetensors file") from None
    if not isinstance(header, dict):
        raise UsageError(f"{path}: header is a {type(header).__name__}, expected a JSON object")
    return header, size - 8 - length


def tensors_of(header: dict, data_size: int, path: pathlib.Path) -> list[TensorInfo]:
    """Tensor entries of a header; each size (dtype x shape) is checked against its
    data_offsets, and the offsets against the data region (a truncated download is refused)."""
    tensors = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"{path}: tensor {name!r} lacks dtype/shape/data_offsets; expected a safetensors header") from None
        if dtype not in DTYPE_BYTES:
            raise UsageError(f"{path}: tensor {name!r} has dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
        nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
        if nbytes != end - start:
            raise UsageError(f"{path}: tensor {name!r} {dtype}{list(shape)} is {nbytes} bytes but its data_offsets span {end - start}")
        if end > data_size:
            raise UsageError(f"{path}: tensor {name!r} ends at byte {end} of a {data_size}-byte data region; "
                                  "the file is truncated, download it again")
        tensors.append(TensorInfo(name, dtype, shape, nbytes))
    return tensors


def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def categorize(name: str, excludes, tied: bool) -> str:
    """Which category a tensor falls into. `tied`: no separate output layer exists."""
    if _matches(name, excludes):
        return EXCLUDED
    if _matches(name, OUTPUT_PATTERNS):
        return OUTPUT_LAYER
    if _matches(name, EMBEDDING_PATTERNS):
        return OUTPUT_LAYER if tied else EMBEDDING_LOOKUP
    if _matches(name, DECODER_LAYER_PATTERNS):
        return DECODER_LAYERS
    return OTHER_PER_TOKEN


def analyze(tensors: list[TensorInfo], excludes=DEFAULT_EXCLUDES, files=()) -> CeilingReport:
    """Pure: the per-token byte budget of a list of tensors."""
    excludes = list(excludes)
    kept = [t for t in tensors if not _matches(t.name, excludes)]
    tied = not any(_matches(t.name, OUTPUT_PATTERNS) for t in kept)
    by_cat: dict[str, int] = {}
    count: dict[str, int] = {}
    by_dtype: dict[str, int] = {}
    for t in tensors:
        cat = categorize(t.name, excludes, tied)
        by_cat[cat] = by_cat.get(cat, 0) + t.nbytes
        count[cat] = count.get(cat, 0) + 1
        if cat in COUNTED:
            by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
    return CeilingReport(list(files), by_cat, count, by_dtype, tied, excludes)


def checkpoint_files(path: pathlib.Path) -> list[pathlib.Path]:
    """The safetensors files of a checkpoint: one file, or every *.safetensors in a folder."""
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise UsageError(f"{path}: folder holds no *.safetensors file; expected a checkpoint folder")
        return files
    if path.is_file():
        return [path]
    raise UsageError(f"{path}: no such file or folder; expected a safetensors file or checkpoint folder")


def analyze_checkpoint(path: pathlib.Path, excludes=DEFAULT_EXCLUDES) -> CeilingReport:
    files = checkpoint_files(pathlib.Path(path))
    tensors = [t for f in files for t in tensors_of(*read_header(f), f)]
    return analyze(tensors, excludes, files=[str(f) for f in files])
