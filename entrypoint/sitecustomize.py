"""Copied to /opt/vllm-turing/sitecustomize.py (on the image's PYTHONPATH): Python imports it at
every start. In every process it prints an uncaught exception's traceback with the traceback module,
which asks a module's loader for its lines: Python's own printer reads them from files by name, and our
modules lie in the image's zip (contract.layout.CODE_ZIP). The rest acts only in vLLM's OpenAI server
process (see entrypoint/graceful_stop.py) and, for the start report, in the processes that server starts
(see entrypoint/start_report.py)."""
import os
import sys

from contract.layout import ENV_START_REPORT
from entrypoint.graceful_stop import install


def _excepthook(kind, value, traceback_):
    import traceback

    traceback.print_exception(kind, value, traceback_)


sys.excepthook = _excepthook
install(getattr(sys, "orig_argv", ()))
if ENV_START_REPORT in os.environ:  # set only for the server the entrypoint execs (and its children)
    from entrypoint import start_report

    start_report.install(getattr(sys, "orig_argv", ()))
