"""Model and drafter: weights present (a local directory, or the Hugging Face cache already holding
them), config.json readable and of the types the checks read, every weight file complete (each
safetensors header, each PyTorch checkpoint's end), total bytes known; MAX_MODEL_LEN within the
model's limit; a drafter that is not quantized. Every file is read through door.files
(capped, never blocking, regular files only)."""
from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
import struct
from typing import Mapping

from contract.model_config import ConfigProblem, ModelConfig, max_len_problem, parse_config
from contract.verdict import Result, failed, passed, warned

from door import files
from ..fetch.listing import NOT_WEIGHTS
from door.problem import Problem

MODEL = "model"
DRAFTER = "drafter"
INDEX = "model.safetensors.index.json"
BIN_INDEX = "pytorch_model.bin.index.json"
SAFETENSORS = "safetensors"
# The load formats vLLM 0.33.0's DefaultModelLoader reads from the folder (the list of formats itself
# is the image facts'): each tries these patterns in order, the first that matches any file winning
# (default_loader.py _prepare_weights; *.pt is the PyTorch fallback of the formats not bound to
# safetensors); `auto` is `mistral` when consolidated*.safetensors are there, else `hf`. Any other
# format has a loader of its own (dummy weights, tensorizer, ...) that the model check does not judge.
LOAD_PATTERNS = {
    "hf": ("*.safetensors", "*.bin", "*.pt"), "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",), "instanttensor": ("*.safetensors",),
    "mistral": ("consolidated*.safetensors",), "pt": ("*.pt",), "npcache": ("*.bin", "*.pt"),
}
FOLDER_FORMATS = ("auto", *LOAD_PATTERNS)
# --config-format mistral (transformers_utils/config.py) reads params.json
MISTRAL_CONFIG = "params.json"
# bytes per element of the safetensors dtypes whose size is whole bytes (others are not size-checked)
ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
              "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}
ZIP_START, ZIP_END, ZIP_TAIL = b"PK\x03\x04", b"PK\x05\x06", 22 + 65535  # end record + its longest comment
PICKLE_START = b"\x80"
INT = {int}
REF_CAP = 4096
REVISION = re.compile(r"[0-9A-Za-z._-]{1,255}")
ALLOW_LONG = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
# The tokenizer files transformers parses from the model folder as vLLM 0.33.0 starts (after the
# preflight handed over): a torn download dies there in a JSON traceback. Gemma's tokenizer.json (a
# 262k vocabulary with its merges) is about 32 MiB; tokenizer_config.json carries the added tokens.
TOKENIZER_FILES = (("tokenizer.json", 128 * files.MiB), ("tokenizer_config.json", files.INDEX_CAP))
QUANTIZED_DRAFTER = ("a {method} drafter loads without the Marlin kernel on these GPUs and drafts garbage: "
                     "acceptance stays at 1.00 (the bf16 drafter reaches 2.8 to 3.6)")


@dataclasses.dataclass(frozen=True)
class ModelDir:
    path: str
    config: dict
    weight_files: tuple[str, ...]
    weight_bytes: int
    typed: ModelConfig | None = None
    weight_format: str = SAFETENSORS  # which of vLLM's weight formats the files are


def hf_cache_snapshot(model_id: str, hub_cache: str, revision: str | None = None) -> str | None:
    """The snapshot directory of `model_id` in a huggingface_hub cache, if any: of `revision` (a
    branch or tag under refs/, or a commit) when given, else refs/main's, else the newest."""
    repo = os.path.join(hub_cache, "models--" + model_id.replace("/", "--"))
    snapshots = os.path.join(repo, "snapshots")
    name = revision or "main"
    try:
        ref = files.read_bytes(os.path.join(repo, "refs", name), f"refs/{name}", REF_CAP).decode("ascii").strip() \
            if REVISION.fullmatch(name) and name not in (".", "..") else ""
    except (Problem, UnicodeDecodeError):
        ref = ""
    for candidate in (ref, revision or ""):
        if REVISION.fullmatch(candidate) and candidate not in (".", "..") \
                and os.path.isdir(os.path.join(snapshots, candidate)):
            return os.path.join(snapshots, candidate)
    if revision:
        return None  # that revision is not in the cache: the server downloads it
    try:
        entries = [os.path.join(snapshots, name) for name in os.listdir(snapshots)]
    except (OSError, ValueError):
        return None
    entries = [entry for entry in entries if os.path.isdir(entry)]
    return max(entries, key=_mtime) if entries else None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def locate(model: str, hub_cache: str, revision: str | None = None) -> str | None:
    """A local directory as given, else the HF cache's snapshot of that id (at `revision`, the
    server's --revision, when given); None when neither exists."""
    if os.path.isdir(model):
        return model
    if os.path.isabs(model) or model.startswith("."):
        return None
    return hf_cache_snapshot(model, hub_cache, revision)


