"""What runs in fp32 where the engine runs in fp16 (Turing has no bf16; DTYPE=auto resolves to float16
below compute capability 8.0), for a Gemma 4 checkpoint with a vision or audio path.

The Gemma 4 12B (model_type gemma4_unified) embeds image patches with a 6,912-wide dense layer that a
high-contrast patch overflows in fp16; the image's vLLM carries the fp16 upcast (patches/fp16_upcast,
docs/fp16.md), which runs that layer and the LayerNorm after it in fp32. The line names those layers
when the upcast is in the vLLM that will serve, and fails with the fix when it is not. The other Gemma 4
checkpoints' towers run in fp16 as vLLM builds them: the line says no layer of theirs is patched.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from contract import layout
from contract.model_config import ModelConfig
from contract.verdict import Result, failed, passed, warned
from door import files

NAME = "fp16"
UNIFIED_TYPE = "gemma4_unified"
TOWER_KEYS = {"vision": "vision_config", "audio": "audio_config"}
REBUILD = ("vLLM was reinstalled over the patched one: rebuild the image with `python3 build.py` (it applies "
           "the fp16 upcast), or run `python3 -m patches.fp16_upcast apply` in it")


def paths(config: ModelConfig | None) -> tuple[str, ...]:
    """The multimodal paths a Gemma 4 config.json carries (vision, audio); () for any other model."""
    if config is None or not config.model_type.startswith("gemma4"):
        return ()
    return tuple(kind for kind, key in TOWER_KEYS.items() if config.top.object(key) is not None)


def built_report() -> dict | None:
    """The build's apply report of the upcast (layout.FP16_REPORT), None where absent or unreadable."""
    try:
        report = files.own_json(files.read_own(layout.FP16_REPORT))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def check_fp16(config: ModelConfig | None, dtype: str, cc: tuple[int, int],
               module: str = "patches.fp16_upcast") -> Result:
    """`dtype`: what vLLM runs the model in on this device (entrypoint.checks.clamp.run_dtype)."""
    where = f"cc {cc[0]}.{cc[1]}"
    found = paths(config)
    if dtype != "float16" or not found:
        why = f"the model runs in {dtype} on {where}" if dtype != "float16" else "no Gemma 4 vision or audio path"
        return passed(NAME, f"nothing patched to fp32: {why}")
    if config.model_type != UNIFIED_TYPE or "vision" not in found:
        return passed(NAME, f"{config.model_type}'s {' and '.join(found)} path(s) run in float16 on {where}; no layer "
                            "of theirs is patched to fp32 (the fp16 upcast covers the 12B's vision embedder)")
    try:
        upcast = importlib.import_module(module)
        report = upcast.check(upcast.find_target(), built_report()).to_dict()
    except Exception as error:  # no vLLM, no patches package: the finding itself
        return failed(NAME, f"the fp16 upcast check could not run: {error}".splitlines()[0], REBUILD)
    outcome, layers = report.get("outcome"), " and ".join(report.get("layers") or ())
    if outcome == "present":
        return passed(NAME, f"{layers} run in fp32, the rest of the 12B in float16 on {where} (fp16 upcast "
                            f"v{report.get('patch_version')} in {Path(str(report.get('file'))).name}, "
                            f"vLLM {report.get('vllm_version')})")
    if outcome == "none":
        return warned(NAME, f"this vLLM ({report.get('vllm_version')}) has no gemma4_unified.py: it cannot serve "
                            "the 12B", "use the image built by build.py for vLLM 0.23.0 or later")
    return failed(NAME, f"{layers} would run in float16 on {where} and overflow on a high-contrast image "
                        f"(NaN embeddings, empty answers): fp16 upcast {outcome} in {report.get('file')} "
                        f"(vLLM {report.get('vllm_version')})", REBUILD)
