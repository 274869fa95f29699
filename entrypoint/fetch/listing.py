"""The repository's files at one commit, as the Hub's metadata gives them, and which of them are the
small files the judgment reads first and which are the weights vLLM loads (pure)."""
from __future__ import annotations

import dataclasses
import posixpath

from door import paths
from door.files import shown
from door.problem import Problem

# Weight formats vLLM or other frameworks keep in a model repository: never part of the small files.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".onnx_data",
                   ".ot", ".tflite", ".npz", ".pkl")
# vLLM's filter_files_not_needed_for_inference (model_loader/weight_utils.py)
NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")
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


HEX = frozenset("0123456789abcdef")


def _hex(value: object, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and set(value) <= HEX


def parse_listing(entries: object, what: str) -> list[HubFile]:
    """The files of a Hub tree listing (its JSON entries: {type, path, size, oid, lfs}), typed and sorted
    (pure); Problem naming the first entry that is not one, a path that could leave the folder,
    or a path listed twice."""
    if not isinstance(entries, list):
        raise Problem(f"{what} is not a list of files")
    found: dict[str, HubFile] = {}
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or entry.get("type") not in ("file", "directory"):
            raise Problem(f"{what}: entry {number} is not a file or folder of the Hub's tree")
        path = entry.get("path")
        wrong = paths.problem(path)
        if wrong is not None:
            raise Problem(f"{what} names {shown(str(path))[:200]!r}, which {wrong}: refused, nothing is "
                                 "written outside the model folder")
        if entry["type"] == "directory":
            continue
        size, oid, lfs = entry.get("size"), entry.get("oid"), entry.get("lfs")
        if type(size) is not int or size < 0 or not _hex(oid, 40):
            raise Problem(f"{what}: {shown(path)[:200]!r} has no size and git blob id")
        if lfs is not None and not (isinstance(lfs, dict) and _hex(lfs.get("oid"), 64) and lfs.get("size") == size):
            raise Problem(f"{what}: {shown(path)[:200]!r} has an LFS entry without its SHA-256 and size")
        if path in found:
            raise Problem(f"{what} lists {shown(path)[:200]!r} twice")
        found[path] = HubFile(path, size, lfs["oid"] if lfs else None, oid)
    return sorted(found.values(), key=lambda file: file.path)


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
