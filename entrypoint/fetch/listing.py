"""The repository's files at one commit, as the Hub's metadata gives them, and which of them are the
small files the judgment reads first and which are the weights vLLM loads (pure)."""
from __future__ import annotations

import dataclasses
import posixpath

from ..checks.model import NOT_WEIGHTS

# Weight formats vLLM or other frameworks keep in a model repository: never part of the small files.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".onnx_data",
                   ".ot", ".tflite", ".npz", ".pkl")
SMALL_FILE_CAP = 64 * 2**20  # a tokenizer or a weight index is far below this; larger is data


@dataclasses.dataclass(frozen=True)
class HubFile:
    """One file at the pinned commit: its size, the SHA-256 of its content when the Hub stores it in
    LFS, and the git blob id (SHA-1 of "blob <size>\\0" + content) otherwise."""
    path: str
    size: int
    sha256: str | None
    blob_id: str

    @property
    def is_weight_format(self) -> bool:
        return is_weight_path(self.path)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def is_weight_path(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES) or posixpath.basename(path) in NOT_WEIGHTS


def small_files(listing: list[HubFile]) -> list[HubFile]:
    """What the judgment and the server read besides the weights: configs, tokenizer, index, templates."""
    return [file for file in listing if not file.is_weight_format and file.size <= SMALL_FILE_CAP
            and not posixpath.basename(file.path).startswith(".")]


def chosen_weights(listing: list[HubFile], loaded_names: list[str]) -> list[HubFile]:
    """The weight files of `loaded_names` (the model check's weight_files over the repository's names)."""
    wanted = set(loaded_names)
    return [file for file in listing if file.path in wanted]


def strays(local_names: list[str], listing: list[HubFile]) -> list[str]:
    """Weight files in the folder that the pinned commit does not have (another commit's, a user's):
    vLLM would load them beside the fetched ones where no index filters them."""
    listed = {file.path for file in listing}
    return sorted(name for name in local_names if name not in listed and is_weight_path(name))
