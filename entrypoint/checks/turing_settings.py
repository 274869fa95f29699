"""Settings that break Turing (compute capability below 8.0), refused with the variable and the fix:
a Triton architecture override, an attention backend the device lacks, a quantization method whose
minimum capability (read from the installed vLLM's own quantization config classes) is above the
device's, whether asked for by flag or by the checkpoint's config.json; a kernel backend (Mamba,
GDN, KDA) that vLLM cannot run on the device, or does not know."""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

from contract.model_config import ModelConfig
from contract.verdict import Result, failed, passed, warned

from ..argv import Extras, json_object
from ..settings import SettingsError, cc_text

QUANTIZATION = "quantization"
EXTRA_ARGS = "VLLM_EXTRA_ARGS"
# CUDA attention backends of vLLM 0.33.0 (registry names) whose supports_compute_capability() is
# False below the capability given; TRITON_ATTN (what the clamp fixes) runs everywhere.
BACKEND_MIN_CC = {
    "FLASH_ATTN": (8, 0), "FLASH_ATTN_DIFFKV": (8, 0), "FLASHINFER": (8, 0), "TRITON_FLASHINFER": (8, 0),
    "FLASHMLA": (9, 0), "FLASHMLA_SPARSE": (9, 0), "FLASH_ATTN_MLA": (9, 0), "TRITON_FLASH_ATTN": (9, 0),
    "FLASHINFER_MLA": (10, 0), "CUTLASS_MLA": (10, 0), "TOKENSPEED_MLA": (10, 0), "B12X": (12, 0),
}
BACKEND_VARIABLE = "VLLM_ATTENTION_BACKEND"


# dests of the extra words that pick an attention backend: the decoder's, and the multimodal
# encoder towers' (vLLM's MultiModalConfig.mm_encoder_attn_backend)
BACKEND_DESTS = ("attention_backend", "mm_encoder_attn_backend")


def forced_backends(env: Mapping[str, str], extras: Extras) -> list[tuple[str, str]]:
    """(where it was set, backend name) for each attention backend the user forces."""
    forced = []
    if env.get(BACKEND_VARIABLE, "").strip():
        forced.append((BACKEND_VARIABLE, env[BACKEND_VARIABLE].strip()))
    for dest in BACKEND_DESTS:
        flag = extras.get(dest)
        if isinstance(flag, str) and flag:
            forced.append((extras.name(dest), flag))
    backend = json_object(extras.get("attention_config")).get("backend")
    if backend:
        forced.append((extras.name("attention_config"), str(backend)))
    return forced


@dataclasses.dataclass(frozen=True)
class Runs:
    """Where vLLM 0.33.0 runs a kernel backend: capabilities whose major is in `majors`, or exactly
    one of `exact`; on no CUDA device at all when `platform` names the one it is for."""
    text: str
    majors: tuple[int, ...] = ()
    exact: tuple[tuple[int, int], ...] = ()
    platform: str | None = None

    def allows(self, cc: tuple[int, int]) -> bool:
        return self.platform is None and (cc[0] in self.majors or cc in self.exact)


# (dest, value) -> where vLLM 0.33.0 runs it, for the backends it refuses on other devices (a value
# not listed runs on any CUDA device, or vLLM falls back to Triton by itself). From its source:
# model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend (flashinfer
# and cutedsl fall back to Triton below 9.0), models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend,
# is_flashkda_supported, resolve_kda_decode_backend.
KERNEL_BACKENDS = {
    ("gdn_prefill_backend", "sycl"): Runs("Intel XPUs only", platform="XPU"),
    ("gdn_prefill_backend", "aiter_flydsl"): Runs("AMD ROCm GPUs only", platform="ROCm"),
    ("kda_prefill_backend", "fused"): Runs("AMD ROCm GPUs only", platform="ROCm"),
    ("kda_prefill_backend", "flashkda"): Runs("compute capability 9.x, 10.x or 12.x", majors=(9, 10, 12)),
    ("kda_prefill_backend", "flashinfer"): Runs("compute capability 10.0 or 10.3", exact=((10, 0), (10, 3))),
    ("kda_decode_backend", "native"): Runs("compute capability 9.0, 10.x or 12.x", majors=(10, 12), exact=((9, 0),)),
    ("kda_decode_backend", "flashinfer"): Runs("compute capability 10.x", majors=(10,)),
}
# vLLM 0.33.0's MambaBackendEnum (config/mamba.py), matched by its upper-cased name; --mamba-backend
# takes any text and an unknown one fails when the engine's config is made.
MAMBA_BACKENDS = ("triton", "flashinfer", "cpu")


def kernel_backend_problem(extras: Extras, cc: tuple[int, int] | None) -> SettingsError | None:
    """The first Mamba/GDN/KDA backend of the extra words that vLLM would refuse on this device
    (cc None: only a name it does not know)."""
    mamba = extras.get("mamba_backend")
    if isinstance(mamba, str) and mamba.lower() not in MAMBA_BACKENDS:
        return SettingsError(extras.name("mamba_backend"), mamba, "one of vLLM's Mamba backends: "
                             + ", ".join(MAMBA_BACKENDS), "Fix the name, or remove the option (triton is the default).")
    for (dest, value), runs in KERNEL_BACKENDS.items():
        if cc and extras.get(dest) == value and not runs.allows(cc):
            return SettingsError(extras.name(dest), value, f"a backend that compute capability {cc_text(cc)} has "
                                 f"({value} runs on {runs.text})",
                                 f"Remove {extras.name(dest).split()[-1]}; vLLM then picks its Triton kernels.")
    return None


