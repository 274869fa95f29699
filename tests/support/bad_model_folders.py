"""A corpus of model folders a careless operator or an attacker could hand the preflight, each with
the verdict the preflight must give: which check, pass/warn/fail, and a piece of its one-line
message (the file or setting it names). Each case builds its folder (or a Hugging Face cache) in a
directory it is given, with real files: FIFOs, sockets, symlink loops, symlinks to /dev/zero,
sparse files of gigabytes (`truncate`, no data written), torn downloads, JSON of every wrong shape.

Used by tests/unit/test_entrypoint_model_reads.py (each case through the real checks on the host,
in a subprocess with a deadline) and by the image tier (mount the folder, set `case.settings_env(mount)`).

    python3 -m tests.support.bad_model_folders build CASE DIR   # build CASE in DIR
    python3 -m tests.support.bad_model_folders judge CASE DIR   # judge it there, print the results as JSON
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import socket
import struct
import sys
from typing import Callable

from tests.support.model_files import GEMMA4_TEXT_CONFIG, write_hf_cache_model, write_model_dir, write_tensors

GEMMA4_LIMIT = 131072
TEXT = {**GEMMA4_TEXT_CONFIG, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
        "max_position_embeddings": GEMMA4_LIMIT,
        "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                               "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
GEMMA4 = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": TEXT}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 8,
         "num_key_value_heads": 8, "hidden_size": 512, "num_hidden_layers": 2, "max_position_embeddings": 4096}
MODEL_ID = "acme/broken-model"
GiB = 2**30
TOKENIZER = {"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                                               "merges": [["a", "b"]]}}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[pathlib.Path], None]  # writes the model folder (or an HF cache) into the directory
    status: str                             # "fail", "warn" or "pass"
    says: str                               # a piece of the one-line message: the file or setting named
    check: str = "model"
    env: dict = dataclasses.field(default_factory=dict)  # settings besides MODEL
    model_id: str | None = None             # the directory is an HF cache holding this id (MODEL is the id)

    def settings_env(self, mount: str) -> dict[str, str]:
        """The container's environment when the built directory is mounted at `mount`."""
        if self.model_id:
            return {**self.env, "MODEL": self.model_id, "HF_HUB_CACHE": mount, "HF_HUB_OFFLINE": "1"}
        return {**self.env, "MODEL": mount}


# --- building blocks --------------------------------------------------------------------------

def good(folder: pathlib.Path, config: dict | None = None) -> None:
    write_model_dir(folder, config=GEMMA4 if config is None else config)


def replace(folder: pathlib.Path, name: str, make: Callable[[pathlib.Path], None], config: dict | None = None) -> None:
    """A good model folder whose file `name` is then made by `make` instead."""
    good(folder, config)
    target = folder / name
    if target.exists() or target.is_symlink():
        target.unlink()
    make(target)


def fifo(path: pathlib.Path) -> None:
    os.mkfifo(path)


def unix_socket(path: pathlib.Path) -> None:
    here = os.getcwd()
    os.chdir(path.parent)  # a socket's path is limited to 108 bytes: bind the short relative name
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind(path.name)
        server.close()  # the socket file stays
    finally:
        os.chdir(here)


def sparse(size: int, head: bytes = b"") -> Callable[[pathlib.Path], None]:
    def make(path: pathlib.Path) -> None:
        path.write_bytes(head)
        os.truncate(path, size)  # a hole, not data: gigabytes cost nothing
    return make


def data(raw: bytes) -> Callable[[pathlib.Path], None]:
    return lambda path: path.write_bytes(raw)


def text_json(value: object) -> Callable[[pathlib.Path], None]:
    return data(json.dumps(value).encode())


def link(target: str) -> Callable[[pathlib.Path], None]:
    return lambda path: path.symlink_to(target)


def loop(path: pathlib.Path) -> None:
    (path.parent / "loop-a").symlink_to("loop-b")
    (path.parent / "loop-b").symlink_to("loop-a")
    path.symlink_to("loop-a")


def directory(path: pathlib.Path) -> None:
    path.mkdir()


def config_with(**text: object) -> dict:
    """The Gemma 4 config with text_config fields set (a field set to ... is removed)."""
    fields = {**TEXT, **text}
    return {**GEMMA4, "text_config": {key: value for key, value in fields.items() if value is not ...}}


def top_with(**fields: object) -> dict:
    return {**GEMMA4, **fields}


