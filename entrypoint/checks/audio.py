"""A model's audio tower against what the image can do with audio.

Measured in the PyPI base of vLLM 0.33.0 without vLLM's `audio` extra (av, scipy, soundfile, soxr,
mistral_common[audio]): Gemma 4's multimodal model class imports, transformers' Gemma 4 audio
feature extractor turns the 30 s of silence vLLM's memory profiling feeds it into features
(numpy only), and vLLM resamples with torchaudio, a hard dependency. So the tower loads and is
profiled without the extra. What the extra adds is decoding an audio *file* at request time:
vLLM tries torchcodec (a hard dependency, but it needs a system FFmpeg), then soundfile, then
PyAV, and without any of them each audio request answers "Please install vllm[audio]".

Hence the verdict turns on whether the operator asks for audio: `--limit-mm-per-prompt` with an
audio count above 0 and no decoder fails (every audio request would fail); audio off (count 0,
or `--language-model-only`) passes; not stated passes, saying that audio input needs the extra.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Callable, Sequence

from contract.model_config import ModelConfig
from contract.verdict import Result, failed, passed

from .. import linker_cache
from door import files

NAME = "audio"
AUDIO_CONFIG_KEYS = ("audio_config", "audio_encoder_config", "audio_tower_config")
AUDIO_MODEL_TYPES = ("whisper", "qwen2_audio", "ultravox", "voxtral")
LIMIT_FLAG = "--limit-mm-per-prompt"
# vLLM 0.33.0's audio decoders in the order it tries them (vllm/multimodal/media/audio.py)
DECODERS = ("torchcodec", "soundfile", "av")
FFMPEG_SONAME = "libavcodec.so"
FIX = "build with the audio extra (python3 build.py --extras audio), or turn audio input off: " \
      "--limit-mm-per-prompt '{\"audio\": 0}' in VLLM_EXTRA_ARGS"


def audio_tower(config: ModelConfig | None) -> str | None:
    """What in config.json shows an audio tower (the key or the model type), or None."""
    if config is None:
        return None
    for key in AUDIO_CONFIG_KEYS:
        if config.top.object(key) is not None:
            return key
    return f"model_type {config.model_type}" if config.model_type in AUDIO_MODEL_TYPES else None


def requested_audio(limit, text_only: bool = False) -> int | None:
    """The audio items per prompt the server's arguments ask for (0: audio off), or None when they
    do not say (vLLM then accepts audio). `limit`: the value of `--limit-mm-per-prompt` as the
    entrypoint's argv parser hands it over (JSON text; the dotted `--limit-mm-per-prompt.audio N`
    form arrives as the same JSON), `text_only`: `--language-model-only`."""
    if text_only:
        return 0
    if isinstance(limit, str):
        try:
            limit = files.word_json(limit)
        except (ValueError, RecursionError):
            return None  # vLLM refuses it at startup, naming the flag
    if isinstance(limit, dict) and "audio" in limit:
        return _count(limit["audio"])
    return None


def _count(value) -> int | None:
    if isinstance(value, dict):
        value = value.get("count")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def judge_audio(config: ModelConfig | None, decoders: Sequence[str], requested: int | None) -> Result:
    """`decoders`: the audio decoders this image has, in vLLM's order; `requested`: requested_audio()."""
    tower = audio_tower(config)
    if tower is None:
        return passed(NAME, "the model has no audio tower")
    if requested == 0:
        return passed(NAME, f"the model has an audio tower ({tower}); audio input is off")
    if decoders:
        return passed(NAME, f"the model has an audio tower ({tower}); audio files decode with {decoders[0]}")
    if requested is not None:
        return failed(NAME, f"the model has an audio tower ({tower}) and {LIMIT_FLAG} asks for {requested} audio "
                            "item(s), but this image has no audio decoder (soundfile, PyAV, or torchcodec with a "
                            "system FFmpeg): every audio request would fail", FIX)
    return passed(NAME, f"the model has an audio tower ({tower}); vLLM loads it without the audio extra, so text "
                        "and images serve; audio input needs an image built with --extras audio")


def available_decoders(installed: Callable[[str], bool], ffmpeg: Callable[[], bool]) -> list[str]:
    """vLLM's audio decoders this image can run: torchcodec only with FFmpeg's libraries."""
    return [name for name in DECODERS if installed(name) and (name != "torchcodec" or ffmpeg())]


def module_installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def ffmpeg_present() -> bool:
    """Whether the loader finds FFmpeg's libavcodec, which torchcodec links against. (ctypes.util's
    find_library asks the linker cache too, but then runs gcc and ld where it is absent: 20 ms.)"""
    return linker_cache.loader_finds(FFMPEG_SONAME, linker_cache.ldconfig_listing(), os.environ)


def check_audio(config: ModelConfig | None, extras=None) -> Result:
    """`extras`: what the server's extra words set, by dest (entrypoint.argv.Extras), or None."""
    if audio_tower(config) is None:  # the common case answers without looking at the image
        return judge_audio(config, [], None)
    requested = requested_audio(extras.get("limit_mm_per_prompt"), bool(extras.get("language_model_only"))) \
        if extras is not None else None
    return judge_audio(config, available_decoders(module_installed, ffmpeg_present), requested)
