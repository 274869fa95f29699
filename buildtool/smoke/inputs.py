"""Which inputs the served model takes beyond text, and where smoke learned it.

In this order:
1. `--modalities image,audio` (or `text`) states them: a named input must pass, an unnamed one is
   not sent.
2. The served model's config.json: a `vision_config` means image input, an audio tower's config
   (entrypoint/checks/audio.py's keys) audio input. Read through the preflight's own reader
   (entrypoint/checks/model.py, door/files.py: capped, regular files only) from `--model-config PATH`
   (the model's folder on this host, or its config.json), else from the folder GET /v1/models names
   as the model's `root`, when this host has it: for a root under /models (where compose and Quadlet
   mount the models folder), the same path under $MODEL_DIR (default ~/models, as the units), else
   the root itself (`vllm serve /path` on this host). An input the config has is asked; one it lacks is
   not sent, and its row is skipped naming the config.
3. Neither (smoke runs on another host, or the model came from the Hub by name): ask the server.
   The image and audio checks are sent, and a refusal in vLLM's own words skips them; the name
   decides only whether "install vllm[audio]" is a missing extra (a model known to take audio) or
   no audio at all.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from buildtool.units.spec import DEFAULT_MODEL_DIR, MODEL_MOUNT
from contract.model_config import ConfigProblem, ModelConfig
from door import files
from door.problem import Problem, UsageError
from entrypoint.checks.audio import audio_tower
from entrypoint.checks.model import read_config
from buildtool.endpoint.replies import ModelCard

VISION_CONFIG_KEYS = ("vision_config",)
MODEL_DIR_ENV = "MODEL_DIR"
CONFIG_FLAG = "--model-config"
# Models known to carry an audio tower, for when no config.json is at hand (step 3): vLLM decodes the
# audio (asking for vllm[audio]) before it checks that the model takes any.
AUDIO_MODELS = re.compile(r"gemma-4-(E2B|E4B|12B)|gemma-3n", re.I)


@dataclass(frozen=True)
class Inputs:
    modalities: frozenset[str] | None   # None: ask the server (a refusal in its words skips)
    source: str                         # where they came from, for the report
    stated: bool = False                # --modalities: a named input must pass, whatever the server says
    takes_audio: bool = False           # an audio tower known (config or name): "install vllm[audio]" fails

    def to_dict(self) -> dict:
        listed = None if self.modalities is None else ["text", *sorted(self.modalities)]
        return {"modalities": listed, "source": self.source}


def towers(config: ModelConfig) -> frozenset[str]:
    """The inputs beyond text a config.json gives the model."""
    found = set()
    if any(config.top.object(key) is not None for key in VISION_CONFIG_KEYS):
        found.add("image")
    if audio_tower(config) is not None:
        found.add("audio")
    return frozenset(found)


def from_config(path: str) -> Inputs:
    """The inputs of the config.json at `path` (a model folder, or the file); Problem or
    ConfigProblem when it cannot be read."""
    config_file = path if os.path.isfile(path) else None
    _, config = read_config(os.path.dirname(path) if config_file else path, config_file=config_file)
    found = towers(config)
    shown = files.shown(config_file or os.path.join(path, "config.json"))
    lacks = [f"no {key}" for key, modality in (("vision_config", "image"), ("audio tower", "audio"))
             if modality not in found]
    return Inputs(found, f"{shown}" + (f": {', '.join(lacks)}" if lacks else ""), takes_audio="audio" in found)


def given_config(path: str) -> Inputs:
    """--model-config PATH, read before any request; UsageError when it cannot be."""
    try:
        return from_config(os.path.expanduser(path))
    except Problem as problem:
        raise UsageError(f"{CONFIG_FLAG} {path}: {problem}; {problem.fix}") from None
    except ConfigProblem as problem:
        raise UsageError(f"{CONFIG_FLAG} {path}: {problem}") from None


def host_folders(card: ModelCard | None, env: Mapping[str, str]) -> list[str]:
    """Where this host may hold the served model's folder, from the card's root (else its id)."""
    root = card and (card.root or card.id)
    if not root or not root.startswith("/") or "\0" in root or ".." in root.split("/"):
        return []   # the server's answer names the folder: only an absolute path that climbs nowhere
    folders = []
    if root == MODEL_MOUNT or root.startswith(MODEL_MOUNT + "/"):   # the units' mount: $MODEL_DIR here
        models = os.path.expanduser(env.get(MODEL_DIR_ENV) or DEFAULT_MODEL_DIR)
        folders.append(os.path.join(models, root[len(MODEL_MOUNT):].lstrip("/")))
    return folders + [root]


def found_config(card: ModelCard | None, env: Mapping[str, str]) -> tuple[Inputs | None, str]:
    """The inputs of the first folder of host_folders() holding a config.json, or None and why not."""
    why = "no config.json of the served model on this host"
    for folder in host_folders(card, env):
        if not os.path.isfile(os.path.join(folder, "config.json")):
            continue
        try:
            return from_config(folder), ""
        except (Problem, ConfigProblem) as problem:
            why = str(problem)
    return None, why


def resolve(stated: frozenset[str] | None, given: Inputs | None, card: ModelCard | None,
            env: Mapping[str, str]) -> Inputs:
    """The inputs a run asks, by the order of this module's docstring."""
    if stated is not None:
        return Inputs(stated, "--modalities", stated=True, takes_audio="audio" in stated)
    if given is not None:
        return given
    found, why = found_config(card, env)
    if found is not None:
        return found
    named = card is not None and any(name and AUDIO_MODELS.search(name) for name in (card.id, card.root))
    return Inputs(None, f"{why}: the server's refusals decide", takes_audio=bool(named))