def config_case(name: str, config: object, status: str, says: str, **kw) -> Case:
    return Case(name, lambda folder: replace(folder, "config.json", text_json(config)), status, says, **kw)


def header(length: int, body: bytes = b"", size: int | None = None) -> Callable[[pathlib.Path], None]:
    """A safetensors file whose 8-byte header length is `length`, followed by `body`, `size` bytes in all."""
    def make(path: pathlib.Path) -> None:
        path.write_bytes(struct.pack("<Q", length) + body)
        if size is not None:
            os.truncate(path, size)
    return make


def st_header(value: object, pad_to: int = 8) -> Callable[[pathlib.Path], None]:
    raw = json.dumps(value).encode()
    raw += b" " * (-len(raw) % pad_to)
    return header(len(raw), raw)


def tensors_case(name: str, make: Callable[[pathlib.Path], None], status: str, says: str) -> Case:
    return Case(name, lambda folder: replace(folder, "model.safetensors", make), status, says)


def torch_zip(path: pathlib.Path, cut: int = 0, legacy: bool = False) -> None:
    """A real torch.save checkpoint (its zip format, or the legacy pickle one); `cut` bytes short,
    as a torn download is. torch is imported here only (the tests' requirements hold it)."""
    import torch

    torch.save({"layer0.weight": torch.zeros(1024, dtype=torch.float16)}, path,
               _use_new_zipfile_serialization=not legacy)
    if cut:
        os.truncate(path, path.stat().st_size - cut)


def bin_folder(folder: pathlib.Path, files: dict[str, Callable[[pathlib.Path], None]], index: list[str] | None = None,
               config: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(LLAMA if config is None else config))
    for name, make in files.items():
        make(folder / name)
    if index is not None:
        (folder / "pytorch_model.bin.index.json").write_text(
            json.dumps({"weight_map": {f"layer{i}.weight": name for i, name in enumerate(index)}}))


def sharded(folder: pathlib.Path, stray: dict[str, Callable[[pathlib.Path], None]] | None = None,
            index: Callable[[pathlib.Path], None] | None = None) -> None:
    write_model_dir(folder, config=GEMMA4, shards=2)
    for name, make in (stray or {}).items():
        make(folder / name)
    if index is not None:
        (folder / "model.safetensors.index.json").unlink()
        index(folder / "model.safetensors.index.json")


def hf_cache(refs_main: Callable[[pathlib.Path], None] | None = None,
             snapshot_file: tuple[str, Callable[[pathlib.Path], None]] | None = None) -> Callable[[pathlib.Path], None]:
    def make(hub: pathlib.Path) -> None:
        snapshot = write_hf_cache_model(hub, MODEL_ID, config=GEMMA4)
        if refs_main is not None:
            ref = hub / ("models--" + MODEL_ID.replace("/", "--")) / "refs" / "main"
            ref.unlink()
            refs_main(ref)
        if snapshot_file is not None:
            name, build = snapshot_file
            (snapshot / name).unlink()
            build(snapshot / name)
    return make


def shards_of(folder_files: list[str]) -> dict[str, Callable[[pathlib.Path], None]]:
    return {name: torch_zip for name in folder_files}


