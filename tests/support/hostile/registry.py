"""Every entry point that reads outside data, registered with how to drive it, and the invariants
stated once (`violations`).

A Surface names the build.py subcommand (or bench, entrypoint mode, image command) it belongs to,
the product modules whose readers it reaches (tests/unit/test_hostile.py fails when a module that
calls a door reader of outside data, or a build.py subcommand, is in no surface), the hostile file
kinds it takes, and `trial(folder, kind)`: the process to run on one hostile input.

The invariants, for every trial:
  refusal    exit 2 with ONE line on stderr naming the input and its fix (a surface that reports in
             check lines instead: exit 1 and that check's FAIL line naming the input, "-> fix:");
             a kind in files.MAY_BE_ACCEPTED may instead be accepted (exit 0); never a traceback
  time       ended within the surface's deadline plus tests/support/slack.py's scheduling slack
  memory     peak RSS within the surface's cap
  secrets    no planted secret in any output or any file written
  contained  nothing written outside the target folder (the repository included)
  previous   after a failure the previous good state (units, model folder, manifest) byte-identical
  children   nothing it started outlives it
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Callable

from hypothesis import strategies as st

from buildtool.audit import QUERY_DEADLINE_S as AUDIT_QUERY_DEADLINE_S
from entrypoint.fetch.hub_client import API_DEADLINE_S as FETCH_API_DEADLINE_S
from tests.support.hostile import files as hostile
from tests.support.hostile.drive import REPO, Outcome, base_env, python, tree_state
from tests.support.slack import SCHEDULING_SLACK_S

MiB = 2**20
SECRET = "hf_plantedHostileSecret0a1b2c3d"     # HF_TOKEN, OPENAI_API_KEY, a key file, a URL password
KEY_SECRET = "sk-plantedHostileKey-4e5f6a"
SECRETS = (SECRET, KEY_SECRET)
FIX_WORDS = ("give", "pass", "set", "use", "put", "write", "save", "replace", "remove", "rename", "fix",
             "download", "make", "check", "unset", "move", "run", "point", "choose", "expected", "raise", "see")
# /dev/null reads as an empty file and a symlink loop as a missing one in every reader here: those two
# kinds are driven where a model folder is read (the entrypoint), the others everywhere.
TEXT_KINDS = (hostile.FIFO, hostile.DEV_ZERO, hostile.FOLDER, hostile.HUGE, hostile.NOT_UTF8, hostile.BOM_CRLF,
              hostile.EMPTY, hostile.MISSING)
JSON_KINDS = TEXT_KINDS + (hostile.DEEP, hostile.OTHER_SCHEMA)
BLOCKING_KINDS = (hostile.FIFO, hostile.DEV_ZERO, hostile.HUGE)  # where the same reader is driven again
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@dataclasses.dataclass
class Trial:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    names: tuple[str, ...]                  # the input as a refusal must name it (any one of them)
    target: Path | None = None              # where the surface may write; its state must survive a failure
    check: str | None = None                # refusals are this check's FAIL line (exit 1), not exit 2
    report: str | None = None               # or a report line matching this (exit 1: a check failed)
    accept_ok: bool = False                 # a rightly accepted input (exit 0) passes


@dataclasses.dataclass(frozen=True)
class Surface:
    name: str
    command: str                            # build.py SUBCOMMAND, "model fetch", "entrypoint", "bench", "image fetch"
    reads: tuple[str, ...]                  # product modules whose readers it drives
    kinds: tuple[str, ...]
    trial: Callable[[Path, str], Trial]
    deadline_s: float = 10.0                # a local file is read in far less; a hang is killed past it + slack
    memory_cap_bytes: int = 1024 * MiB
    owner: str = ""                         # the helper fixing it now, when its cases fail until that merge
    tier: str = "unit"
    # kinds of a remote's failure this surface answers with exit 1, "run it again": the fetch resumes what
    # it kept (a stall, a refusal without the Hub's error code), as a failed check; still one line with its fix
    run_again: tuple[str, ...] = ()


def _build_py(*words: str) -> list[str]:
    return python(str(REPO / "build.py"), *words)


def _parse_only(*words: str) -> list[str]:
    """build.py's own parse, as main() runs it, without running the command (a build or a fetch
    container never starts here): exit 2 and the one line main prints, or exit 0 when accepted."""
    code = ("import sys, build\nfrom door.problem import UsageError\n"
            "try:\n    build.parse(sys.argv[1:])\nexcept UsageError as exc:\n"
            "    print(exc, file=sys.stderr)\n    sys.exit(2)\n")
    return python("-c", code, *words)


def _private(folder: Path) -> None:
    """tests/conftest.py opens every test folder to all uids (0777); a surface's HOME under one is a
    folder another user could write, which platformdirs (pip-audit's cache) rightly refuses. These
    surfaces run as this uid alone: their folders go back to 0755."""
    for path in (folder, *folder.parents):
        if "pytest-of-" not in str(path):
            break
        if path.stat().st_mode & 0o022 and path.stat().st_uid == os.getuid():
            path.chmod(0o755)


def _env(folder: Path, **extra: str) -> dict[str, str]:
    _private(folder)
    home = folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    return base_env(home, PYTHONDONTWRITEBYTECODE="1", HF_TOKEN=SECRET, OPENAI_API_KEY=KEY_SECRET, **extra)


def _input(folder: Path, kind: str, name: str, valid: bytes) -> Path:
    return hostile.make(kind, folder / "inputs", name, valid)


# --- build.py's flags (parsed only: no build starts) ------------------------------------------------

def ca_cert_trial(command: str) -> Callable[[Path, str], Trial]:
    def trial(folder: Path, kind: str) -> Trial:
        path = _input(folder, kind, "ca.pem", PEM)
        return Trial(_parse_only(command, "--ca-cert", str(path)), _env(folder), folder, ("--ca-cert", "ca.pem"),
                     accept_ok=kind in hostile.MAY_BE_ACCEPTED)
    return trial


def token_file_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "token", SECRET.encode() + b"\n")
    return Trial(_parse_only("model", "fetch", "org/model", "--model-dir", str(folder / "models"), "--token-file",
                             str(path)), _env(folder), folder, ("--token-file", "token"),
                 accept_ok=kind in hostile.MAY_BE_ACCEPTED + (hostile.DEEP, hostile.OTHER_SCHEMA, hostile.NOT_UTF8))


# --- units -----------------------------------------------------------------------------------------

GOOD_ENV = b"MODEL=/models/chat\nSERVED_MODEL_NAME=chat\nMAX_MODEL_LEN=4096\n"


def units_trial(*extra: str) -> Callable[[Path, str], Trial]:
    def trial(folder: Path, kind: str) -> Trial:
        path = _input(folder, kind, "chat.env", GOOD_ENV)
        out = folder / "out"
        return Trial(_build_py("units", "--defaults", "--env-file", str(path), "--out", str(out), *extra),
                     _env(folder), folder, ("--env-file", "chat.env"), target=out,
                     accept_ok=kind in hostile.MAY_BE_ACCEPTED)
    return trial


def units_good_state(folder: Path, *extra: str) -> list[str]:
    """The argv that writes the previous good units into folder/out (run before each trial)."""
    good = folder / "good.env"
    good.write_bytes(GOOD_ENV)
    return _build_py("units", "--defaults", "--env-file", str(good), "--out", str(folder / "out"), *extra)


# --- smoke, audit, lock ------------------------------------------------------------------------------

def smoke_key_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "key", KEY_SECRET.encode() + b"\n")
    return Trial(_build_py("smoke", "http://127.0.0.1:9/", "--api-key-file", str(path), "--timeout", "2"),
                 _env(folder), folder, ("--api-key-file", "key"), accept_ok=False)


GOOD_LOCK = b"packaging==24.1 \\\n    --hash=sha256:" + b"0" * 64 + b"\n"
OSV_RECORD = {"id": "PYSEC-0000-1", "modified": "2024-01-01T00:00:00Z",
              "affected": [{"package": {"ecosystem": "PyPI", "name": "packaging"},
                            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.0"}]}]}]}


def audit_database_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "osv.zip" if kind in hostile.ARCHIVE_KINDS else "osv.json",
                  json.dumps(OSV_RECORD).encode())
    lock = folder / "inputs" / "good.lock"
    lock.write_bytes(GOOD_LOCK)
    return Trial(_build_py("audit", "--lock", str(lock), "--database", str(path)), _env(folder), folder,
                 ("--database", path.name), accept_ok=kind in hostile.MAY_BE_ACCEPTED)


def audit_lock_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "requirements.lock", GOOD_LOCK)
    database = folder / "inputs" / "osv.json"
    database.write_text(json.dumps(OSV_RECORD))
    return Trial(_build_py("audit", "--lock", str(path), "--database", str(database)), _env(folder), folder,
                 ("--lock", "requirements.lock"), accept_ok=kind in hostile.MAY_BE_ACCEPTED)


def lock_flags_trial(folder: Path, kind: str) -> Trial:
    """`build.py lock` reads the package index through uv (a child); what a user hands it is the
    version word: a hostile file's name as --vllm-version must be refused at parse."""
    path = _input(folder, kind, "0.33.0", b"")
    return Trial(_parse_only("lock", "--vllm-version", str(path)), _env(folder), folder, ("--vllm-version",))


# --- benches -----------------------------------------------------------------------------------------

def bench_config_trial(folder: Path, kind: str) -> Trial:
    from tests.support.model_files import GEMMA4_TEXT_CONFIG

    config = json.dumps({"architectures": ["Gemma4ForConditionalGeneration"], "text_config": GEMMA4_TEXT_CONFIG})
    path = _input(folder, kind, "config.json", config.encode())
    return Trial(python(str(REPO / "bench" / "preflight"), "--fit-decision", "--table", str(folder / "absent.json"),
                        "--config", str(path), "--runs", "1"), _env(folder), folder, ("--config", "config.json"),
                 accept_ok=kind in hostile.MAY_BE_ACCEPTED)


def bench_ceiling_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    return Trial(python(str(REPO / "bench" / "ceiling"), str(path)), _env(folder), folder,
                 ("model.safetensors",), accept_ok=False)


# --- the entrypoint (on the host: the image tier runs the same in the image) -------------------------

def _model(folder: Path) -> Path:
    from tests.support.model_files import write_model_dir

    model = folder / "model"
    if not model.exists():
        write_model_dir(model)
    return model


def entrypoint_key_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "api-key", KEY_SECRET.encode() + b"\n")
    env = _env(folder, MODEL=str(_model(folder)), API_KEY_FILE=str(path))
    env.pop("OPENAI_API_KEY")
    return Trial(python("-m", "entrypoint", "print-command"), env, folder, ("API_KEY_FILE",),
                 accept_ok=kind in hostile.MAY_BE_ACCEPTED)


