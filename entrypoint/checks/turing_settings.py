"""Settings that break Turing (compute capability below 8.0), refused with the variable and the fix:
a Triton architecture override, an attention backend the device lacks, a quantization method whose
minimum capability (read from the installed vLLM's own quantization config classes) is above the
device's, whether asked for by flag or by the checkpoint's config.json; a kernel backend (Mamba,
GDN, KDA) that vLLM cannot run on the device, or does not know."""
from __future__ import annotations

import dataclasses
from typing import Callable, Collection, Mapping

from contract.model_config import ModelConfig
from contract.verdict import Result, failed, passed, warned

from door.problem import Problem, UsageError
from imagefacts.shape import VllmValues

from ..argv import Extras, json_object
from ..settings import SettingsError, cc_text
from .quant_method import Checkpoint, Choice, checkpoint_quantization, effective_method

QUANTIZATION = "quantization"
EXTRA_ARGS = "VLLM_EXTRA_ARGS"
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
def kernel_backend_problem(extras: Extras, cc: tuple[int, int] | None) -> SettingsError | None:
    """The first Mamba/GDN/KDA backend of the extra words that vLLM would refuse on this device
    (cc None: only a name it does not know). --mamba-backend takes any text; vLLM matches it to its
    MambaBackendEnum by the upper-cased name (the facts' list) when the engine's config is made."""
    mamba = extras.get("mamba_backend")
    known = extras.lists.mamba_backends if extras.lists else None
    if isinstance(mamba, str) and known is not None and mamba.lower() not in known:
        return SettingsError(extras.name("mamba_backend"), mamba, "one of vLLM's Mamba backends: "
                             + ", ".join(known), "Fix the name, or remove the option (triton is the default).")
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
        where_it_runs = backend_refused(extras.lists, backend, cc)
        if where_it_runs is not None:
            return SettingsError(where, backend, f"a backend that compute capability {cc_text(cc)} has "
                                 f"({backend} {where_it_runs})",
                                 f"Remove the {backend} setting; vLLM then picks TRITON_ATTN, which the clamp fixes.")
    return kernel_backend_problem(extras, cc)


def vllm_backend_runs(backend: str, cc: tuple[int, int]) -> bool | None:
    """The installed vLLM's own answer (imports its backend class: only for a forced backend the
    image facts do not cover); None when it cannot say (no vLLM, a name it lacks)."""
    try:
        from vllm.platforms.interface import DeviceCapability
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        return bool(AttentionBackendEnum[backend.upper()].get_class().supports_compute_capability(DeviceCapability(*cc)))
    except Exception:  # no vLLM here, a name vLLM refuses itself at start, a class that does not import
        return None


def backend_refused(lists: VllmValues | None, backend: str, cc: tuple[int, int]) -> str | None:
    """Where `backend` runs (for the refusal) when vLLM's backend class says it does not support `cc`;
    None when it does or nothing can say. The image facts' probe first, else vLLM itself."""
    runs = lists.backend_runs(backend, cc) if lists else None
    if runs is None:
        return None if vllm_backend_runs(backend, cc) in (True, None) else "does not support it, says vLLM's own backend class"
    if runs:
        return None
    supported = lists.attention_backends[backend.upper()]
    if not supported:
        return "runs on no CUDA device"
    newer = [probed for probed in lists.probed_capabilities if probed >= supported[0]]
    shown = [f"{probed // 10}.{probed % 10}" for probed in supported]
    return f"needs {shown[0]} or newer" if list(supported) == newer else f"runs on {', '.join(shown)}"


def checkpoint_of(config: ModelConfig | None) -> Checkpoint | None:
    """The checkpoint's quantization config as vLLM reads it from the (overridden) config.json."""
    if config is None:
        return None
    return checkpoint_quantization(config.top.values, config.model_type,
                                   config.architectures[0] if config.architectures else "")


def config_named(extras: Extras) -> str:
    """How messages name the checkpoint's quantization_config (an --hf-overrides one by the option)."""
    if "quantization_config" in json_object(extras.get("hf_overrides")):
        return f"{extras.name('hf_overrides')} quantization_config"
    return "the checkpoint's config.json quantization_config"