BIN_SHARDS = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
LLAMA_ROPE = {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
YARN = {**LLAMA, "max_position_embeddings": 32768,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": GEMMA4_LIMIT,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
ENTRY = {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}

CASES: list[Case] = [
    # config.json that is not a regular file
    Case("config-fifo", lambda d: replace(d, "config.json", fifo), "fail", "config.json is a named pipe"),
    Case("config-socket", lambda d: replace(d, "config.json", unix_socket), "fail", "config.json is a socket"),
    Case("config-directory", lambda d: replace(d, "config.json", directory), "fail", "config.json is a directory"),
    Case("config-symlink-loop", lambda d: replace(d, "config.json", loop), "fail", "config.json cannot be read"),
    Case("config-self-symlink", lambda d: replace(d, "config.json", link("config.json")), "fail",
         "config.json cannot be read"),
    Case("config-to-dev-zero", lambda d: replace(d, "config.json", link("/dev/zero")), "fail",
         "config.json is a character device"),
    Case("config-dangling-symlink", lambda d: replace(d, "config.json", link("gone.json")), "fail",
         "config.json is a symlink to a missing file"),
    Case("config-missing", lambda d: (good(d), (d / "config.json").unlink()), "fail", "has no config.json"),
    Case("config-sparse-8gib", lambda d: replace(d, "config.json", sparse(8 * GiB, b"{")), "fail",
         "config.json is 8589934592 bytes"),
    # config.json whose bytes are not a JSON object
    Case("config-empty", lambda d: replace(d, "config.json", data(b"")), "fail", "config.json is empty"),
    Case("config-whitespace", lambda d: replace(d, "config.json", data(b" \n\t\n")), "fail", "config.json is empty"),
    config_case("config-list", [], "fail", "config.json holds a list"),
    config_case("config-null", None, "fail", "config.json holds null"),
    config_case("config-string", "str", "fail", "config.json holds the string"),
    config_case("config-number", 1, "fail", "config.json holds the number 1"),
    config_case("config-true", True, "fail", "config.json holds true"),
    Case("config-invalid-utf8", lambda d: replace(d, "config.json", data(b'{"model_type": "gemma4\xff"}')), "fail",
         "config.json is not UTF-8"),
    Case("config-utf16", lambda d: replace(d, "config.json", data(json.dumps(GEMMA4).encode("utf-16"))), "fail",
         "config.json is not UTF-8"),
    Case("config-bom", lambda d: replace(d, "config.json", data(b"\xef\xbb\xbf" + json.dumps(GEMMA4).encode())),
         "fail", "config.json is not valid JSON"),
    Case("config-truncated-json", lambda d: replace(d, "config.json", data(json.dumps(GEMMA4).encode()[:-7])),
         "fail", "config.json is not valid JSON"),
    Case("config-deep-nesting", lambda d: replace(d, "config.json", data(b"[" * 200_000 + b"]" * 200_000)), "fail",
         "config.json is nested too deeply"),
    Case("config-deep-objects", lambda d: replace(d, "config.json", data(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)),
         "fail", "config.json is nested too deeply"),
    Case("config-duplicate-key", lambda d: replace(d, "config.json", data(
        b'{"model_type": "llama", "num_attention_heads": 8, "num_attention_heads": 16}')), "fail",
        "'num_attention_heads' twice"),
    Case("config-5000-digit-int", lambda d: replace(d, "config.json", data(b'{"vocab_size": 1' + b"0" * 5000 + b"}")),
         "fail", "config.json is not valid JSON"),
    # fields the checks read, with the wrong type
    config_case("heads-string", config_with(num_attention_heads="8"), "fail", "'text_config.num_attention_heads' is the string"),
    config_case("heads-list", config_with(num_attention_heads=[8]), "fail", "'text_config.num_attention_heads' is a list"),
    config_case("heads-bool", config_with(num_attention_heads=True), "fail", "'text_config.num_attention_heads' is true"),
    config_case("heads-float", config_with(num_attention_heads=8.0), "fail", "'text_config.num_attention_heads' is the number 8.0"),
    config_case("heads-10e30", config_with(num_attention_heads=10**30), "fail", "'text_config.num_attention_heads'"),
    config_case("heads-zero", config_with(num_attention_heads=0), "fail", "'text_config.num_attention_heads' is the number 0"),
    config_case("head-dim-zero-is-derived", config_with(head_dim=0), "pass", "1 safetensors file(s)"),
    config_case("kv-heads-negative", config_with(num_key_value_heads=-1), "fail", "'text_config.num_key_value_heads'"),
    config_case("kv-heads-object", config_with(num_key_value_heads={"n": 1}), "fail",
                "'text_config.num_key_value_heads' is an object"),
    config_case("head-dim-null-is-derived", config_with(head_dim=None), "pass", "1 safetensors file(s)"),
    config_case("sliding-window-float", config_with(sliding_window=512.5), "fail", "'text_config.sliding_window'"),
    config_case("layer-types-string", config_with(layer_types="full_attention"), "fail", "'text_config.layer_types'"),
    config_case("text-config-list", top_with(text_config=[]), "fail", "'text_config' is a list"),
    config_case("text-config-string", top_with(text_config="gemma4_text"), "fail", "'text_config' is the string"),
    config_case("architectures-string", top_with(architectures="Gemma4ForConditionalGeneration"), "fail",
                "'architectures' is the string"),
    config_case("architectures-object", top_with(architectures={"0": "Gemma4"}), "fail", "'architectures' is an object"),
    config_case("model-type-list", top_with(model_type=["gemma4"]), "fail", "'model_type' is a list"),
    config_case("quantization-config-string", top_with(quantization_config="awq"), "fail",
                "'quantization_config' is the string"),
    config_case("quant-method-number", top_with(quantization_config={"quant_method": 4}), "fail",
                "'quantization_config.quant_method' is the number 4"),
    config_case("audio-config-list", top_with(audio_config=[1]), "fail", "'audio_config' is a list"),
    config_case("max-position-string", config_with(max_position_embeddings="131072"), "fail",
                "'text_config.max_position_embeddings' is the string"),
    config_case("rope-factor-string", {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": "4"}}, "fail",
                "'rope_scaling.factor' is the string"),
    config_case("rope-scaling-list", {**LLAMA, "rope_scaling": [4]}, "fail", "'rope_scaling' is a list"),
    # safetensors headers
    tensors_case("st-header-2-60", header(2**60, b"{}"), "fail", "its header alone claims 1152921504606846984 bytes"),
    tensors_case("st-header-past-eof", header(10_000, b'{"a": 1}'), "fail", "model.safetensors is truncated"),
    tensors_case("st-header-over-cap", header(20 * 2**20, b"{", size=8 + 21 * 2**20), "fail",
                 "claims a safetensors header of 20971520 bytes"),
    tensors_case("st-header-not-json", header(8, b"not json"), "fail", "safetensors header is not valid JSON"),
    tensors_case("st-header-list", st_header([]), "fail", "safetensors header holds a list"),
    tensors_case("st-header-null", st_header(None), "fail", "safetensors header holds null"),
    tensors_case("st-header-invalid-utf8", header(8, b'{"\xff": 1}'), "fail", "safetensors header is not UTF-8"),
    tensors_case("st-header-empty", header(0), "fail", "empty safetensors header"),
    tensors_case("st-short", data(b"\x10\x00\x00"), "fail", "model.safetensors is 3 bytes, shorter"),
    tensors_case("st-empty", data(b""), "fail", "model.safetensors is 0 bytes, shorter"),
    tensors_case("st-entry-not-object", st_header({"w": 5}), "fail", "tensor 'w' in its safetensors header"),
    tensors_case("st-shape-string", st_header({"w": {**ENTRY, "shape": "4"}}), "fail", "tensor 'w'"),
    tensors_case("st-metadata-numbers", st_header({"__metadata__": {"format": 1}}), "fail", "__metadata__"),
    tensors_case("st-size-disagrees", st_header({"w": {**ENTRY, "data_offsets": [0, 6]}}), "fail",
                 "'w' has data_offsets 0..6, not its shape's size"),
    tensors_case("st-offsets-gap", lambda p: write_tensors(p, {"a": ("F16", [4]), "b": ("F16", [4])}) and
                 p.write_bytes(p.read_bytes().replace(b"[8, 16]", b"[9, 17]")), "fail", "gap or overlap"),
    tensors_case("st-truncated-data", lambda p: write_tensors(p, {"w": ("F16", [4096])}, truncate_by=100), "fail",
                 "model.safetensors is truncated or corrupt"),
    tensors_case("st-trailing-bytes", lambda p: (write_tensors(p, {"w": ("F16", [16])}),
                                                  p.write_bytes(p.read_bytes() + b"xx")), "fail", "header describes"),
    tensors_case("st-fifo", fifo, "fail", "model.safetensors is a named pipe"),
    tensors_case("st-directory", directory, "fail", "model.safetensors is a directory"),
    tensors_case("st-to-dev-zero", link("/dev/zero"), "fail", "model.safetensors is a character device"),
    tensors_case("st-symlink-loop", loop, "fail", "model.safetensors cannot be read"),
    tensors_case("st-sparse-hole-8gib", sparse(8 * GiB), "fail", "empty safetensors header"),
    # indexes
    Case("index-missing-shard", lambda d: (sharded(d), (d / "model-00002-of-00002.safetensors").unlink()), "fail",
         "lacks 1 shard(s) listed in model.safetensors.index.json"),
    Case("index-list", lambda d: sharded(d, index=text_json([])), "fail", "model.safetensors.index.json holds a list"),
    Case("index-weight-map-list", lambda d: sharded(d, index=text_json({"weight_map": []})), "fail", "'weight_map'"),
    Case("index-fifo", lambda d: sharded(d, index=fifo), "fail", "model.safetensors.index.json is a named pipe"),
    Case("index-sparse-1gib", lambda d: sharded(d, index=sparse(GiB, b"{")), "fail",
         "model.safetensors.index.json is 1073741824 bytes"),
    Case("index-leaves-out-a-torn-stray", lambda d: sharded(d, stray={"extra.safetensors": data(b"junk")}), "pass",
         "2 safetensors file(s)"),  # vLLM loads only what the index lists
    Case("hidden-safetensors-ignored", lambda d: (good(d), (d / ".partial.safetensors").write_bytes(b"x")), "pass",
         "1 safetensors file(s)"),
    # PyTorch .bin / .pt weights (vLLM loads them when there is no .safetensors)
    Case("bin-single", lambda d: bin_folder(d, {"pytorch_model.bin": torch_zip}), "pass", "1 bin file(s)"),
    Case("bin-sharded", lambda d: bin_folder(d, shards_of(BIN_SHARDS), index=BIN_SHARDS), "pass", "2 bin file(s)"),
    Case("bin-legacy-pickle", lambda d: bin_folder(d, {"pytorch_model.bin": lambda p: torch_zip(p, legacy=True)}),
         "pass", "1 bin file(s)"),
    Case("bin-shard-missing", lambda d: bin_folder(d, shards_of(BIN_SHARDS[:1]), index=BIN_SHARDS), "fail",
         "lacks 1 shard(s) listed in pytorch_model.bin.index.json"),
    Case("bin-torn", lambda d: bin_folder(d, {"pytorch_model.bin": lambda p: torch_zip(p, cut=200)}), "fail",
         "pytorch_model.bin is truncated"),
    Case("bin-empty", lambda d: bin_folder(d, {"pytorch_model.bin": data(b"")}), "fail", "pytorch_model.bin is empty"),
    Case("bin-not-torch", lambda d: bin_folder(d, {"pytorch_model.bin": data(b"<html>404</html>")}), "fail",
         "pytorch_model.bin is not a PyTorch checkpoint"),
    Case("bin-fifo", lambda d: bin_folder(d, {"pytorch_model.bin": fifo}), "fail", "pytorch_model.bin is a named pipe"),
    Case("bin-index-list", lambda d: (bin_folder(d, shards_of(BIN_SHARDS)),
                                      (d / "pytorch_model.bin.index.json").write_text("[]")), "fail",
         "pytorch_model.bin.index.json holds a list"),
    Case("bin-training-files-only", lambda d: bin_folder(d, {"training_args.bin": torch_zip, "optimizer.pt": torch_zip}),
         "fail", "has no weights"),
    Case("pt-single", lambda d: bin_folder(d, {"model.pt": torch_zip}), "pass", "1 pt file(s)"),
    Case("safetensors-win-over-torn-bin", lambda d: (good(d), torch_zip(d / "pytorch_model.bin", cut=300)), "pass",
         "1 safetensors file(s)"),  # vLLM does not open .bin files when .safetensors exist
    Case("no-weights", lambda d: (good(d), (d / "model.safetensors").unlink()), "fail", "has no weights"),
    # the tokenizer files transformers parses as the server starts
    Case("tokenizer-json-whole", lambda d: replace(d, "tokenizer.json", text_json(TOKENIZER)), "pass",
         "1 safetensors file(s)"),
    Case("tokenizer-json-torn", lambda d: replace(d, "tokenizer.json", data(json.dumps(TOKENIZER).encode()[:-40])),
         "fail", "tokenizer.json is not valid JSON"),
    Case("tokenizer-json-fifo", lambda d: replace(d, "tokenizer.json", fifo), "fail", "tokenizer.json is a named pipe"),
    Case("tokenizer-json-sparse-1gib", lambda d: replace(d, "tokenizer.json", sparse(GiB, b"{")), "fail",
         "tokenizer.json is 1073741824 bytes, more than the 128 MiB"),
    Case("tokenizer-config-torn", lambda d: replace(d, "tokenizer_config.json", data(b'{"added_tokens_decoder": {')),
         "fail", "tokenizer_config.json is not valid JSON"),
    Case("tokenizer-config-list", lambda d: replace(d, "tokenizer_config.json", text_json([])), "fail",
         "tokenizer_config.json holds a list"),
    # MAX_MODEL_LEN against the model's limit
    Case("max-len-over", good, "fail", f"MAX_MODEL_LEN={GEMMA4_LIMIT + 1} is above the model's limit of {GEMMA4_LIMIT}",
         env={"MAX_MODEL_LEN": str(GEMMA4_LIMIT + 1)}),
    Case("max-len-at-limit", good, "pass", "1 safetensors file(s)", env={"MAX_MODEL_LEN": str(GEMMA4_LIMIT)}),
    Case("max-len-over-allowed", good, "warn", "VLLM_ALLOW_LONG_MAX_MODEL_LEN is set",
         env={"MAX_MODEL_LEN": "200000", "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    Case("max-len-text-config-wins", lambda d: good(d, top_with(max_position_embeddings=2048)), "pass",
         "1 safetensors file(s)", env={"MAX_MODEL_LEN": "65536"}),
    Case("max-len-rope-linear-fits", lambda d: good(d, LLAMA_ROPE), "pass", "1 safetensors file(s)",
         env={"MAX_MODEL_LEN": "16384"}),
    Case("max-len-rope-linear-over", lambda d: good(d, LLAMA_ROPE), "fail", "max_position_embeddings 4096 x rope factor 4",
         env={"MAX_MODEL_LEN": "16385"}),
    Case("max-len-yarn-prescaled", lambda d: good(d, YARN), "fail", "limit of 32768",
         env={"MAX_MODEL_LEN": "65536"}),
    Case("max-len-gemma3-not-rescaled", lambda d: good(d, GEMMA3), "fail", f"limit of {GEMMA4_LIMIT}",
         env={"MAX_MODEL_LEN": str(GEMMA4_LIMIT * 2)}),
    Case("max-len-model-max-length", lambda d: good(d, {**LLAMA, "model_max_length": 8192}), "pass",
         "1 safetensors file(s)", env={"MAX_MODEL_LEN": "8192"}),
    Case("max-len-no-limit-named", lambda d: good(d, {k: v for k, v in LLAMA.items() if k != "max_position_embeddings"}),
         "pass", "1 safetensors file(s)", env={"MAX_MODEL_LEN": "1000000"}),  # vLLM takes MAX_MODEL_LEN then
    # the Hugging Face cache
    Case("hf-refs-main-fifo", hf_cache(refs_main=fifo), "pass", "1 safetensors file(s)", model_id=MODEL_ID),
    Case("hf-refs-main-escapes", hf_cache(refs_main=data(b"../../../../etc")), "pass", "1 safetensors file(s)",
         model_id=MODEL_ID),
    Case("hf-refs-main-sparse", hf_cache(refs_main=sparse(GiB)), "pass", "1 safetensors file(s)", model_id=MODEL_ID),
    Case("hf-config-fifo", hf_cache(snapshot_file=("config.json", fifo)), "fail", "config.json is a named pipe",
         model_id=MODEL_ID),
    Case("hf-config-list", hf_cache(snapshot_file=("config.json", text_json([]))), "fail", "config.json holds a list",
         model_id=MODEL_ID),
    # the checks that read the typed config
    Case("parsers-on-a-broken-config", lambda d: replace(d, "config.json", text_json([])), "skip",
         "config.json was not read", check="parsers"),
    Case("parsers-gemma4-named", good, "warn", "is Gemma 4 but TOOL_CALL_PARSER and REASONING_PARSER", check="parsers"),
]
BY_NAME = {case.name: case for case in CASES}
assert len(BY_NAME) == len(CASES), "case names are unique"

JUDGED = ("model", "drafter", "parsers", "audio", "memory", "parallel")


def judge(case: Case, folder: pathlib.Path) -> dict:
    """Runs the preflight's checks that read model files (as the entrypoint's plan binds them) on
    `case` built in `folder`, returning each result as the report's JSON holds it."""
    from entrypoint import preflight
    from entrypoint.settings import parse_settings

    env = {**case.settings_env(str(folder)), "HOME": str(folder.parent)}
    settings = parse_settings(env)
    checks = preflight.plan(settings, None, preflight.resolve_models(settings), env, [])
    started = {name: check.start() if isinstance(check, preflight.Background) else check
               for name, check in checks.items() if name in JUDGED}
    return {name: started[name]().to_dict() for name in JUDGED}


def main(argv: list[str]) -> int:
    action, case, folder = argv[0], BY_NAME[argv[1]], pathlib.Path(argv[2])
    if action == "build":
        case.build(folder)
    else:
        print(json.dumps(judge(case, folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
