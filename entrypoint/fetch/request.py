"""The fetch's words parsed once into a typed request; FetchUsage (exit 2) names the word and the fix."""
from __future__ import annotations

import dataclasses
import posixpath
import re

from contract.devices import DEVICES, DeviceLimits

from ..checks.model import REVISION
from ..files import shown

MODELS_DIR = "/models"  # where the units mount the models folder (buildtool/units/spec.py MODEL_MOUNT)
USAGE = ("usage: entrypoint fetch REPO[@REVISION] [--gpu sm75|sm86|...] [--models-dir DIR] [--name NAME] "
         "[--drafter]")
# The Hub's repository id: a name, or owner/name, of letters, digits and - _ . (huggingface_hub validate_repo_id)
REPO_ID = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
DEFAULT_REVISION = "main"


class FetchUsage(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Request:
    repo: str
    revision: str
    gpu: str | None  # a name of contract.devices.DEVICES; None: this host's GPU
    models_dir: str
    name: str
    drafter: bool = False  # a speculative drafter: judged also by the preflight's drafter check

    @property
    def target(self) -> str:
        return posixpath.join(self.models_dir, self.name)

    @property
    def device(self) -> DeviceLimits | None:
        return DEVICES[self.gpu] if self.gpu else None


def parse_model_ref(text: str) -> tuple[str, str]:
    """REPO[@REVISION] -> (repo, revision)."""
    repo, at, revision = text.partition("@")
    if not REPO_ID.fullmatch(repo) or ".." in repo or repo.endswith((".git", ".")):
        raise FetchUsage(f"REPO {shown(text[:120])!r} is not a Hub repository id: give owner/name such as "
                         f"google/gemma-4-E2B-it, optionally @REVISION. {USAGE}")
    if at and not (REVISION.fullmatch(revision) and ".." not in revision):
        raise FetchUsage(f"REVISION {shown(revision[:120])!r} in {shown(text[:120])!r} is not a branch, tag or "
                         f"commit (letters, digits, . _ -): give REPO@main or REPO@<commit>. {USAGE}")
    return repo, revision if at else DEFAULT_REVISION


def parse_gpu(text: str) -> str:
    if text not in DEVICES:
        raise FetchUsage(f"--gpu {shown(text[:80])!r} is not a GPU the fit table knows: give one of {', '.join(DEVICES)}")
    return text


def parse_name(text: str) -> str:
    if not NAME.fullmatch(text) or text.strip(".") == "":
        raise FetchUsage(f"--name {shown(text[:120])!r} is not a folder name (letters, digits, . _ -): give the "
                         "model's folder under the models folder")
    return text


def parse_request(argv: list[str]) -> Request:
    """The words after `fetch`."""
    positional, options, drafter = [], {"--gpu": None, "--models-dir": MODELS_DIR, "--name": None}, False
    words = iter(argv)
    for word in words:
        flag, eq, value = word.partition("=")
        if word == "--drafter":
            drafter = True
        elif flag in options:
            if not eq:
                value = next(words, None)
                if value is None:
                    raise FetchUsage(f"{flag} needs a value. {USAGE}")
            options[flag] = value
        elif word.startswith("-"):
            raise FetchUsage(f"fetch has no option {shown(word[:80])!r}. {USAGE}")
        else:
            positional.append(word)
    if len(positional) != 1:
        raise FetchUsage(f"fetch takes one REPO[@REVISION], got {len(positional)}. {USAGE}")
    repo, revision = parse_model_ref(positional[0])
    gpu = options["--gpu"] and parse_gpu(options["--gpu"])
    models_dir = options["--models-dir"]
    if not models_dir or not posixpath.isabs(models_dir) or "\0" in models_dir or not models_dir.isprintable():
        raise FetchUsage(f"--models-dir {shown(models_dir[:120])!r} is not an absolute path: give the models "
                         f"folder, such as {MODELS_DIR}")
    name = parse_name(options["--name"] if options["--name"] is not None else repo.rsplit("/", 1)[-1])
    return Request(repo, revision, gpu, posixpath.normpath(models_dir), name, drafter)
