"""The Turing clamp in the vLLM that will serve (the patch's own check), and the fit check for this
model's attention shapes against this device's real shared-memory limit (a subprocess of
patches.fitcheck). The image ships no Triton cache; the fit check takes each launch's need from
the image's fit table (the compiler's numbers recorded at build, --known-table) and compiles only
the launches the table lacks. Before that, the build's recorded verdicts per layer shape answer
without any subprocess when they cover every layer of this model on this device (lookup_fit)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping

from contract import layout
from contract.model_config import ModelConfig
from contract.verdict import Result, Status, failed, passed, warned
from door import files

CLAMP = "clamp"
FIT = "fit"
FIT_MODULE = "patches.fitcheck"
REBUILD = f"use the image built by build.py (it bakes in {layout.CODE_ZIP}), or rebuild it"
CLAMP_OK = ("present", "upstream")
FIT_TIMEOUT_S = 600


def check_clamp(module: str = "patches.turing_clamp") -> Result:
    try:
        clamp = importlib.import_module(module)
    except ImportError as error:
        return failed(CLAMP, f"{module} is not importable ({error})", REBUILD)
    try:  # both launchers: unified attention and encoder attention
        reports = [clamp.check(clamp.find_target(site), site, built_report(name)).to_dict()
                   for name, site in clamp.SITES.items()]
    except Exception as error:  # the clamp's own refusals (no vLLM, unknown launcher) are the finding
        return failed(CLAMP, f"the clamp check could not run: {error}".splitlines()[0], REBUILD)
    wrong = [report for report in reports if report.get("outcome") not in CLAMP_OK]
    if not wrong:
        where = ", ".join(Path(str(report.get("file"))).name for report in reports)
        return passed(CLAMP, f"clamp {'/'.join(sorted({r['outcome'] for r in reports}))} in {where} "
                             f"(vLLM {reports[0].get('vllm_version')})")
    report = wrong[0]
    where = f"{report.get('file')} (vLLM {report.get('vllm_version')})"
    return failed(CLAMP, f"clamp {report.get('outcome')} in {where}: {report.get('message', '')}".rstrip(": "),
                  "vLLM was reinstalled over the patched one: do not pip install vllm into the image; rebuild it")


def built_report(site: str) -> dict | None:
    """The build's apply report for the clamp site (layout.CLAMP_REPORTS), None where absent or unreadable."""
    path = layout.CLAMP_REPORTS.get(site)
    try:
        report = files.own_json(files.read_own(Path(path))) if path else None
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def judge_fit(returncode: int, stdout: str, stderr: str, cc: tuple[int, int], limit: int,
              fallback: str | None = None) -> Result:
    """The subprocess's report judged; `fallback` is why the table's verdicts did not answer."""
    result = _judge_report(returncode, stdout, stderr, cc, limit)
    if fallback is None:
        return result
    return Result(result.name, result.status, f"{result.message} [full check: {fallback}]", result.fix,
                  result.elapsed_s)


def judge_lookup(found, cc: tuple[int, int], limit: int) -> Result:
    """The fit check's answer from the fit table's verdicts (patches.fitcheck.lookup.Lookup, a hit)."""
    if found.all_fit:
        return passed(FIT, f"{_launches(found.launches)} fit {limit} bytes on cc {cc[0]}.{cc[1]} "
                           f"(largest {found.max_shared} bytes; from the fit table's verdicts, nothing compiled)")
    worst = found.worst or {}
    return failed(FIT, f"Triton launches exceed {limit} bytes of shared memory, e.g. head "
                       f"{worst.get('head_size')}: {worst.get('max_shared')} bytes (the fit table's verdict)",
                  "the clamp does not cover this model on this device: rebuild with build.py and report the "
                  "fit check's output")


def _launches(count: int) -> str:
    return f"{count} Triton launch" if count == 1 else f"{count} Triton launches"


