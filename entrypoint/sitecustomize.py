"""Copied to /opt/vllm-turing/sitecustomize.py (on the image's PYTHONPATH): Python imports it at
every start; it acts only in vLLM's OpenAI server process (see entrypoint/graceful_stop.py)."""
import sys

from entrypoint.graceful_stop import install

install(getattr(sys, "orig_argv", ()))