def _name(path: str, file: str) -> str:
    return f"{files.shown(path)}/{files.shown(file)}"


def header_problem(header: object, header_len: int, size: int, name: str) -> str | None:
    """What the safetensors library would refuse in a parsed header (vLLM loads with it): not an
    object, an entry that is not {dtype, shape, data_offsets}, offsets that do not tile the data
    contiguously from 0, a tensor whose bytes disagree with its shape, data that ends before or
    after the file does."""
    if not isinstance(header, dict):
        return f"{name}: its safetensors header holds {files.json_kind(header)}, not an object of tensors"
    metadata = header.get("__metadata__")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        return f"{name}: its safetensors __metadata__ is not an object of strings"
    spans = []
    for key, entry in header.items():  # the fast path of every start: C-level checks only
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            whole = (type(dtype) is str and type(shape) is list and type(begin) is int and type(end) is int
                     and 0 <= begin and set(map(type, shape)) <= INT and (not shape or min(shape) >= 0))
        except (TypeError, KeyError, ValueError):
            whole = False
        if not whole:
            return (f"{name}: tensor {files.shown(key[:80])!r} in its safetensors header is "
                    f"{files.json_kind(entry)[:60]}, not {{dtype, shape, data_offsets}}")
        width = ITEM_BYTES.get(dtype)
        if end < begin or (width is not None and math.prod(shape) * width != end - begin):
            return f"{name}: tensor {files.shown(key[:80])!r} has data_offsets {begin}..{end}, not its shape's size"
        spans.append((begin, end))
    spans.sort()
    position = 0
    for begin, end in spans:
        if begin != position:
            return f"{name}: its tensors' data_offsets leave a gap or overlap at byte {position}"
        position = end
    expected = 8 + header_len + position
    if size != expected:
        return f"{name} is truncated or corrupt: {size} bytes on disk, its header describes {expected}"
    return None


def safetensors_problem(path: str, name: str | None = None) -> str | None:
    """Why a .safetensors file is unusable (truncated download, bad header), or None."""
    name = name or files.shown(path)
    try:
        with files.opened(path, name) as (fd, size):
            raw = files.read_at(fd, 0, 8, name)
            if len(raw) < 8:
                return f"{name} is {size} bytes, shorter than a safetensors header"
            (header_len,) = struct.unpack("<Q", raw)
            if 8 + header_len > size:
                return f"{name} is truncated: its header alone claims {8 + header_len} bytes, the file has {size}"
            if header_len > files.HEADER_CAP:
                return (f"{name} claims a safetensors header of {header_len} bytes, more than the "
                        f"{files.HEADER_CAP // files.MiB} MiB a real one has")
            if header_len < 2:
                return f"{name} has an empty safetensors header"
            header = files.parse_json(files.read_at(fd, 8, header_len, name), f"{name}'s safetensors header",
                                      unique_keys=False)
    except Problem as problem:
        return str(problem)
    return header_problem(header, header_len, size, name)