def entrypoint_model_trial(folder: Path, kind: str) -> Trial:
    model = _model(folder)
    valid = (model / "config.json").read_bytes()
    (model / "config.json").unlink()
    hostile.make(kind, model, "config.json", valid)
    return Trial(python("-m", "entrypoint", "check"), _env(folder, MODEL=str(model)), folder,
                 ("config.json", str(model)), check="model", accept_ok=False)


def entrypoint_token_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "hf-token", SECRET.encode() + b"\n")
    env = _env(folder, MODEL=str(_model(folder)), HF_TOKEN_PATH=str(path))
    env.pop("HF_TOKEN")
    return Trial(python("-m", "entrypoint", "print-command"), env, folder, ("HF_TOKEN_PATH",),
                 accept_ok=kind == hostile.MISSING)  # no file is no token: the Hub is asked anonymously


def image_fetch_trial(folder: Path, kind: str) -> Trial:
    """The image's fetch run on the host with its Hub endpoint on a hostile peer (`kind` names the
    peer's behaviour; the peer is started by the test: HF_ENDPOINT is filled in there)."""
    models = folder / "models"
    return Trial(python("-m", "entrypoint", "fetch", "org/model", "--gpu", "sm75", "--models-dir", str(models)),
                 _env(folder), folder, ("org/model", "HF_ENDPOINT"), target=models)