def _judge_report(returncode: int, stdout: str, stderr: str, cc: tuple[int, int], limit: int) -> Result:
    try:
        report = files.own_json(stdout)
    except json.JSONDecodeError:
        report = None
    if not isinstance(report, dict):
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return failed(FIT, f"the fit check exited {returncode} without a report: {last}", REBUILD)
    launches = (report.get("launches") or []) + (report.get("mixer_launches") or [])
    too_big = [launch for launch in launches if not launch.get("fits")]
    if returncode == 0 and report.get("all_fit") and not too_big:
        return passed(FIT, f"{_launches(len(launches))} fit {limit} bytes on cc {cc[0]}.{cc[1]} "
                           f"(largest {report.get('max_shared')} bytes{_sources(report.get('known_table'))})")
    if too_big:
        worst = max(too_big, key=lambda launch: launch.get("shared") or 0)
        return failed(FIT, f"{len(too_big)} Triton launch(es) exceed {limit} bytes of shared memory, e.g. "
                           f"{worst.get('model')}/{worst.get('layer')} head {worst.get('head_size')} "
                           f"{worst.get('path')} tile {worst.get('tile_size')}: "
                           f"{worst.get('shared')} bytes", "the clamp does not cover this model on this device: "
                           "rebuild with build.py and report the fit check's output")
    return failed(FIT, f"the fit check exited {returncode}: {(stderr.strip().splitlines() or [''])[-1]}", REBUILD)


def _sources(known_table: dict | None) -> str:
    """Where the numbers came from, when the fit check was given the fit table."""
    if not isinstance(known_table, dict):
        return ""
    if known_table.get("used"):
        return f"; {known_table.get('from_table')} from the fit table, {known_table.get('compiled')} compiled"
    return f"; fit table ignored: {known_table.get('ignored_because')}"


def fit_command(model_config: str, cc: tuple[int, int], limit: int, fit_table: str | None,
                module: str = FIT_MODULE, tensor_parallel: int = 1, dtype: str = "float16") -> list[str]:
    """The fit check's argv; `fit_table` is the image's fit table when it exists, else None."""
    command = [sys.executable, "-m", module, "--model-config", model_config,
               "--cc", str(cc[0] * 10 + cc[1]), "--limit", str(limit), "--dtype", dtype, "--json"]
    if tensor_parallel != 1:
        command += ["--tensor-parallel-size", str(tensor_parallel)]
    return command + (["--known-table", fit_table] if fit_table else [])


def _env(name: str) -> str | None:
    """The variable's value, else that of its deprecated name (honoured for one release)."""
    old = [o for o, new in layout.DEPRECATED_ENV_NAMES.items() if new == name]
    return os.environ.get(name) or next((os.environ[o] for o in old if os.environ.get(o)), None)