def pytorch_problem(path: str, name: str) -> str | None:
    """Why a .bin/.pt checkpoint cannot be whole: empty, neither torch.save's zip (whose end
    record a torn download lacks) nor its legacy pickle."""
    try:
        with files.opened(path, name) as (fd, size):
            if size == 0:
                return f"{name} is empty"
            start = files.read_at(fd, 0, 4, name)
            if start.startswith(ZIP_START):
                tail = files.read_at(fd, max(0, size - ZIP_TAIL), ZIP_TAIL, name)
                if ZIP_END not in tail:
                    return f"{name} is truncated: a PyTorch zip checkpoint without its end record ({size} bytes)"
                return None
            if start[:1] == PICKLE_START and len(start) >= 2:
                return None  # torch.save's legacy format: nothing tells a whole one from a torn one cheaply
            return f"{name} is not a PyTorch checkpoint (neither torch.save's zip nor its pickle format)"
    except Problem as problem:
        return str(problem)


# A tokenizer.json is parsed in a child interpreter: json.loads of 30 MiB holds the GIL for the whole
# parse (0.3-0.6 s), which stalled every other check of the preflight behind it (the driver's context
# answered 0.6 s late on an H100); a child parses it on another core meanwhile.
APART_ABOVE = files.INDEX_CAP
PARSE_APART = ("import sys\nfrom door import files\nfrom door.problem import Problem\ntry:\n"
               "    files.read_object(sys.argv[1], sys.argv[2], int(sys.argv[3]), unique_keys=False)\n"
               "except Problem as problem:\n    print(problem)\n")
PARSE_DEADLINE_S = 60.0


def _object_problem(full: str, name: str, cap: int) -> str | None:
    """Why the file at `full` is not a whole JSON object of at most `cap` bytes (None: it is one)."""
    if cap <= APART_ABOVE:
        try:
            files.read_object(full, name, cap, unique_keys=False)
        except Problem as problem:
            return str(problem)
        return None
    import subprocess
    import sys

    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(files.__file__)))  # where door/ is
        path = os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))
        done = subprocess.run([sys.executable, "-c", PARSE_APART, full, name, str(cap)], capture_output=True,
                              text=True, timeout=PARSE_DEADLINE_S, env={**os.environ, "PYTHONPATH": path})
    except subprocess.TimeoutExpired:
        return f"{name} was not parsed within {PARSE_DEADLINE_S:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{name} could not be parsed (exit {done.returncode}: {files.shown(last[:200])})"
    return done.stdout.strip() or None


def fetched_files(folder: str) -> frozenset[str]:
    """The files the fetch manifest beside the model lists: each was hashed whole as it was fetched, and
    the fetched check (checks/fetched.py) holds each to the manifest's size, so a torn one fails there."""
    from ..fetch import manifest

    try:
        found = manifest.read(folder)
    except Problem:
        return frozenset()  # the fetched check names the manifest's problem
    return frozenset(file.path for file in found.files) if found else frozenset()


def tokenizer_problem(folder: str) -> tuple[str, str] | None:
    """(why, file) for the first tokenizer file in `folder` that is not a whole JSON object (torn,
    not UTF-8, a FIFO, too large); None when each present one is (an absent one is not judged: a
    model may keep its tokenizer in another format, or take --tokenizer). A file the fetch verified is
    not parsed again: a 30 MiB tokenizer.json costs 0.35 s of every start (an H100 host's core)."""
    vouched = fetched_files(folder)
    for file, cap in TOKENIZER_FILES:
        full = os.path.join(folder, file)
        if file not in vouched and os.path.lexists(full) and (why := _object_problem(full, _name(folder, file), cap)):
            return why, file
    return None


def _redownload(path: str, file: str | None = None, problem: object = None) -> str:
    if "Permission denied" in str(problem or ""):  # the file is there; this uid may not read it
        return unreadable_fix(path)
    again = f"download the model again into {files.shown(path)} (huggingface-cli download, or copy it whole)"
    return f"replace {files.shown(file)} with the model's own file: {again}" if file else again


def unreadable_fix(path: str) -> str:
    return (f"make {files.shown(path)} readable by uid {os.geteuid()} (gid {os.getegid()}): chmod -R a+rX, or chown "
            "it to that user, on the host; or run the container as its owner (compose `user:`, docker run --user, "
            "podman --userns=keep-id) or with its group (group_add / --group-add)")


# config.json keys whose value transformers loads as a nested config: --hf-overrides updates them key
# by key (vLLM's ModelConfig._apply_dict_overrides); every other key, a dict too, is replaced whole.
NOT_NESTED_CONFIGS = ("quantization_config",)


