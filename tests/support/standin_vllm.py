"""A stand-in for the server program in tests that need no real vLLM: a folder holding a `vllm`
package whose `vllm.entrypoints.openai.api_server` module is the given source. Put the folder
first on PYTHONPATH and the entrypoint's one command (`python3 -m vllm.entrypoints.openai.api_server`)
runs it; the product has no switch that replaces its server."""
from __future__ import annotations

from pathlib import Path

MODULE = ("vllm", "entrypoints", "openai", "api_server")


def write_standin_vllm(root: Path, server_source: str) -> Path:
    """`root` with vllm/entrypoints/openai/api_server.py = server_source; returns root."""
    package = root
    for part in MODULE[:-1]:
        package = package / part
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
    (package / f"{MODULE[-1]}.py").write_text(server_source)
    return root
