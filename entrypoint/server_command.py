"""The server's argv from the settings (and the device, for DTYPE=auto), then the container's args."""
from __future__ import annotations

import json

from contract.layout import shutdown_timeout_s

from .device import Device
from .settings import SERVER_CMD, Settings, resolve_dtype
from .stop_gate import MIDDLEWARE as STOP_GATE

SHUTDOWN_TIMEOUT = "--shutdown-timeout"


def option(flag: str, value) -> list[str]:
    return [] if value is None else [flag, str(value)]


def gives_option(words, flag: str) -> bool:
    """Whether the user's words set `flag` themselves (`--flag N` or `--flag=N`)."""
    return any(word == flag or word.startswith(flag + "=") for word in words)


def drain_option(settings: Settings, user_words) -> list[str]:
    """vLLM's --shutdown-timeout sized from STOP_GRACE_SECONDS (vLLM's default, 0, aborts every
    request in flight at SIGTERM), unless the user gave one."""
    if gives_option(user_words, SHUTDOWN_TIMEOUT):
        return []
    return [SHUTDOWN_TIMEOUT, str(shutdown_timeout_s(settings.stop_grace_s))]


def server_argv(settings: Settings, device: Device | None, container_args: tuple[str, ...] = ()) -> list[str]:
    argv = [*SERVER_CMD, "--model", settings.model]
    argv += option("--served-model-name", settings.served_model_name)
    argv += ["--host", settings.host, "--port", str(settings.port)]
    argv += ["--dtype", resolve_dtype(settings.dtype, device.cc if device else None)]
    argv += option("--max-model-len", settings.max_model_len)
    argv += option("--max-num-seqs", settings.max_num_seqs)
    argv += option("--gpu-memory-utilization", settings.gpu_memory_utilization)
    argv += option("--kv-cache-dtype", settings.kv_cache_dtype)
    argv += ["--enforce-eager"] if settings.enforce_eager else []
    if settings.tensor_parallel_size > 1:
        argv += ["--tensor-parallel-size", str(settings.tensor_parallel_size)]
    if settings.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(settings.pipeline_parallel_size)]
    if settings.speculative_config:
        argv += ["--speculative-config", json.dumps(settings.speculative_config, separators=(",", ":"))]
    argv += option("--reasoning-parser", settings.reasoning_parser)
    if settings.tool_call_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", settings.tool_call_parser]
    argv += drain_option(settings, [*settings.extra_args, *container_args])
    argv += ["--middleware", STOP_GATE]  # a 503, not a 500, for a request during the drain
    return argv + list(settings.extra_args) + list(container_args)