def audit_online_trial(folder: Path, kind: str) -> Trial:
    """`audit --osv-url` (pip-audit's reads, on the OSV API a mirror serves) against a hostile peer;
    the test fills in the URL (with a password in it: a secret)."""
    lock = folder / "inputs" / "good.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(GOOD_LOCK)
    return Trial(_build_py("audit", "--lock", str(lock), "--osv-url", "OSV_URL"), _env(folder), folder,
                 ("--osv-url",))


def fitcheck_config_trial(folder: Path, kind: str) -> Trial:
    from tests.support.model_files import GEMMA4_TEXT_CONFIG

    config = json.dumps({"architectures": ["Gemma4ForConditionalGeneration"], "text_config": GEMMA4_TEXT_CONFIG})
    path = _input(folder, kind, "config.json", config.encode())
    return Trial(python("-m", "patches.fitcheck", "--device", "sm75", "--model-config", str(path)), _env(folder),
                 folder, ("config.json", "--model-config"))


def fitcheck_launcher_trial(folder: Path, kind: str) -> Trial:
    path = _input(folder, kind, "triton_unified_attention.py", b"def unified_attention():\n    pass\n")
    config = folder / "inputs" / "good.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
                                  "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2}))
    return Trial(python("-m", "patches.fitcheck", "--device", "sm75", "--model-config", str(config), "--launcher",
                        str(path)), _env(folder), folder, ("--launcher", "vllm"))  # accepted: no vLLM on a host


