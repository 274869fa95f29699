"""The fetch's words parsed once into a typed request; a UsageError (exit 2) names the word and the fix."""
from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import Mapping

from contract.devices import CARDS, DEVICES, DeviceLimits

from ..checks.model import REVISION
from door.files import shown
from door.problem import Problem, UsageError

MODELS_DIR = "/models"  # where the units mount the models folder (buildtool/units/spec.py MODEL_MOUNT)
USAGE = ("usage: entrypoint fetch [REPO[@REVISION]] [--gpu sm75|t4|...] [--models-dir DIR] [--name NAME] "
         "[--drafter] [--from DIR|TARBALL] (no REPO: FETCH_MODEL, into MODEL's folder)")
# The units' fetch step reads what to fetch from the env file it shares with the server: the repository
# (FETCH_MODEL), the target GPU where the step has none (FETCH_GPU), into the folder MODEL names.
ENV_REPO, ENV_GPU, ENV_MODEL = "FETCH_MODEL", "FETCH_GPU", "MODEL"
# The Hub's repository id: a name, or owner/name, of letters, digits and - _ . (huggingface_hub validate_repo_id)
REPO_ID = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
DEFAULT_REVISION = "main"
NOTHING_FIX = "MODEL is served as it is mounted"


@dataclasses.dataclass(frozen=True)
class Request:
    repo: str
    revision: str
    gpu: str | None  # a name of contract.devices.DEVICES or CARDS; None: this host's GPU
    models_dir: str
    name: str
    drafter: bool = False  # a speculative drafter: judged also by the preflight's drafter check
    source: str | None = None  # --from: a folder or tarball made elsewhere, imported instead of downloaded

    @property
    def target(self) -> str:
        return posixpath.join(self.models_dir, self.name)

    @property
    def device(self) -> DeviceLimits | None:
        if not self.gpu:
            return None
        return DEVICES[CARDS[self.gpu].device] if self.gpu in CARDS else DEVICES[self.gpu]

    @property
    def gpu_memory(self) -> int | None:
        """The named card's memory in bytes; None for a bare device name or this host's GPU (whose
        memory the fetch reads from NVML: run.target)."""
        return CARDS[self.gpu].memory if self.gpu in CARDS else None


def parse_model_ref(text: str) -> tuple[str, str]:
    """REPO[@REVISION] -> (repo, revision)."""
    repo, at, revision = text.partition("@")
    if not REPO_ID.fullmatch(repo) or ".." in repo or repo.endswith((".git", ".")):
        raise UsageError(f"REPO {shown(text[:120])!r} is not a Hub repository id: give owner/name such as "
                         f"google/gemma-4-E2B-it, optionally @REVISION. {USAGE}")
    if at and not (REVISION.fullmatch(revision) and ".." not in revision):
        raise UsageError(f"REVISION {shown(revision[:120])!r} in {shown(text[:120])!r} is not a branch, tag or "
                         f"commit (letters, digits, . _ -): give REPO@main or REPO@<commit>. {USAGE}")
    return repo, revision if at else DEFAULT_REVISION


def parse_gpu(text: str, named: str = "--gpu") -> str:
    if text not in DEVICES and text not in CARDS:
        raise UsageError(f"{named} {shown(text[:80])!r} is not a GPU the fit table knows: give a card ("
                         f"{', '.join(CARDS)}: its memory is judged too) or a device ({', '.join(DEVICES)})")
    return text


def parse_name(text: str) -> str:
    if not NAME.fullmatch(text) or text.strip(".") == "":
        raise UsageError(f"--name {shown(text[:120])!r} is not a folder name (letters, digits, . _ -): give the "
                         "model's folder under the models folder")
    return text


def _absolute(text: str, named: str, example: str) -> str:
    if not text or not posixpath.isabs(text) or "\0" in text or not text.isprintable():
        raise UsageError(f"{named} {shown(text[:120])!r} is not an absolute path: give {example}")
    return posixpath.normpath(text)


def parse_request(argv: list[str], env: Mapping[str, str] | None = None) -> Request:
    """The words after `fetch`; without REPO, FETCH_MODEL (and FETCH_GPU, MODEL) from `env`."""
    env = env or {}
    positional, drafter = [], False
    options = {"--gpu": None, "--models-dir": None, "--name": None, "--from": None}
    words = iter(argv)
    for word in words:
        flag, eq, value = word.partition("=")
        if word == "--drafter":
            drafter = True
        elif flag in options:
            if not eq:
                value = next(words, None)
                if value is None:
                    raise UsageError(f"{flag} needs a value. {USAGE}")
            options[flag] = value
        elif word.startswith("-"):
            raise UsageError(f"fetch has no option {shown(word[:80])!r}. {USAGE}")
        else:
            positional.append(word)
    if len(positional) > 1:
        raise UsageError(f"fetch takes one REPO[@REVISION], got {len(positional)}. {USAGE}")
    from_env = not positional
    ref = positional[0] if positional else env.get(ENV_REPO, "").strip()
    if from_env and not ref:
        # the units' fetch step on a host whose model is mounted as it is: nothing to do (exit 0)
        raise Problem(f"no REPO given and {ENV_REPO} is not set: nothing to fetch", NOTHING_FIX, exit_code=0)
    try:
        repo, revision = parse_model_ref(ref)
    except UsageError as usage:
        raise UsageError(f"{ENV_REPO}: {usage}" if from_env else str(usage)) from None
    gpu_text, gpu_named = (options["--gpu"], "--gpu") if options["--gpu"] is not None else (env.get(ENV_GPU, "").strip()
                                                                                            or None, ENV_GPU)
    gpu = gpu_text and parse_gpu(gpu_text, gpu_named)
    model = env.get(ENV_MODEL, "").strip()
    into_model = from_env and options["--models-dir"] is None and options["--name"] is None and model
    if into_model:
        target = _absolute(model, ENV_MODEL, f"the model's folder under {MODELS_DIR}, e.g. {MODELS_DIR}/gemma-4-E2B-it")
        models_dir, name = posixpath.split(target)
        if not NAME.fullmatch(name):
            raise UsageError(f"{ENV_MODEL} {shown(model[:120])!r} does not end in a model folder's name (letters, "
                             f"digits, . _ -): set it to e.g. {MODELS_DIR}/gemma-4-E2B-it")
    else:
        models_dir = _absolute(options["--models-dir"] or MODELS_DIR, "--models-dir", f"the models folder, such as {MODELS_DIR}")
        name = parse_name(options["--name"] if options["--name"] is not None else repo.rsplit("/", 1)[-1])
    source = options["--from"] and _absolute(options["--from"], "--from", "the folder or tarball of a fetch made elsewhere")
    return Request(repo, revision, gpu, models_dir, name, drafter, source)
