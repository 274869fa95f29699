"""A model with an audio tower needs vLLM's audio extra (av, soundfile, scipy, ...); an image built
without EXTRAS=audio serves text and then answers every audio request "install vllm[audio]".
The packages are vLLM's own `audio` extra as its installed metadata lists them."""
from __future__ import annotations

import importlib.metadata
import re
from typing import Callable, Mapping

from contract.verdict import Result, failed, passed

NAME = "audio"
AUDIO_CONFIG_KEYS = ("audio_config", "audio_encoder_config", "audio_tower_config")
AUDIO_MODEL_TYPES = ("whisper", "qwen2_audio", "ultravox", "voxtral")
EXTRA = re.compile(r"""^\s*([A-Za-z0-9][A-Za-z0-9._-]*).*;.*\bextra\s*==\s*["']audio["']""")


def audio_tower(config: Mapping | None) -> str | None:
    """What in config.json shows an audio tower (the key or the model type), or None."""
    config = config or {}
    for key in AUDIO_CONFIG_KEYS:
        if isinstance(config.get(key), dict):
            return key
    model_type = str(config.get("model_type", ""))
    return f"model_type {model_type}" if model_type in AUDIO_MODEL_TYPES else None


def audio_requirements(requires: list[str] | None) -> list[str]:
    """The distribution names of vLLM's `audio` extra from its Requires-Dist lines."""
    return [match.group(1) for match in map(EXTRA.match, requires or []) if match]


def judge_audio(config: Mapping | None, required: list[str], installed: Callable[[str], bool]) -> Result:
    tower = audio_tower(config)
    if tower is None:
        return passed(NAME, "the model has no audio tower")
    missing = [name for name in required if not installed(name)]
    if missing:
        return failed(NAME, f"the model has an audio tower ({tower}) but this image lacks vLLM's audio extra "
                            f"({', '.join(missing)} not installed): audio requests would fail",
                      "build with EXTRAS=audio (python3 build.py --extras audio)")
    return passed(NAME, f"the model has an audio tower ({tower}); the audio extra is installed")


def distribution_installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def check_audio(config: Mapping | None) -> Result:
    try:
        requires = importlib.metadata.requires("vllm")
    except importlib.metadata.PackageNotFoundError:
        requires = None
    return judge_audio(config, audio_requirements(requires), distribution_installed)
