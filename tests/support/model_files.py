"""Real model directories for tests: config.json and small safetensors files written with the
standard library (8-byte little-endian header length, JSON header, data), and the layout of a
huggingface_hub cache."""
from __future__ import annotations

import json
import os
import pathlib
import struct

GEMMA4_TEXT_CONFIG = {"model_type": "gemma4_text", "head_dim": 256, "global_head_dim": 512,
                      "num_attention_heads": 8, "num_key_value_heads": 1, "sliding_window": 512}


# bytes per element of the dtypes the tests write
ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "U8": 1, "I32": 4, "I64": 8, "F8_E4M3": 1}


def write_tensors(path: pathlib.Path, tensors: dict[str, tuple[str, list[int]]], truncate_by: int = 0,
                  metadata: dict | None = None) -> pathlib.Path:
    """A real safetensors file of zeroed tensors, name -> (dtype, shape); `truncate_by` bytes short."""
    header, offset = ({"__metadata__": metadata} if metadata else {}), 0
    for name, (dtype, shape) in tensors.items():
        size = ITEM_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset - truncate_by))
    return path


def write_safetensors(path: pathlib.Path, tensors: dict[str, int]) -> int:
    """A valid safetensors file of fp16 tensors named -> element count; returns its size in bytes."""
    write_tensors(path, {name: ("F16", [count]) for name, count in tensors.items()})
    return path.stat().st_size


def write_model_dir(path: pathlib.Path, config: dict | None = None, shards: int = 1,
                    elements: int = 4096) -> int:
    """config.json plus `shards` safetensors files (with an index when sharded); returns weight bytes."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config if config is not None else
                                                 {"architectures": ["Gemma4ForConditionalGeneration"],
                                                  "text_config": GEMMA4_TEXT_CONFIG}))
    names = ["model.safetensors"] if shards == 1 else [f"model-{i:05d}-of-{shards:05d}.safetensors"
                                                        for i in range(1, shards + 1)]
    total = sum(write_safetensors(path / name, {f"layer{i}.weight": elements}) for i, name in enumerate(names))
    if shards > 1:
        weight_map = {f"layer{i}.weight": name for i, name in enumerate(names)}
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return total


def write_hf_cache_model(hub_cache: pathlib.Path, model_id: str, **model_dir) -> pathlib.Path:
    """The model as huggingface_hub stores it: models--org--name/{refs/main, snapshots/<rev>/}."""
    repo = hub_cache / ("models--" + model_id.replace("/", "--"))
    revision = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    write_model_dir(snapshot, **model_dir)
    (repo / "blobs").mkdir(exist_ok=True)
    for number, file in enumerate(sorted(snapshot.iterdir())):  # snapshots hold relative links to blobs,
        blob = repo / "blobs" / f"blob{number:04d}"               # as huggingface_hub makes them (so the
        file.rename(blob)                                         # cache works mounted anywhere)
        file.symlink_to(os.path.relpath(blob, snapshot))
    return snapshot