def smoke_url_trial(folder: Path, kind: str) -> Trial:
    """`smoke URL` against a hostile server: the test fills in the URL; a key is sent (a secret)."""
    key = folder / "inputs" / "key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(KEY_SECRET + "\n")
    return Trial(_build_py("smoke", "SMOKE_URL", "--api-key-file", str(key), "--timeout", "5", "--request-timeout", "5",
                           "--connect-grace", "1"), _env(folder), folder, ("http://",),
                 report=r"(NOT READY|FAIL)\b")  # smoke reports an endpoint that fails its contract: exit 1


def image_fetch_from_trial(folder: Path, kind: str) -> Trial:
    """`fetch --from COPY`: a model fetched elsewhere, imported with no network; the copy (a folder
    or a tarball) is the hostile input."""
    source = hostile.make(kind, folder / "inputs", "copy.tar", b"{}")
    models = folder / "models"
    return Trial(python("-m", "entrypoint", "fetch", "org/model", "--gpu", "sm75", "--models-dir", str(models),
                        "--from", str(source)), _env(folder), folder, ("--from", "copy.tar"), target=models)


FROM_KINDS = (hostile.FIFO, hostile.DEV_ZERO, hostile.FOLDER, hostile.HUGE, hostile.NOT_UTF8, hostile.EMPTY,
              hostile.MISSING, hostile.TAR_SLIP)
PEER_KINDS = ("stall-after-headers", "huge-content-length", "auth-echo-403", "endless-body")


def _fetch_url(trial: Trial, url: str) -> None:
    trial.env["HF_ENDPOINT"] = url


def _smoke_url(trial: Trial, url: str) -> None:
    trial.argv = [url if word == "SMOKE_URL" else word for word in trial.argv]


