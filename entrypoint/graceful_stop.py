"""A clean, bounded stop for vLLM's OpenAI server, installed by /opt/vllm-turing/sitecustomize.py
in the server process only (the entrypoint execs it with /opt/vllm-turing on PYTHONPATH).

Why: on SIGTERM vLLM's launcher stops the engine client (AsyncLLM.shutdown), then lets uvicorn
shut down. AsyncLLM.shutdown cancels its output-handler task. Only when that task has already
taken the EngineDeadError that the cancelled output-socket task leaves in its queue does it pass
the error to the open requests (OutputProcessor.propagate_error); when the cancel lands first
(a race between two call_soon_threadsafe callbacks), every open stream waits forever on a queue
nothing will fill. uvicorn's Config has no timeout_graceful_shutdown there, so it waits for
those connections for ever, and the runtime's SIGKILL ends the container with 137.

Two hooks, each applied right after its module is imported:
- AsyncLLM.shutdown first closes the stop gate (entrypoint/stop_gate.py: new requests get 503),
  then hands EngineDeadError to every open request itself, on the event loop,
  so each stream ends as vLLM ends it on an engine death: an error event, then [DONE]. When the engine was already dead at that first shutdown, the server exits ENGINE_DIED_EXIT
  instead of 0 (exit_if_engine_died);
- uvicorn.Config gets timeout_graceful_shutdown=SERVER_HTTP_DRAIN_S where none is given, so no
  connection can hold the process past the units' stop grace.
Standard library only; nothing here imports vLLM or uvicorn until the server itself does.
"""
from __future__ import annotations

import atexit
import importlib.machinery
import os
import sys
import threading
from typing import Callable, Sequence

from contract.layout import SERVER_HTTP_DRAIN_S

from . import stop_gate

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
ENGINE_MODULE = "vllm.v1.engine.async_llm"
UVICORN_CONFIG_MODULE = "uvicorn.config"
# The server's exit status when its engine died: vLLM's own watchdog stops the HTTP server within
# about 5 s but then returns normally, exit 0 (measured, vLLM 0.32 CPU), which a Restart=on-failure
# unit (Quadlet) takes for a clean stop and never restarts.
ENGINE_DIED_EXIT = 3
ENGINE_DIED = threading.Event()
# Interpreter options that take no value and may stand before -m (python3 -u -m ...).
_FLAG_OPTIONS = {"-u", "-B", "-E", "-s", "-S", "-I", "-O", "-OO", "-b", "-bb", "-q", "-P"}


def is_server(orig_argv: Sequence[str]) -> bool:
    """Whether this interpreter runs vLLM's OpenAI server: `python3 [flags] -m <SERVER_MODULE> ...`
    or the `vllm serve ...` console script. Every other python3 in the image (preflight, health
    probe, fit check, bench clients) is left alone."""
    args = list(orig_argv[1:])
    while args and args[0] in _FLAG_OPTIONS:
        args.pop(0)
    if args[:1] == ["-m"]:
        return args[1:2] == [SERVER_MODULE]
    return len(args) >= 2 and not args[0].startswith("-") and os.path.basename(args[0]) == "vllm" \
        and args[1] == "serve"


def with_drain_bound(kwargs: dict) -> dict:
    """uvicorn.Config's keyword arguments, with a bounded graceful shutdown unless one is given."""
    if kwargs.get("timeout_graceful_shutdown") is None:
        return {**kwargs, "timeout_graceful_shutdown": SERVER_HTTP_DRAIN_S}
    return kwargs


def end_open_requests(engine, error: Exception) -> bool:
    """Hand `error` to every open request of an AsyncLLM-like `engine`, on its event loop (the
    caller may be the launcher's executor thread). False when there is nothing to end."""
    handler = getattr(engine, "output_handler", None)
    processor = getattr(engine, "output_processor", None)
    if handler is None or processor is None or handler.get_loop().is_closed():
        return False
    handler.get_loop().call_soon_threadsafe(processor.propagate_error, error)
    return True


def engine_dead(engine) -> bool:
    """Whether an AsyncLLM-like engine client already counts its engine dead (`errored`: the core
    process gone or its output handler ended). Asked at the first shutdown only: a stop's own
    shutdown marks the engine dead as it goes."""
    try:
        return bool(getattr(engine, "errored", False))
    except Exception:  # noqa: BLE001 - a half-built client: not a death we can tell
        return False


def exit_if_engine_died(server_pid: int) -> None:
    """At the server's exit (the last atexit handler: registered first): a non-zero status when
    the engine died, so every restart policy restarts it."""
    if ENGINE_DIED.is_set() and os.getpid() == server_pid:
        print(f"vllm-turing: the engine died: the server exits {ENGINE_DIED_EXIT} so its restart policy "
              "starts it again", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(ENGINE_DIED_EXIT)


def _warn(what: str) -> None:
    print(f"vllm-turing: graceful-stop hook: {what} not found; a stream open at stop may hold the "
          f"server until SIGKILL. Report the vLLM version.", file=sys.stderr, flush=True)


def patch_uvicorn_config(module) -> None:
    config = getattr(module, "Config", None)
    if config is None:
        return _warn("uvicorn.Config")
    original = config.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **with_drain_bound(kwargs))

    config.__init__ = __init__


def patch_async_llm(module) -> None:
    engine_class, dead = getattr(module, "AsyncLLM", None), getattr(module, "EngineDeadError", None)
    if engine_class is None or dead is None or not hasattr(engine_class, "shutdown"):
        return _warn("vllm.v1.engine.async_llm.AsyncLLM.shutdown")
    original = engine_class.shutdown

    def shutdown(self, *args, **kwargs):
        if not stop_gate.STOPPING.is_set() and engine_dead(self):  # the first shutdown, after a death
            ENGINE_DIED.set()
        stop_gate.STOPPING.set()  # new requests get a 503 from here on (entrypoint/stop_gate.py)
        try:
            return original(self, *args, **kwargs)
        finally:
            end_open_requests(self, dead())

    engine_class.shutdown = shutdown


class AfterImport:  # a meta path finder (importlib.abc, not imported: 10 ms at every python3 start)
    """Runs patch(module) right after the named module's own code, once per name."""

    def __init__(self, patches: dict[str, Callable]):
        self.patches = dict(patches)

    def find_spec(self, name, path, target=None):
        patch = self.patches.pop(name, None)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_then_patch
        return spec


HOOKS = {UVICORN_CONFIG_MODULE: patch_uvicorn_config, ENGINE_MODULE: patch_async_llm}


def install(orig_argv: Sequence[str]) -> bool:
    if not is_server(orig_argv):
        return False
    sys.meta_path.insert(0, AfterImport(HOOKS))
    atexit.register(exit_if_engine_died, os.getpid())
    return True
