"""`python3 -m entrypoint [check [--json] | print-command [--json] | SERVER ARGS...]`.
Exit 0 ok, 1 a check failed, 2 bad settings or usage. The default mode execs the server in place
of this process (no shell, no child), so `docker stop` signals the server itself."""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from typing import Mapping

from . import preflight, report
from .command import server_argv
from .device import NoDevice, probe_devices, weakest
from .results import any_failed
from .settings import SettingsError, parse_settings, validate_for_device

MODES = ("check", "print-command")
USAGE = "usage: entrypoint check [--json] | print-command [--json] | [extra server args...]"


class UsageError(ValueError):
    pass


def parse_argv(argv: list[str]) -> tuple[str, bool, tuple[str, ...]]:
    """(mode, json output, container args appended to the server's argv)."""
    if argv and argv[0] in MODES:
        options = argv[1:]
        if options not in ([], ["--json"]):
            raise UsageError(f"{argv[0]} takes only --json, got {shlex.join(options)}. {USAGE}")
        return argv[0], bool(options), ()
    return "serve", False, tuple(argv)


def refuse(message: str, as_json: bool, **fields) -> int:
    print(f"vllm-turing: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"ok": False, "error": message, **fields}))
    return 2


def main(argv: list[str], env: Mapping[str, str]) -> int:
    try:
        mode, as_json, container_args = parse_argv(argv)
    except UsageError as error:
        return refuse(str(error), "--json" in argv)
    try:
        settings = parse_settings(env)
        try:
            gpus, device_error = probe_devices(), ""
        except NoDevice as error:
            gpus, device_error = [], str(error)
        device = weakest(gpus) if gpus else None
        if device is not None:
            validate_for_device(settings, device.cc)
    except SettingsError as error:
        return refuse(f"bad setting {error}", as_json, variable=error.variable)
    argv_out = server_argv(settings, device, container_args)
    if mode == "print-command":
        print(json.dumps({"argv": argv_out}) if as_json else shlex.join(argv_out))
        return 0
    started = time.perf_counter()
    results = preflight.run_checks(preflight.plan(settings, device, gpus, env), settings.skip_checks)
    elapsed = time.perf_counter() - started
    if as_json:
        print(report.render_json(results, elapsed, device, device_error, argv_out))
    else:
        print(report.render_text(results, elapsed, device, device_error))
    if any_failed(results):
        return 1
    if mode == "check":
        return 0
    print("vllm-turing: exec " + shlex.join(argv_out), flush=True)
    sys.stderr.flush()
    try:
        os.execvp(argv_out[0], argv_out)
    except OSError as error:
        print(f"vllm-turing: cannot exec {argv_out[0]}: {error.strerror}", file=sys.stderr)
        return 1