def _osv_url(trial: Trial, url: str) -> None:
    with_password = url.replace("http://", f"http://mirror:{SECRET}@") + "/v1/query"
    trial.argv = [with_password if word == "OSV_URL" else word for word in trial.argv]

SURFACES: tuple[Surface, ...] = (
    Surface("build --ca-cert", "build", ("buildtool/flags.py", "buildtool/build_plans.py"), TEXT_KINDS, ca_cert_trial("build")),
    Surface("base --ca-cert", "base", ("buildtool/flags.py",), BLOCKING_KINDS, ca_cert_trial("base")),
    Surface("vehicle --ca-cert", "vehicle", ("buildtool/flags.py",), BLOCKING_KINDS, ca_cert_trial("vehicle")),
    Surface("model fetch --token-file", "model", ("buildtool/model_fetch.py", "buildtool/flags.py"), TEXT_KINDS,
            token_file_trial, owner="fetch helper (buildtool/model_fetch.py: --token-file type=flags.secret_file)"),
    Surface("units --env-file", "units", ("buildtool/units/options.py", "buildtool/units/envfile.py"), TEXT_KINDS, units_trial(),
            owner="units helper"),
    Surface("units --monitoring (the monitoring rules)", "units", ("buildtool/units/monitoring.py",), BLOCKING_KINDS,
            units_trial("--monitoring"), owner="units helper"),
    Surface("smoke --api-key-file", "smoke", ("buildtool/endpoint/__init__.py",), TEXT_KINDS, smoke_key_trial),
    # a folder is a database the audit reads (OSV's JSON files in it): tests/unit/test_audit_sources.py holds
    # a folder of another schema or ecosystem to its one-line refusal
    Surface("audit --database (offline)", "audit", ("buildtool/audit.py",),
            tuple(k for k in JSON_KINDS if k != hostile.FOLDER) + hostile.ARCHIVE_KINDS,
            audit_database_trial, owner="audit helper"),
    Surface("audit --lock (the lock's reader)", "audit", ("buildtool/lock.py", "buildtool/audit.py"), TEXT_KINDS,
            audit_lock_trial, owner="audit helper"),
    Surface("lock --vllm-version", "lock", ("buildtool/lock.py",), (hostile.FIFO, hostile.FOLDER), lock_flags_trial),
    Surface("bench/preflight --config", "bench", ("tooling/preflight_times.py", "patches/fitcheck/fit_table.py"), JSON_KINDS,
            bench_config_trial),
    Surface("bench/ceiling CHECKPOINT", "bench", ("tooling/safetensors_ceiling.py",), TEXT_KINDS, bench_ceiling_trial),
    Surface("entrypoint API_KEY_FILE", "entrypoint", ("entrypoint/api_key.py",), TEXT_KINDS, entrypoint_key_trial),
    Surface("entrypoint model folder", "entrypoint",
            ("entrypoint/checks/model.py", "entrypoint/checks/cache.py", "entrypoint/image_facts.py",
             "entrypoint/start_ledger.py", "entrypoint/start_report.py"), hostile.FILE_KINDS, entrypoint_model_trial),
    Surface("entrypoint HF_TOKEN_PATH", "entrypoint", ("entrypoint/hub_access.py",), TEXT_KINDS, entrypoint_token_trial),
    Surface("image fetch (entrypoint fetch) against a hostile Hub", "image fetch",
            ("entrypoint/fetch/manifest.py", "entrypoint/fetch/hub_client.py", "entrypoint/fetch/fetch_model.py",
             "entrypoint/fetch/listing.py"), PEER_KINDS,
            image_fetch_trial, deadline_s=FETCH_API_DEADLINE_S, owner="fetch helper",
            run_again=("stall-after-headers", "auth-echo-403")),
    Surface("image fetch --from COPY", "image fetch", ("entrypoint/fetch/imported.py",
                                                       "entrypoint/fetch/manifest.py"), FROM_KINDS,
            image_fetch_from_trial, owner="fetch helper"),
    Surface("smoke URL against a hostile server", "smoke", ("buildtool/endpoint/client.py", "buildtool/smoke/expect.py"),
            PEER_KINDS,
            smoke_url_trial, deadline_s=15.0, owner="smoke helper"),
    Surface("patches.fitcheck --model-config", "image build", ("patches/fitcheck/attention.py",), JSON_KINDS,
            fitcheck_config_trial),
    Surface("patches.fitcheck --launcher", "image build", ("patches/fitcheck/proof.py",), TEXT_KINDS,
            fitcheck_launcher_trial),
    Surface("audit --osv-url (online) against a hostile OSV mirror", "audit", ("buildtool/audit.py",), PEER_KINDS,
            audit_online_trial, deadline_s=AUDIT_QUERY_DEADLINE_S, owner="audit helper"),
)
PEER_URL = {"image fetch (entrypoint fetch) against a hostile Hub": _fetch_url,
            "smoke URL against a hostile server": _smoke_url,
            "audit --osv-url (online) against a hostile OSV mirror": _osv_url}