def settings_problem(env: Mapping[str, str], extras: Extras, cc: tuple[int, int] | None) -> SettingsError | None:
    """The first setting that breaks this device (cc None: only what breaks any device here)."""
    override = env.get("TRITON_OVERRIDE_ARCH", "").strip()
    if override:
        return SettingsError("TRITON_OVERRIDE_ARCH", override, "unset: Triton must compile for the GPU it runs on "
                             "(a stale override gives sm_89 errors on Turing)",
                             "Remove TRITON_OVERRIDE_ARCH from the environment.")
    for where, backend in forced_backends(env, extras) if cc else ():
        needed = BACKEND_MIN_CC.get(backend.upper())
        if needed and cc < needed:
            return SettingsError(where, backend, f"a backend that compute capability {cc_text(cc)} has "
                                 f"({backend} needs {cc_text(needed)} or newer)",
                                 f"Remove the {backend} setting; vLLM then picks TRITON_ATTN, which the clamp fixes.")
    return kernel_backend_problem(extras, cc)


def quantization_methods(config: ModelConfig | None, extras: Extras) -> list[tuple[str, str]]:
    """(where it comes from, method): the --quantization flag, the checkpoint's quantization_config."""
    methods = []
    flag = extras.get("quantization")
    if isinstance(flag, str) and flag:
        methods.append((extras.name("quantization"), flag))
    if config is not None and config.quant_method:
        overridden = "quantization_config" in json_object(extras.get("hf_overrides"))
        methods.append((f"{extras.name('hf_overrides')} quantization_config" if overridden
                        else "the checkpoint's config.json quantization_config", config.quant_method))
    return methods


def judge_quantization(methods: list[tuple[str, str]], minimum: Callable[[str], int | None],
                       cc: tuple[int, int]) -> Result:
    """minimum(method): vLLM's get_min_capability() as 75 for 7.5, None when vLLM does not know it."""
    if not methods:
        return passed(QUANTIZATION, "no quantization method set")
    device = cc[0] * 10 + cc[1]
    for where, method in methods:
        needed = minimum(method)
        if needed is None:
            return failed(QUANTIZATION, f"{where}: {method!r} is not a quantization method this vLLM knows",
                          "use a method from vLLM's --quantization list, or a checkpoint made for it")
        if needed > device:
            return failed(QUANTIZATION, f"{where}: {method} needs compute capability {needed // 10}.{needed % 10} "
                                        f"or newer, this device is {cc_text(cc)}",
                          "use a checkpoint quantized for this GPU (e.g. AWQ or GPTQ, which run with Marlin on "
                          "7.5) or the unquantized model" + ("" if where.endswith("config.json quantization_config")
                                                              else f"; remove {where}"))
    listed = ", ".join(method for _, method in methods)
    return passed(QUANTIZATION, f"{listed}: vLLM's minimum capability is met by {cc_text(cc)}")


def vllm_min_capability(method: str) -> int | None:
    """The installed vLLM's own answer (imports vLLM: only runs when a method is set)."""
    from vllm.model_executor.layers.quantization import get_quantization_config

    try:
        return int(get_quantization_config(method).get_min_capability())
    except (ValueError, KeyError):
        return None


def minimum_from(known: Mapping[str, int] | None) -> Callable[[str], int | None]:
    """The image facts' minimum capabilities, vLLM's own answer for a method they lack."""
    return lambda method: known[method] if known and method in known else vllm_min_capability(method)


def ignored_quantization_config(methods: list[tuple[str, str]], extras: Extras) -> Result | None:
    """--quantization-config with no method to apply it to: vLLM 0.33.0 quantizes nothing then
    (config/quantization.py resolve_quantization_config; weight_utils.get_quant_config reads it only
    under a method: --quantization online or a shorthand, or the checkpoint's own)."""
    if extras.get("quantization_config") in (None, {}) or methods:
        return None
    name = extras.name("quantization_config")
    return warned(QUANTIZATION, f"{name} has no effect: neither --quantization nor the checkpoint names a "
                                "method, so vLLM quantizes nothing",
                  f"add --quantization online (or a shorthand such as fp8_per_channel) to quantize at load, or "
                  f"remove {name.split()[-1]}")


def check_quantization(config: ModelConfig | None, extras: Extras, cc: tuple[int, int],
                       minimum: Callable[[str], int | None] = vllm_min_capability) -> Result:
    methods = quantization_methods(config, extras)
    ignored = ignored_quantization_config(methods, extras)
    if ignored:
        return ignored
    try:
        return judge_quantization(methods, minimum, cc)
    except Exception as error:  # vLLM itself does not import: the torch check names why
        return failed(QUANTIZATION, f"vLLM cannot tell the minimum capability of {methods[0][1]}: "
                                    f"{str(error).splitlines()[0][:200]}", "see the torch check")