def with_overrides(config: dict, overrides: Mapping) -> dict:
    """config.json as vLLM sees it after `--hf-overrides` (a new dict; `config` is left as read)."""
    merged = dict(config)
    for key, value in overrides.items():
        nested = merged.get(key)
        if (isinstance(nested, dict) and isinstance(value, dict) and key.endswith("_config")
                and key not in NOT_NESTED_CONFIGS):
            merged[key] = _updated(nested, value)
        else:
            merged[key] = value
    return merged


def _updated(target: dict, updates: Mapping) -> dict:
    out = dict(target)
    for key, value in updates.items():
        out[key] = _updated(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


OVERRIDES_FLAG = "--hf-overrides"


def read_config(path: str, overrides: Mapping | None = None, config_file: str | None = None) -> tuple[dict, ModelConfig]:
    """The model's config.json (`config_file`, else the one in `path`), with `overrides` (the
    --hf-overrides object) applied, parsed and typed; raises Problem with the fix."""
    config_file = config_file or os.path.join(path, "config.json")
    folder = os.path.dirname(config_file)
    name = files.shown(config_file)
    try:
        os.lstat(config_file)
    except PermissionError:
        raise Problem(f"{files.shown(folder)} cannot be read by uid {os.geteuid()} (gid {os.getegid()}): "
                      "permission denied", unreadable_fix(folder)) from None
    except (OSError, ValueError):
        raise Problem(f"{files.shown(folder)} has no config.json", _redownload(folder)) from None
    try:
        raw = files.read_object(config_file, name)
    except Problem as problem:
        raise Problem(str(problem), _redownload(folder, "config.json", problem)) from None
    if overrides:
        raw = with_overrides(raw, overrides)
    try:
        typed = parse_config(raw)
    except ConfigProblem as problem:
        if overrides:
            raise Problem(f"{name} with {OVERRIDES_FLAG}: {problem}",
                          f"correct that field in {OVERRIDES_FLAG} or config.json") from None
        raise Problem(f"{name}: {problem}", f"correct that field in config.json, or {_redownload(folder)}") from None
    if not typed.names_a_model:
        raise Problem(f"{name} names neither architectures nor model_type: not a Hugging Face model's config",
                      _redownload(folder, "config.json"))
    return raw, typed


def _index(path: str, index: str, present: list[str]) -> list[str] | None:
    """The files a weight index lists (None when there is no index); Problem when it is unusable
    or lists a file that is not there."""
    full = os.path.join(path, index)
    if not os.path.lexists(full):
        return None
    name = _name(path, index)
    try:
        weight_map = files.read_object(full, name, files.INDEX_CAP, unique_keys=False).get("weight_map")
    except Problem as problem:
        raise Problem(str(problem), _redownload(path, index, problem)) from None
    if not isinstance(weight_map, dict) or not all(isinstance(file, str) for file in weight_map.values()):
        raise Problem(f"{name}: 'weight_map' is {files.json_kind(weight_map)}, expected an object of file names",
                      _redownload(path, index))
    listed = sorted(set(weight_map.values()))
    missing = [file for file in listed if file not in present]
    if missing:
        raise Problem(f"{files.shown(path)} lacks {len(missing)} shard(s) listed in {index}: "
                      f"{', '.join(files.shown(file) for file in missing[:3])}", _redownload(path))
    return listed


def weight_files(path: str, names: list[str], load_format: str = "auto",
                 load_named: str = "--load-format") -> tuple[str, list[str]]:
    """(format, files) that vLLM 0.33.0's default loader would load from the folder with
    `load_format` (LOAD_PATTERNS): safetensors filtered by their index (consolidated.safetensors.index.json
    for the Mistral layout), PyTorch files without the training files it skips. Hidden names are
    not matched (glob). `load_named` names the option in the refusal."""
    visible = [name for name in names if not name.startswith(".")]
    if load_format == "auto":
        load_format = "mistral" if fnmatch.filter(visible, "consolidated*.safetensors") else "hf"
    patterns = LOAD_PATTERNS.get(load_format)
    if patterns is None:
        raise Problem(f"{load_named} {files.shown(load_format)[:80]!r} is no load format whose weights vLLM reads "
                      "from the folder", f"remove {load_named}, or use one of: {', '.join(FOLDER_FORMATS)}")
    for pattern in patterns:
        found = sorted(fnmatch.filter(visible, pattern))
        if not found:
            continue
        if pattern.endswith(".safetensors"):
            listed = _index(path, "consolidated.safetensors.index.json" if load_format == "mistral" else INDEX, found)
            return SAFETENSORS, [name for name in found if listed is None or name in listed]
        found = [name for name in found if name not in NOT_WEIGHTS]
        if not found:  # vLLM stops at the first pattern that matched, then filters: nothing is left
            break
        if pattern == "*.bin":
            _index(path, BIN_INDEX, found)
        return pattern[2:], found
    if load_format == "hf":
        raise Problem(f"{files.shown(path)} has no weights (.safetensors, or PyTorch .bin)", _redownload(path))
    raise Problem(f"{files.shown(path)} has no weights that {load_named} {load_format} loads "
                  f"({', '.join(patterns)})", f"remove {load_named} (vLLM then loads what the folder holds), "
                  f"or download the model's {load_format} files into {files.shown(path)}")


def read_model_dir(path: str, config: dict | None = None, typed: ModelConfig | None = None,
                   source: "ConfigSource | None" = None) -> ModelDir:
    """The model directory's config (`config` when already read) and the weights `source`'s load
    format reads (none for a loader of its own files); raises Problem with the fix."""
    source = source or MODEL_FOLDER_CONFIG
    if config is None or typed is None:
        config, typed = read_config(path)
    try:
        names = sorted(os.listdir(path))
    except PermissionError:
        raise Problem(f"{files.shown(path)} cannot be listed by uid {os.geteuid()} (gid {os.getegid()}): "
                      "permission denied", unreadable_fix(path)) from None
    except (OSError, ValueError) as error:
        raise Problem(f"{files.shown(path)} cannot be listed ({getattr(error, 'strerror', None) or error})",
                      unreadable_fix(path)) from None
    if source.load_format not in FOLDER_FORMATS:
        return ModelDir(path, config, (), 0, typed, f"{source.load_format}-format (read by its own loader)")
    kind, loaded = weight_files(path, names, source.load_format, source.load_named)
    judge = safetensors_problem if kind == SAFETENSORS else pytorch_problem
    total = 0
    for file in loaded:
        full = os.path.join(path, file)
        problem = judge(full, _name(path, file))
        if problem:
            raise Problem(problem, _redownload(path, file, problem))
        total += _size(full)
    return ModelDir(path, config, tuple(loaded), total, typed, kind)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def gib(count: float) -> str:
    return f"{count / 2**30:.2f} GiB"


DOWNLOAD_AT_START = "DOWNLOAD_AT_START"


def not_found(name: str, variable: str, model: str, hub_cache: str, offline: bool,
              download_allowed: bool = False) -> Result:
    shown = files.shown(model)
    if (os.path.isabs(model) or model.startswith(".")) and os.path.lexists(model):
        try:
            what = files.kind(os.stat(model).st_mode)
        except (OSError, ValueError) as error:
            what = f"unusable ({getattr(error, 'strerror', None) or error})"
        return failed(name, f"{variable} {shown} is {what}, not a model directory",
                      f"set {variable} to the directory that holds config.json and the weights")
    if os.path.isabs(model) or model.startswith("."):
        try:
            os.stat(model)
        except PermissionError:  # a folder above it withholds search permission from this uid
            return failed(name, f"{variable} directory {shown} cannot be reached by uid {os.geteuid()} "
                                "(permission denied on a folder above it)",
                          "make the model folder readable by the container's user (chmod -R a+rX on the host), "
                          "or run the container as a user of its group")
        except (OSError, ValueError):
            pass
        return failed(name, f"{variable} directory {shown} does not exist",
                      f"mount the model directory at {shown} (compose `volumes:`, Quadlet `Volume=`)")
    hub = files.shown(hub_cache)
    words = f"{shown} --drafter" if name == DRAFTER else shown
    fetch_it = (f"fetch it first, pinned, judged and verified (`fetch {words} --gpu sm75` in the image, or "
                f"`python3 build.py model fetch {words}`), then set {variable}=/models/{files.shown(model.rsplit('/', 1)[-1])}")
    if offline:
        return failed(name, f"{shown} is not in the Hugging Face cache {hub} and HF_HUB_OFFLINE is set", fetch_it)
    if not download_allowed:
        return failed(name, f"{variable}={shown} is a Hub id that is not here: the server would download unpinned "
                            "weights no check has judged", f"{fetch_it}; or set {DOWNLOAD_AT_START}=true")
    return warned(name, f"{shown} is not in the Hugging Face cache {hub}: {DOWNLOAD_AT_START} is set, so it will be "
                        "downloaded at start, its size unknown to the disk and memory checks", fetch_it)


@dataclasses.dataclass(frozen=True)
class Resolved:
    """MODEL or DRAFTER resolved once for every check that needs it (model, drafter, fit, memory,
    parsers): the directory found, and its contents read, or the result that says why not."""
    path: str | None
    found: ModelDir | None
    problem: Result | None
    # config.json as read, also when the weights are not whole (the fit and parallel checks judge
    # it); None unless it is an object whose fields the checks read have their types (model_config)
    config: dict | None = None
    typed: ModelConfig | None = None
    config_from: str | None = None  # the config file read instead of the folder's (--hf-config-path)
    overridden: bool = False        # `config` is the file's with --hf-overrides applied
    tokenizer_folder: str | None = None  # the folder the server reads the tokenizer from, when it is this one

    @property
    def config_file(self) -> str | None:
        """The config file read (the folder's config.json, or --hf-config-path's), when there is one;
        with `overridden`, `config` is not that file's content (the fit check writes its own copy)."""
        config = self.config_from or (os.path.join(self.path, "config.json") if self.path else None)
        return config if config and os.path.isfile(config) else None


@dataclasses.dataclass(frozen=True)
class ConfigSource:
    """Where the server reads the model from, so the checks read the same: the snapshot of
    `revision` (--revision) of a Hub id, the config of --hf-config-path (`config_path`, named
    `config_named` in messages) instead of the model folder's, with the --hf-overrides object
    (`overrides`) applied."""
    overrides: Mapping | None = None
    config_path: str | None = None
    config_named: str = "--hf-config-path"
    revision: str | None = None
    load_format: str = "auto"       # --load-format: which weight files the server loads (LOAD_PATTERNS; others load their own)
    load_named: str = "--load-format"
    config_format: str = "auto"     # --config-format: mistral reads params.json
    config_format_named: str = "--config-format"
    tokenizer: str | None = None    # --tokenizer: the server reads the tokenizer there, not from the model folder


MODEL_FOLDER_CONFIG = ConfigSource()


def config_file_of(source: ConfigSource, hub_cache: str) -> str | None:
    """The config file --hf-config-path names (a file, a folder holding config.json, or a Hub id in
    the HF cache), None without it; Problem when it names none the checks can read."""
    value = source.config_path
    if not value:
        return None
    if os.path.isfile(value):
        return value
    folder = locate(value, hub_cache)
    if folder is not None:
        return os.path.join(folder, "config.json")
    shown = files.shown(value)
    if os.path.isabs(value) or value.startswith("."):
        raise Problem(f"{source.config_named} {shown} does not exist (neither a config.json nor a folder with one)",
                      f"mount that config at {shown}, or remove {source.config_named}")
    raise Problem(f"{source.config_named} {shown} is not in the Hugging Face cache {files.shown(hub_cache)}: the "
                  "server would read another config than the checks can", f"download it first (huggingface-cli "
                  f"download {shown} config.json) into the mounted HF_HOME, or give a local path")


def resolve(name: str, variable: str, model: str, hub_cache: str, offline: bool,
            source: ConfigSource = MODEL_FOLDER_CONFIG, download_allowed: bool = False) -> Resolved:
    """Finds the model directory and reads it (config.json, or the config `source` names, with its
    overrides; each weight file's header) once; every failure, expected or not, ends in the Result
    that names it."""
    path = None
    try:
        path = locate(model, hub_cache, source.revision)
        if path is None:
            return Resolved(None, None, not_found(name, variable, model, hub_cache, offline, download_allowed))
        try:
            config_file = config_file_of(source, hub_cache)
            config, typed = read_config(path, source.overrides, config_file)
        except Problem as problem:
            return Resolved(path, None, failed(name, str(problem), problem.fix))
        read_as = {"config_from": config_file, "overridden": bool(source.overrides),
                   "tokenizer_folder": path if name == MODEL and not source.tokenizer else None}
        if source.config_format == "mistral" and not os.path.isfile(os.path.join(path, MISTRAL_CONFIG)):
            return Resolved(path, None, failed(name, f"{files.shown(path)} has no {MISTRAL_CONFIG}, which "
                                                     f"{source.config_format_named} mistral reads",
                                               f"remove {source.config_format_named} (vLLM then reads config.json), "
                                               f"or use the model's Mistral-format download"), config, typed, **read_as)
        try:
            return Resolved(path, read_model_dir(path, config, typed, source), None, config, typed, **read_as)
        except Problem as problem:
            return Resolved(path, None, failed(name, str(problem), problem.fix), config, typed, **read_as)
    except Exception as error:  # a shape no branch above foresaw: a line, not a traceback
        where = files.shown(path or model)
        return Resolved(path, None, failed(name, f"{variable} {where} could not be read "
                                                 f"({type(error).__name__}: {files.shown(str(error))[:200]})",
                                           "check the model folder's files, or download the model again"))


def allow_long(env: Mapping[str, str]) -> bool:
    """vLLM's own reading of VLLM_ALLOW_LONG_MAX_MODEL_LEN (vllm/envs.py)."""
    return env.get(ALLOW_LONG, "0").strip().lower() in ("1", "true")


def check_model(model: Resolved, max_model_len: int | None = None, long_allowed: bool = False) -> Result:
    if model.found is None:
        return model.problem
    found = model.found
    where = files.shown(found.path)
    torn = tokenizer_problem(model.tokenizer_folder) if model.tokenizer_folder else None
    if torn:
        return failed(MODEL, f"{torn[0]}: the server's tokenizer would fail to load after the preflight",
                      _redownload(model.tokenizer_folder, torn[1], torn[0]))
    too_long = max_len_problem(found.typed, max_model_len)
    if too_long and long_allowed:
        return warned(MODEL, f"{where}: {too_long[0]}; "
                             f"{ALLOW_LONG} is set, so vLLM serves it and positions past the limit may give NaN",
                      too_long[1])
    if too_long:
        return failed(MODEL, f"{where}: {too_long[0]}; vLLM refuses it after loading the weights", too_long[1])
    return passed(MODEL, f"{where}: {len(found.weight_files)} {found.weight_format} file(s), {gib(found.weight_bytes)}")


def check_drafter(drafter: Resolved | None) -> Result:
    if drafter is None:
        return passed(DRAFTER, "no drafter configured")
    if drafter.found is None:
        return drafter.problem
    found = drafter.found
    path = files.shown(found.path)
    if found.typed is not None and found.typed.top.object("quantization_config") is not None:
        method = found.typed.quant_method or "unknown"
        if method == "compressed-tensors":
            return failed(DRAFTER, f"{path} is quantized (compressed-tensors): "
                          + QUANTIZED_DRAFTER.format(method=method),
                          "use the bf16 drafter checkpoint (one without quantization_config)")
        return warned(DRAFTER, f"{path} is quantized ({files.shown(method)}); only the bf16 drafter is known to "
                               "draft well",
                      "prefer the bf16 drafter checkpoint")
    return passed(DRAFTER, f"{path}: not quantized, {gib(found.weight_bytes)}")


def staged_bytes(models: list[Resolved]) -> int | None:
    """Total weight bytes of the models to load; None when one of them is not present and readable."""
    if any(model.found is None for model in models):
        return None
    return sum(model.found.weight_bytes for model in models)