# Driven by Hypothesis in tests/unit/test_hostile.py (words and file contents, not file kinds): the
# entrypoint's argv (VLLM_EXTRA_ARGS), build.py's word flags (build's, `model fetch REPO`, `verify
# IMAGE`), units' env values. Registered here so that the coverage test counts them.
WORD_SURFACES = {
    "entrypoint argv": ("entrypoint", ("entrypoint/argv.py", "entrypoint/argv_files.py", "entrypoint/settings.py",
                                       "entrypoint/checks/audio.py", "imagefacts/value_types.py")),
    "build.py word flags": ("build", ("buildtool/flags.py",)),
    "model fetch REPO": ("model", ("buildtool/model_fetch.py",)),
    "verify IMAGE": ("verify", ("buildtool/flags.py",)),
    "units env values": ("units", ("buildtool/units/options.py",)),
}


LOOKALIKE = st.sampled_from(["\u2212\u2212max-model-len", "\uff0d\uff0dmax-model-len", "\u2013\u2013port", "@args.txt",
                             "--trust-remote-code", "--api-key", "--model", "--port=0", "\x00", "\n", "$(id)", "'", '"'])
ARGV_WORDS = st.lists(st.one_of(LOOKALIKE, st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                                                   max_size=40)), min_size=1, max_size=4)


def registered_commands() -> set[str]:
    return {s.command for s in SURFACES} | {command for command, _ in WORD_SURFACES.values()}


def registered_readers() -> set[str]:
    return {m for s in SURFACES for m in s.reads} | {m for _, reads in WORD_SURFACES.values() for m in reads}