def judge_quantization(choice: Choice, where: str, minimum: Callable[[str], int | None],
                       deprecated: Callable[[str], bool], allow_deprecated: bool, cc: tuple[int, int]) -> Result:
    """The effective method (`where` names what set it) judged as vLLM 0.33.0 judges it: a method it
    knows, not deprecated unless allowed, and (minimum(method): get_min_capability() as 75 for 7.5, None
    when vLLM does not know it) within the device's capability."""
    method = choice.method
    if method is None:
        return passed(QUANTIZATION, "no quantization method set")
    written = choice.flag or choice.written
    shown = method if method == written else f"{method} (what vLLM runs for {written})"
    needed = minimum(method)
    if needed is None:
        return failed(QUANTIZATION, f"{where}: {method[:80]!r} is not a quantization method this vLLM knows",
                      "use a method from vLLM's --quantization list, or a checkpoint made for it")
    if deprecated(method) and not allow_deprecated:
        return failed(QUANTIZATION, f"{where}: {shown} is deprecated in this vLLM, which refuses it",
                      "add --allow-deprecated-quantization to VLLM_EXTRA_ARGS, or use another checkpoint")
    device = cc[0] * 10 + cc[1]
    if needed > device:
        return failed(QUANTIZATION, f"{where}: {shown} needs compute capability {needed // 10}.{needed % 10} "
                                    f"or newer, this device is {cc_text(cc)}",
                      "use a checkpoint quantized for this GPU (e.g. AWQ or GPTQ, which run with Marlin on "
                      "7.5) or the unquantized model" + ("" if where.endswith("config.json quantization_config")
                                                          else f"; remove {where}"))
    return passed(QUANTIZATION, f"{shown}: vLLM's minimum capability is met by {cc_text(cc)}")


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


def vllm_deprecated(method: str) -> bool:
    """The installed vLLM's own list (imports vLLM: only runs when a method is set); without a vLLM
    to ask (a host run without image facts) none is known deprecated, and vLLM judges it at start."""
    try:
        from vllm.model_executor.layers.quantization import DEPRECATED_QUANTIZATION_METHODS
    except ImportError:
        return False

    return method in DEPRECATED_QUANTIZATION_METHODS


def deprecated_from(known: Collection[str] | None) -> Callable[[str], bool]:
    """The image facts' deprecated methods, vLLM's own list when the facts have none."""
    return (lambda method: method in known) if known is not None else vllm_deprecated


def quantization_from(facts) -> tuple[Callable[[str], int | None], Callable[[str], bool]]:
    """(minimum, deprecated) for check_quantization from the image facts (entrypoint.image_facts.Facts, or
    None: vLLM's own answers)."""
    if facts is None:
        return vllm_min_capability, vllm_deprecated
    return minimum_from(facts.quantization), deprecated_from(facts.values.deprecated_quantization)


def ignored_quantization_config(choice: Choice, extras: Extras) -> Result | None:
    """--quantization-config with no method to apply it to: vLLM 0.33.0 quantizes nothing then
    (config/quantization.py resolve_quantization_config; weight_utils.get_quant_config reads it only
    under a method: --quantization online or a shorthand, or the checkpoint's own)."""
    if extras.get("quantization_config") in (None, {}) or choice.method:
        return None
    name = extras.name("quantization_config")
    return warned(QUANTIZATION, f"{name} has no effect: neither --quantization nor the checkpoint names a "
                                "method, so vLLM quantizes nothing",
                  f"add --quantization online (or a shorthand such as fp8_per_channel) to quantize at load, or "
                  f"remove {name.split()[-1]}")


def check_quantization(config: ModelConfig | None, extras: Extras, cc: tuple[int, int],
                       minimum: Callable[[str], int | None] = vllm_min_capability,
                       deprecated: Callable[[str], bool] = vllm_deprecated) -> Result:
    """The method vLLM will run (quant_method.effective_method: the flag, the checkpoint's config and
    vLLM's overrides) judged on this device; a flag vLLM refuses for the checkpoint fails in one line."""
    flag = extras.get("quantization")
    try:
        choice = effective_method(flag if isinstance(flag, str) else None, checkpoint_of(config), cc)
    except Problem as refused:  # the flag's (bad input: a UsageError), else the checkpoint's config
        where = extras.name("quantization") if isinstance(refused, UsageError) else config_named(extras)
        return failed(QUANTIZATION, f"{where} {refused}", refused.fix)
    ignored = ignored_quantization_config(choice, extras)
    if ignored:
        return ignored
    where = extras.name("quantization") if choice.flag else config_named(extras)
    try:
        return judge_quantization(choice, where, minimum, deprecated,
                                  extras.get("allow_deprecated_quantization") is True, cc)
    except Exception as error:  # vLLM itself does not import: the torch check names why
        return failed(QUANTIZATION, f"vLLM cannot tell the minimum capability of {choice.method}: "
                                    f"{str(error).splitlines()[0][:200]}", "see the torch check")