def code_root(module: str) -> str | None:
    """The folder the module's top-level package is found in (what the subprocess needs on its
    PYTHONPATH), None when the module is not importable here."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError:  # a parent package is missing
        return None
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).resolve().parents[module.count(".") + (spec.submodule_search_locations is not None)])


def start_fit(model_config: str, config: ModelConfig, cc: tuple[int, int], limit: int,
              module: str = FIT_MODULE, tensor_parallel: int = 1, dtype: str = "auto",
              towers: bool = False) -> Callable[[], Result]:
    """Answers from the fit table's verdicts for `config` (the parsed `model_config`, as the model
    check read it; one rank's shapes of `tensor_parallel` ranks, in the dtype vLLM runs them in on
    the device under the DTYPE setting `dtype`) or starts the fit check on
    `model_config` in a subprocess (torch and vLLM imports take seconds, so it runs while the other
    checks do); the returned callable waits for it and judges its report."""
    root = code_root(module)
    if root is None:
        return lambda: failed(FIT, f"{module} is not installed for {sys.executable}", REBUILD)
    table = _env(layout.ENV_FIT_TABLE) or layout.FIT_TABLE
    run_in = run_dtype(config, cc, dtype)
    found = lookup_fit(table, config, model_config, cc, limit, tensor_parallel, run_in, towers)
    if found is not None and found.hit:
        return lambda: judge_lookup(found, cc, limit)
    if found is not None and found.refused:
        return lambda: failed(FIT, found.miss, found.refused)
    if found is not None and found.unproven:
        return lambda: warned(FIT, f"not proven: {found.miss}", f"the fit check proves {proven_families()}; watch "
                              "the first request's log for OutOfResources on this device")
    if found is not None and found.unreadable:
        # vLLM may still serve it (transformers fills what the file leaves out); the full check
        # would stop on the same field, so it is not started
        return lambda: warned(FIT, f"not judged: {found.miss}", "the fit check cannot tell this model's attention "
                              "layers; watch the first request's log for OutOfResources and report the config.json")
    fallback = found.miss if found is not None else "patches.fitcheck.lookup is not importable"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    command = fit_command(model_config, cc, limit, table if os.path.isfile(table) else None, module, tensor_parallel,
                          run_in)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def collect() -> Result:
        try:
            stdout, stderr = process.communicate(timeout=FIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return failed(FIT, f"the fit check did not finish in {FIT_TIMEOUT_S} s", f"without the image's fit "
                          f"table (${layout.ENV_FIT_TABLE}, {layout.FIT_TABLE}) every launch is compiled: keep it, or "
                          "give the container more CPU")
        return judge_fit(process.returncode, stdout, stderr, cc, limit, fallback)
    return collect


def replayssm_unproven(use_replayssm: object, buffer_len: object, model_type: object) -> str | None:
    """What `--use-replayssm` (with `--replayssm-buffer-len`, as the extra words set them) makes the model
    launch that the build did not prove, None where it proved it or the flag is off: the Mamba-2 decode
    at another history length, Kimi Linear's ReplaySSM recovery (with speculative decoding)."""
    if use_replayssm is not True:
        return None
    try:
        from patches.fitcheck.families import replayssm_unproven as unproven
    except ImportError:
        return "ReplaySSM's decode (patches.fitcheck is not importable here)"
    return unproven(model_type, buffer_len)


TUNED_FOLDER = "VLLM_TUNED_CONFIG_FOLDER"


def tuned_folder_unproven(env: Mapping[str, str]) -> str | None:
    """The user's own tuned kernel configurations, which vLLM launches as written (fused MoE, the Mamba
    state update, LoRA: the image ships none for a Turing or Ampere consumer GPU), None without them."""
    folder = env.get(TUNED_FOLDER, "").strip()
    if not folder:
        return None
    return (f"the tuned kernel configurations in {TUNED_FOLDER}={folder!r} (fused MoE, Mamba state update, LoRA), "
            "which vLLM launches as written")


def with_unproven(collect: Callable[[], Result], unproven: list[str]) -> Callable[[], Result]:
    """collect, its passing verdict turned into a warning naming what runs beyond what the table proved."""
    if not unproven:
        return collect

    def judged() -> Result:
        result = collect()
        if result.status is not Status.PASS:
            return result
        return warned(FIT, f"{result.message}; not proven: {'; '.join(unproven)}",
                      "keep to what the build proved (vLLM's defaults), or watch the first request's log for "
                      "OutOfResources on this device")
    return judged


def proven_families() -> str:
    """What the build's proof covers, named by its families (patches.fitcheck.families)."""
    try:
        from patches.fitcheck.families import proven
    except ImportError:
        return "vLLM's Triton attention kernels"
    return proven()


def run_dtype(config: ModelConfig, cc: tuple[int, int], setting: str) -> str:
    """The dtype vLLM runs the model in on this device (patches.fitcheck.attention.run_dtype); float16,
    the check's own default, where that module is missing (the fit check then says why)."""
    try:
        from patches.fitcheck.attention import run_dtype as decided
    except ImportError:
        return "float16"
    return decided(config, cc[0] * 10 + cc[1], setting)


def lookup_fit(table: str, config: ModelConfig, model_config: str, cc: tuple[int, int], limit: int,
               tensor_parallel: int = 1, dtype: str = "float16", towers: bool = False):
    """The fit table's verdicts for the model in `dtype` (with its multimodal towers when `towers`; a
    Lookup), None when the lookup module is missing."""
    try:
        from patches.fitcheck.lookup import lookup
    except ImportError:
        return None
    return lookup(table, config, cc[0] * 10 + cc[1], limit, model_config, tensor_parallel, dtype, towers)
