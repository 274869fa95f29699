"""Serving smoke test: wait for a running endpoint, then check its client contract."""
from .command_line import add_arguments, run

__all__ = ["add_arguments", "run"]
