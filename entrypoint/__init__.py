"""Preflight checks for the vLLM OpenAI server, then exec of the server (see docs/architecture.md)."""