def secrets_in(text: str, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    return [secret for secret in secrets if secret in text]


def written_secrets(root: Path, secrets: tuple[str, ...] = SECRETS, skip: tuple[Path, ...] = ()) -> list[str]:
    """Files under `root` (but `skip`) holding a planted secret."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip]
        for name in names:
            path = Path(folder, name)
            if path in skip or not path.is_file() or path.is_symlink() or path.stat().st_size > 16 * MiB:
                continue
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


def violations(surface: Surface, kind: str, trial: Trial, outcome: Outcome, before: dict, after: dict,
               target_before: dict, target_after: dict, written: list[str]) -> list[str]:
    """Every invariant the outcome breaks, each in one line (empty: it held)."""
    found = []
    err_lines = [line for line in outcome.stderr.strip().splitlines() if line.strip()]
    if outcome.returncode is None:
        found.append(f"hang: still running after {outcome.wall_s:.0f} s, killed")
    elif "Traceback (most recent call last)" in outcome.output:
        found.append("traceback: " + (err_lines[-1] if err_lines else "")[:200])
    elif trial.accept_ok and outcome.returncode == 0:
        pass
    elif trial.check is not None:
        lines = [line for line in outcome.stdout.splitlines() if re.match(rf"FAIL\s+{trial.check}\b", line)]
        if outcome.returncode != 1 or not lines:
            found.append(f"expected exit 1 with a FAIL {trial.check} line, got exit {outcome.returncode}: "
                         f"{(err_lines or outcome.stdout.splitlines() or [''])[-1][:200]}")
        elif not any(name in lines[0] for name in trial.names) or "fix:" not in lines[0]:
            found.append(f"the {trial.check} line names neither {trial.names} nor a fix: {lines[0][:200]}")
    elif trial.report is not None:
        lines = [line for line in outcome.stdout.splitlines() if re.match(trial.report, line)]
        if outcome.returncode != 1 or not lines:
            found.append(f"expected exit 1 with a report line {trial.report!r}, got exit {outcome.returncode}: "
                         f"{(outcome.stdout.splitlines() or err_lines or [''])[-1][:200]}")
        elif not any(name in outcome.stdout for name in trial.names):  # the report's head names the input
            found.append(f"the report names none of {trial.names}: {outcome.stdout[:200]}")
        elif not any(w in lines[0].lower() for w in FIX_WORDS):
            found.append(f"the report line gives no fix: {lines[0][:200]}")
    elif outcome.returncode != (1 if kind in surface.run_again else 2):
        found.append(f"exit {outcome.returncode}, expected {1 if kind in surface.run_again else 2} (a refusal): "
                     f"{(err_lines or outcome.stdout.splitlines() or ['no output'])[-1][:200]}")
    elif len(err_lines) != 1:
        found.append(f"{len(err_lines)} stderr lines, expected one: {' | '.join(err_lines)[:300]}")
    else:
        line = err_lines[0]
        if not any(name in line for name in trial.names):
            found.append(f"the refusal names none of {trial.names}: {line[:200]}")
        if not any(word in line.lower() for word in FIX_WORDS):
            found.append(f"the refusal gives no fix: {line[:200]}")
    if outcome.returncode is not None and outcome.wall_s > surface.deadline_s + SCHEDULING_SLACK_S:
        found.append(f"took {outcome.wall_s:.1f} s, past {surface.deadline_s:g} s + {SCHEDULING_SLACK_S:g} s slack")
    if outcome.peak_rss_bytes > surface.memory_cap_bytes:
        found.append(f"peak memory {outcome.peak_rss_bytes // MiB} MiB, past the {surface.memory_cap_bytes // MiB} MiB cap")
    shown = secrets_in(outcome.output)
    if shown:
        found.append(f"a planted secret in its output ({len(shown)})")
    if written:
        found.append(f"a planted secret in a written file: {written[0]}")
    if before != after:
        changed = sorted(set(before.items()) ^ set(after.items()))
        found.append(f"wrote outside its target: {changed[0][0]}")
    if outcome.returncode not in (0, None) and target_before != target_after:
        changed = sorted(set(target_before.items()) ^ set(target_after.items()))
        found.append(f"the previous good state changed on failure: {changed[0][0]}")
    if outcome.survivors:
        found.append("a process it started outlived it")
    return found


def attempt(surface: Surface, kind: str, folder: Path, trial: Trial, run) -> list[str]:
    """Runs `trial` (after its good state when the surface has one) and judges it."""
    skip = (folder / "inputs", folder / "home") + ((trial.target,) if trial.target else ())
    before = tree_state(folder, skip)
    target_before = tree_state(trial.target) if trial.target else {}
    outcome = run(trial.argv, trial.env, trial.cwd)
    written = written_secrets(folder, skip=(folder / "inputs",))
    after = tree_state(folder, skip)
    target_after = tree_state(trial.target) if trial.target else {}
    return violations(surface, kind, trial, outcome, before, after, target_before, target_after, written)
