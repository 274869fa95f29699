"""`python3 -m entrypoint [check [--json] | print-command [--json] | SERVER ARGS...]`.
Exit 0 ok, 1 a check failed, 2 bad settings or usage. The default mode execs the server in place
of this process (no shell, no child), so `docker stop` signals the server itself."""
from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
import time
from typing import Mapping

from contract.layout import ENV_API_KEY
from contract.verdict import any_failed

from door import files

from . import hub_access, identity, image_facts, linker_cache, preflight, preflight_report
from .argv import Extras, judge_extra, speculative_problem
from .argv_files import opened_files_problem
from .revisions import revision_problem
from .checks import cache, driver_floor, parallel, turing_settings
from .server_command import server_argv
from .device import RELEASE_DEADLINE_S, Probe, weakest
from .api_key import server_api_key
from .environment import server_env
from door.redact import redact, redact_words
from door.problem import Problem, UsageError
from .settings import Settings, SettingsError, parse_settings, validate_for_device, validate_parser_names

MODES = ("check", "print-command")
USAGE = "usage: entrypoint check [--json] | print-command [--json] | [extra server args...]"


def parse_argv(argv: list[str]) -> tuple[str, bool, tuple[str, ...]]:
    """(mode, json output, container args appended to the server's argv)."""
    if argv and argv[0] in MODES:
        options = argv[1:]
        if options not in ([], ["--json"]):
            raise UsageError(f"{argv[0]} takes only --json, got {shlex.join(options)}. {USAGE}")
        return argv[0], bool(options), ()
    return "serve", False, tuple(argv)


def refusal_line(message: str) -> str:
    """The one stderr line of a refusal: secrets masked, unprintable characters escaped."""
    return f"vllm-turing: {files.shown(redact(message))}"


def refuse(message: str, as_json: bool, **fields) -> int:
    print(refusal_line(message), file=sys.stderr)
    message = redact(message)
    if as_json:
        print(json.dumps({"ok": False, "error": message, **fields}))
    return 2


def judge_words(settings: Settings, container_args: tuple[str, ...], server_facts: image_facts.Facts | None) -> Extras:
    """The extra words (VLLM_EXTRA_ARGS, the container's arguments) judged as vLLM will take them:
    typed by the server's option table, none owned by a setting, the parser names registered, the
    files they name usable; SettingsError (exit 2) naming the option as written otherwise."""
    extras = judge_extra(settings.extra_args, container_args, server_facts.server_parser if server_facts else None,
                         server_facts.values if server_facts else None)
    if server_facts is not None:
        validate_parser_names(settings, server_facts.document["parsers"], set(extras.values))
    problem = speculative_problem(extras, settings.speculative_config is not None) or opened_files_problem(extras) \
        or revision_problem(extras, settings.model, settings.hf_hub_cache, settings.hf_offline)
    if problem:
        raise problem
    return extras


def main(argv: list[str], env: Mapping[str, str], probe: Probe | None = None) -> int:
    """`probe`: the driver's calls, begun as the process started (entrypoint/__main__.py); else begun here."""
    if argv[:1] == ["fetch"]:
        return importlib.import_module("entrypoint.fetch.fetch_model").main(argv[1:], env)
    try:
        mode, as_json, container_args = parse_argv(argv)
    except UsageError as error:
        return refuse(str(error), "--json" in argv)
    try:
        env = identity.with_identity(env)
    except OSError as error:
        return refuse(f"cannot make a writable HOME under /tmp for uid {os.geteuid()}: {error.strerror}", as_json)
    try:
        settings = parse_settings(env)
        loaded = image_facts.load()
        server_facts, argv_source = image_facts.for_argv(loaded)
        extras = judge_words(settings, container_args, server_facts)
        try:
            probe = probe or Probe()
            gpus, device_error = probe.devices(), ""
        except Problem as error:
            gpus, device_error = [], str(error)
        device = weakest(gpus) if gpus else None
        if device is not None:
            validate_for_device(settings, device.cc)
        problem = turing_settings.settings_problem(env, extras, device.cc if device else None)
        if problem:
            raise problem
        api_key = server_api_key(env, settings.api_key_file)
        if token_refusal := hub_access.token_file_refusal(settings.hf_token_path):
            raise token_refusal
    except SettingsError as error:
        return refuse(f"bad setting {error}", as_json, variable=error.variable)
    argv_out = server_argv(settings, device, container_args)
    if mode == "print-command":
        shown_argv = redact_words(argv_out)
        print(json.dumps({"argv": shown_argv}) if as_json else shlex.join(shown_argv))
        return 0
    started = time.perf_counter()
    results = preflight.run_checks(
        preflight.plan(settings, device, preflight.resolve_models(settings, env, extras), env, gpus, extras, loaded,
                       argv_source, probe),
        settings.skip_checks)
    elapsed = time.perf_counter() - started
    if as_json:
        print(preflight_report.render_json(results, elapsed, device, device_error, redact_words(argv_out)))
    else:
        print(preflight_report.render_text(results, elapsed, device, device_error))
    # Every path below exits or execs: neither may end the probe's thread inside the driver's release
    released = probe.released()
    if any_failed(results):
        return 1
    if mode == "check":
        return 0
    from . import start_ledger, start_report  # the server's start only: `check` does without their imports

    ledger = start_ledger.prepare(settings.vllm_cache_root, settings.triton_cache_dir, time.time(),
                                  lambda line: print(line, file=sys.stderr))
    stamp_problem = cache.stamp_before_start(settings.vllm_cache_root, settings.skip_checks)
    if stamp_problem:
        print(f"vllm-turing: WARN cache: {stamp_problem}", file=sys.stderr)
    print("vllm-turing: exec " + shlex.join(redact_words(argv_out)), flush=True)
    sys.stderr.flush()
    exec_env = {**server_env(env), **start_report.exec_env(elapsed, ledger=ledger)}
    if api_key is not None:
        exec_env[ENV_API_KEY] = api_key
    if driver_floor.compat_applied(results):
        exec_env["LD_LIBRARY_PATH"] = driver_floor.with_compat(env.get("LD_LIBRARY_PATH"))
        print(f"vllm-turing: LD_LIBRARY_PATH={exec_env['LD_LIBRARY_PATH']}", flush=True)
    if device is not None:
        exec_env.update(parallel.nccl_defaults(device.cc, settings.tensor_parallel_size, env))
    exec_env.update(linker_cache.triton_override(env, linker_cache.loaded_libcuda()))
    if not released:
        print(f"vllm-turing: WARN the driver has not released the preflight's CUDA context in {RELEASE_DEADLINE_S:g} s; "
              "the server starts anyway", file=sys.stderr)
    try:
        os.execvpe(argv_out[0], argv_out, exec_env)
    except OSError as error:
        print(f"vllm-turing: cannot exec {argv_out[0]}: {error.strerror}", file=sys.stderr)
        return 1
