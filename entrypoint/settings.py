"""Settings from the environment (the env file shared by compose and Quadlet), validated before
anything starts. Every refusal is a SettingsError naming the variable; the CLI exits 2 on it.
An empty variable counts as unset, as env files write `NAME=` for "not given"."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from typing import Mapping

from contract.devices import BF16_MIN_CC, FP8_MIN_CC
from door.files import json_kind
from contract.layout import (DEPRECATED_ENV_NAMES, ENV_API_KEY, ENV_API_KEY_FILE, ENV_CC, ENV_FIT_TABLE, ENV_SMEM_LIMIT,
                             IDLE_AFTER_MAX_S, IDLE_AFTER_MIN_S, STOP_GRACE_MAX_S, STOP_GRACE_MIN_S,
                             STOP_GRACE_S)
from door.redact import redact
from door import files
from door.problem import UsageError

# The one program the entrypoint execs. Nothing in the environment replaces it: the test tiers
# put a stand-in `vllm` package on PYTHONPATH instead (tests/support/standin_vllm.py).
SERVER_CMD = ("python3", "-m", "vllm.entrypoints.openai.api_server")
CHECK_NAMES = ("devices", "driver", "argv", "torch", "clamp", "fit", "fp16", "model", "drafter", "parsers", "quantization", "audio",
               "disk", "cache", "shm", "memory", "port", "env", "parallel")
CUDA_COMPAT_MODES = ("auto", "on", "off")
# Names only this entrypoint reads, to build the server's argv: removed from the server's environment
# (vLLM warns about every VLLM_* name it does not own). A unit test holds this list to parse_settings.
ENTRYPOINT_ONLY = ("MODEL", "SERVED_MODEL_NAME", "HOST", "PORT", "DTYPE", "MAX_MODEL_LEN", "MAX_NUM_SEQS",
                   "GPU_MEMORY_UTILIZATION", "KV_CACHE_DTYPE", "ENFORCE_EAGER", "SPECULATIVE_CONFIG", "DRAFTER",
                   "REASONING_PARSER", "TOOL_CALL_PARSER", "VLLM_EXTRA_ARGS", "SKIP_CHECKS", "CUDA_COMPAT",
                   "TENSOR_PARALLEL_SIZE", "PIPELINE_PARALLEL_SIZE", ENV_API_KEY_FILE, "STOP_GRACE_SECONDS",
                   "VERIFY_HASHES_SECONDS", "DOWNLOAD_AT_START", "IDLE_AFTER")
# Names the entrypoint reads that the server (vLLM, huggingface_hub, Triton) reads too: passed on.
SHARED_WITH_SERVER = (ENV_API_KEY, "HF_TOKEN_PATH", "HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TMPDIR",
                      "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                      "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "TURING_CLAMP_SMEM_LIMIT", "TURING_CLAMP_CC", "TURING_CLAMP_FIT_TABLE",
                      "TURING_CLAMP_RANKED_CONFIGS", "VLLM_TURING_SMEM_LIMIT", "VLLM_TURING_CC", "VLLM_TURING_FIT_TABLE")

DTYPES = {"auto": "auto", "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
          "float": "float32", "float32": "float32"}
# The KV cache dtypes of vLLM 0.33.0's CacheDType that a user of these GPUs would pick.
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

# Upper bounds that no real deployment reaches, so a typo (10^30) is refused here; a MAX_MODEL_LEN
# above the model's own limit is the model check's finding.
MAX_CONTEXT = 16 * 2**20
MAX_SEQS = 65536
MAX_GPUS = 64
# The bound of the model check's opt-in hash verification against the fetch manifest: an hour reads
# several hundred GB from a slow disk; more is a typo, and a start that long is no start.
MAX_VERIFY_HASHES_S = 3600

# The clamp's settings (patches/turing_clamp/runtime.py reads them in the server, where a bad value
# is an error at the first attention launch, after the load): a shared-memory limit in bytes (no GPU
# has more than 228 KiB per block), a compute capability as the clamp writes it (75 for 7.5), files.
MAX_SMEM_LIMIT = 256 * 1024
ENV_RANKED_CONFIGS = "TURING_CLAMP_RANKED_CONFIGS"
OLD_NAME = {new: old for old, new in DEPRECATED_ENV_NAMES.items()}


class SettingsError(UsageError):
    """A bad setting: what was found, what was expected, the one thing to do; every secret value it
    would show masked (door/redact.py), the value and what was expected cut to a line's length. Caught
    apart from other bad input: the entrypoint's refusal names `variable` (its JSON's "variable")."""

    def __init__(self, variable: str, found: str, expected: str, fix: str):
        self.variable = variable
        super().__init__(f"{variable}={capped(redact(repr(found)), 240)}: expected {capped(redact(expected), 480)}. "
                         f"{redact(fix)}")


def capped(text: str, most: int) -> str:
    """`text`, cut at `most` characters with its length said (a refusal stays one readable line
    however long the value was: an env var can hold 128 KiB)."""
    return text if len(text) <= most else f"{text[:most]}...({len(text)} characters)"


@dataclasses.dataclass(frozen=True)
class Settings:
    model: str
    served_model_name: str | None
    host: str
    port: int
    dtype: str
    max_model_len: int | None
    max_num_seqs: int | None
    gpu_memory_utilization: float | None
    kv_cache_dtype: str | None
    enforce_eager: bool
    speculative_config: dict | None
    reasoning_parser: str | None
    tool_call_parser: str | None
    hf_hub_cache: str
    hf_offline: bool
    tmpdir: str
    triton_cache_dir: str
    vllm_cache_root: str
    extra_args: tuple[str, ...]
    skip_checks: tuple[str, ...]
    cuda_compat: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    api_key_file: str | None = None
    hf_token_path: str | None = None        # HF_TOKEN_PATH: the Hub token's file (huggingface_hub reads it)
    clamp_smem_limit: int | None = None
    clamp_cc: int | None = None
    cache_home: str | None = None           # XDG_CACHE_HOME, else HOME/.cache
    inductor_cache_dir: str | None = None   # TORCHINDUCTOR_CACHE_DIR when set
    cuda_cache_path: str | None = None      # CUDA_CACHE_PATH (CUDA's PTX JIT cache) when set
    stop_grace_s: int = STOP_GRACE_S        # STOP_GRACE_SECONDS: the units' grace, sizing vLLM's drain
    verify_hashes_s: int | None = None      # VERIFY_HASHES_SECONDS: hash the fetched files, within this time
    download_at_start: bool = False         # DOWNLOAD_AT_START: a Hub id as MODEL is left to vLLM's download
    idle_after_s: int | None = None         # IDLE_AFTER: the units stop the server after this long unasked

    @property
    def world_size(self) -> int:
        """GPUs (and vLLM workers) one server uses."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def drafter(self) -> str | None:
        return (self.speculative_config or {}).get("model")


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


ASCII_INT = re.compile(r"[0-9]{1,12}")  # str.isdigit() and int() take '²' and '١', which vLLM's parser does not


def _bounded_int(env, name: str, low: int, high: int, example: str) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return None
    if not ASCII_INT.fullmatch(raw) or not low <= int(raw) <= high:
        raise SettingsError(name, raw, f"an integer from {low} to {high}",
                            f"Set {name} to e.g. {example}.")
    return int(raw)


def _port(env) -> int:
    return _bounded_int(env, "PORT", 1, 65535, "8000") or 8000


def _utilization(env) -> float | None:
    raw = _get(env, "GPU_MEMORY_UTILIZATION")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise SettingsError("GPU_MEMORY_UTILIZATION", raw, "a fraction in (0, 1]",
                            "Set GPU_MEMORY_UTILIZATION to e.g. 0.9.")
    return value


def _choice(env, name: str, choices: Mapping[str, str] | tuple, default: str | None) -> str | None:
    raw = _get(env, name)
    if raw is None:
        return default
    key = raw.lower()
    if key not in choices:
        raise SettingsError(name, raw, "one of " + ", ".join(choices), f"Set {name} to one of those.")
    return choices[key] if isinstance(choices, Mapping) else key


def _flag(env, name: str) -> bool:
    raw = _get(env, name)
    if raw is None or raw.lower() in FALSE_WORDS:
        return False
    if raw.lower() in TRUE_WORDS:
        return True
    raise SettingsError(name, raw, "true or false (1/0, yes/no, on/off)", f"Set {name}=true or remove it.")


def _text(env, name: str) -> str | None:
    """A name or path: printable characters only, so no setting can forge a line of the report or
    a log (a newline, a carriage return, a terminal escape)."""
    raw = _get(env, name)
    if raw is not None and not raw.isprintable():
        raise SettingsError(name, raw, "printable characters only (no newline, tab or control character)",
                            f"Remove the control characters from {name}.")
    return raw


def _absolute_path(env, name: str, default: str | None) -> str | None:
    raw = _text(env, name)
    if raw is None:
        return default
    if not os.path.isabs(raw):
        raise SettingsError(name, raw, "an absolute path", f"Set {name} to an absolute path such as /data/{name.lower()}.")
    return raw


HOST_NAME = re.compile(r"[0-9A-Za-z.:_%\[\]-]{1,253}")


def _host(env) -> str:
    raw = _text(env, "HOST") or "0.0.0.0"
    if not HOST_NAME.fullmatch(raw):
        raise SettingsError("HOST", raw, "an IP address or host name", "Set HOST to 0.0.0.0 (all addresses) or 127.0.0.1.")
    return raw


PARSER_NAME = re.compile(r"[0-9A-Za-z_.-]{1,64}")


def _parser_name(env, name: str) -> str | None:
    raw = _text(env, name)
    if raw is not None and not PARSER_NAME.fullmatch(raw):
        raise SettingsError(name, raw, "a parser name such as gemma4 (letters, digits, _ . -)",
                            f"Set {name} to one of the names `vllm serve --help=Frontend` lists.")
    return raw


def _argv_words(env, name: str) -> tuple[str, ...]:
    raw = _get(env, name)
    if raw is not None and not raw.replace("\t", " ").isprintable():
        raise SettingsError(name, raw, "words on one line (no newline or control character)",
                            f"Put {name} on one line.")
    if raw is None:
        return ()
    try:
        return tuple(shlex.split(raw))
    except ValueError as error:
        raise SettingsError(name, raw, f"shell-style words ({error})", f"Fix the quoting in {name}.") from None


# The integer fields of vLLM 0.33.0's SpeculativeConfig (config/speculative.py: pydantic Field(gt=0)
# or Field(ge=1), lax: it would take 4.0 or "4" too, and refuse 0 only after the entrypoint has
# exec'd it), with a top no real deployment reaches: the rejection sampler asserts a draft of at most
# MAX_SPEC_LEN = 128 tokens at the first request (v1/sample/rejection_sampler.py).
MAX_SPECULATIVE_TOKENS = 128
SPECULATIVE_INTEGERS = {"num_speculative_tokens": MAX_SPECULATIVE_TOKENS, "draft_tensor_parallel_size": MAX_GPUS,
                        "max_model_len": MAX_CONTEXT, "prompt_lookup_max": MAX_CONTEXT,
                        "prompt_lookup_min": MAX_CONTEXT}


SPECULATIVE_FIX = ("Fix that value in {where}, such as \"num_speculative_tokens\": 4: vLLM refuses the others only "
                   "after the entrypoint handed over, or fails at the first request.")


def speculative_value_problem(config: dict) -> str | None:
    """What a speculative config object's integer field should be, naming the field and the value
    found; None when each is absent, null or a JSON integer in its range."""
    for key, most in SPECULATIVE_INTEGERS.items():
        value = config.get(key)
        if value is not None and (type(value) is not int or not 1 <= value <= most):
            found = json.dumps(value) if isinstance(value, (int, float, str, bool)) else json_kind(value)
            return f'"{key}" as a JSON integer from 1 to {most}, not {capped(found, 40)}'
    return None


def _speculative_config(env) -> dict | None:
    raw = _get(env, "SPECULATIVE_CONFIG")
    config: dict = {}
    if raw is not None:
        try:
            config = files.word_json(raw)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
            config = None
        if not isinstance(config, dict):
            raise SettingsError("SPECULATIVE_CONFIG", raw, "a JSON object such as "
                                '{"model": "/models/drafter", "num_speculative_tokens": 4}',
                                "Fix the JSON in SPECULATIVE_CONFIG.")
    if not isinstance(config.get("model", ""), str) or not str(config.get("model", "")).isprintable():
        raise SettingsError("SPECULATIVE_CONFIG", raw, 'a "model" that is a path or model id (printable text)',
                            "Fix the model in SPECULATIVE_CONFIG, or set DRAFTER instead.")
    typed = speculative_value_problem(config)
    if typed:
        raise SettingsError("SPECULATIVE_CONFIG", raw, typed, SPECULATIVE_FIX.format(where="SPECULATIVE_CONFIG"))
    drafter = _text(env, "DRAFTER")
    if drafter is not None:
        if config.get("model") not in (None, drafter):
            raise SettingsError("DRAFTER", drafter, f"the same model as SPECULATIVE_CONFIG's {config['model']!r}",
                                "Set the drafter in one of DRAFTER or SPECULATIVE_CONFIG, not both.")
        config = {"model": drafter, **{k: v for k, v in config.items() if k != "model"}}
    return config or None


def _device_list(env, name: str, words: tuple[str, ...]) -> None:
    """CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES as CUDA and the container toolkit read them:
    GPU indices or UUIDs (GPU-..., MIG-...), comma-separated; NVIDIA_VISIBLE_DEVICES also all/none/void."""
    raw = _get(env, name)
    if raw is None or raw.lower() in words:
        return
    items = [item.strip() for item in raw.split(",")]
    bad = [item for item in items if not re.fullmatch(r"[0-9]{1,3}|(GPU|MIG)-[0-9A-Za-z/-]+", item)]
    if bad or len(set(items)) != len(items):
        expected = "comma-separated GPU indices or UUIDs, each once" + (f", or {'/'.join(words)}" if words else "")
        raise SettingsError(name, raw, expected, f"Set {name} to e.g. 0,1 (see nvidia-smi -L).")


def _skip_checks(env) -> tuple[str, ...]:
    names = tuple(name.strip() for name in (_get(env, "SKIP_CHECKS") or "").split(",") if name.strip())
    unknown = [name for name in names if name not in CHECK_NAMES]
    if unknown:
        raise SettingsError("SKIP_CHECKS", ",".join(unknown), "check names from " + ",".join(CHECK_NAMES),
                            "Remove the unknown names from SKIP_CHECKS.")
    return names


def _clamp_int(env, name: str, low: int, high: int, example: str) -> int | None:
    """The clamp's integer setting under its name, else under the first release's name (as the clamp
    reads them: the new name wins)."""
    for variable in (name, OLD_NAME.get(name)):
        if variable and _get(env, variable) is not None:
            return _bounded_int(env, variable, low, high, example)
    return None


def _clamp_paths(env) -> None:
    for name in (ENV_FIT_TABLE, OLD_NAME[ENV_FIT_TABLE], ENV_RANKED_CONFIGS):
        _absolute_path(env, name, None)


def parse_settings(env: Mapping[str, str]) -> Settings:
    """All settings from `env`; raises SettingsError on the first bad value."""
    _device_list(env, "CUDA_VISIBLE_DEVICES", ())
    _device_list(env, "NVIDIA_VISIBLE_DEVICES", ("all", "none", "void"))
    model = _text(env, "MODEL")
    if model is None:
        raise SettingsError("MODEL", "", "a local model directory or a Hugging Face model id",
                            "Set MODEL in the env file, e.g. MODEL=/models/gemma-4-E2B-it.")
    _clamp_paths(env)
    home = _absolute_path(env, "HOME", "/root")
    cache_home = _absolute_path(env, "XDG_CACHE_HOME", os.path.join(home, ".cache"))
    hf_home = _absolute_path(env, "HF_HOME", os.path.join(cache_home, "huggingface"))
    return Settings(
        model=model,
        served_model_name=_text(env, "SERVED_MODEL_NAME"),
        host=_host(env),
        port=_port(env),
        dtype=_choice(env, "DTYPE", DTYPES, "auto"),
        max_model_len=_bounded_int(env, "MAX_MODEL_LEN", 1, MAX_CONTEXT, "16384"),
        max_num_seqs=_bounded_int(env, "MAX_NUM_SEQS", 1, MAX_SEQS, "8"),
        gpu_memory_utilization=_utilization(env),
        kv_cache_dtype=_choice(env, "KV_CACHE_DTYPE", KV_CACHE_DTYPES, None),
        enforce_eager=_flag(env, "ENFORCE_EAGER"),
        speculative_config=_speculative_config(env),
        reasoning_parser=_parser_name(env, "REASONING_PARSER"),
        tool_call_parser=_parser_name(env, "TOOL_CALL_PARSER"),
        hf_hub_cache=_absolute_path(env, "HF_HUB_CACHE", os.path.join(hf_home, "hub")),
        hf_offline=_flag(env, "HF_HUB_OFFLINE"),
        tmpdir=_absolute_path(env, "TMPDIR", "/tmp"),
        triton_cache_dir=_absolute_path(env, "TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache")),
        vllm_cache_root=_absolute_path(env, "VLLM_CACHE_ROOT", os.path.join(cache_home, "vllm")),
        extra_args=_argv_words(env, "VLLM_EXTRA_ARGS"),
        skip_checks=_skip_checks(env),
        cuda_compat=_choice(env, "CUDA_COMPAT", CUDA_COMPAT_MODES, "auto"),
        tensor_parallel_size=_bounded_int(env, "TENSOR_PARALLEL_SIZE", 1, MAX_GPUS, "2") or 1,
        pipeline_parallel_size=_bounded_int(env, "PIPELINE_PARALLEL_SIZE", 1, MAX_GPUS, "1") or 1,
        api_key_file=_absolute_path(env, ENV_API_KEY_FILE, None),
        hf_token_path=_absolute_path(env, "HF_TOKEN_PATH", None),
        clamp_smem_limit=_clamp_int(env, ENV_SMEM_LIMIT, 1, MAX_SMEM_LIMIT, "65536"),
        clamp_cc=_clamp_int(env, ENV_CC, 30, 199, "75"),
        cache_home=cache_home,
        inductor_cache_dir=_absolute_path(env, "TORCHINDUCTOR_CACHE_DIR", None),
        cuda_cache_path=_absolute_path(env, "CUDA_CACHE_PATH", None),
        stop_grace_s=stop_grace_setting(env),
        verify_hashes_s=_bounded_int(env, "VERIFY_HASHES_SECONDS", 0, MAX_VERIFY_HASHES_S, "300") or None,
        download_at_start=_flag(env, "DOWNLOAD_AT_START"),
        idle_after_s=idle_after_setting(env),
    )


def stop_grace_setting(env) -> int:
    """STOP_GRACE_SECONDS, typed (SettingsError naming it): the entrypoint sizes vLLM's drain with it and
    `build.py units` renders the units' stop grace from it, so the two cannot disagree."""
    return _bounded_int(env, "STOP_GRACE_SECONDS", STOP_GRACE_MIN_S, STOP_GRACE_MAX_S, str(STOP_GRACE_S)) or STOP_GRACE_S


# systemd's time span units (systemd.time(7)) that a stop after idling can use, in seconds
DURATION_UNITS = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
                  "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400}
DURATION_PART = re.compile(r"([0-9]{1,9})\s*([a-z]*)")


def duration_seconds(raw: str) -> int | None:
    """A systemd-style time span (`90`, `90s`, `15min`, `1h 30min`) in whole seconds; None when it is not one."""
    text, total, position = raw.strip().lower(), 0, 0
    while position < len(text):
        match = DURATION_PART.match(text, position)
        if match is None or match.group(2) not in ("", *DURATION_UNITS):
            return None
        total += int(match.group(1)) * DURATION_UNITS.get(match.group(2), 1)
        position = match.end()
        while position < len(text) and text[position] == " ":
            position += 1
    return total if text else None


def idle_after_setting(env) -> int | None:
    """IDLE_AFTER in seconds (None: off), typed here for the entrypoint and for `build.py units`, which
    renders the socket-activated units (and KEDA's objects) from it."""
    raw = _get(env, "IDLE_AFTER")
    if raw is None or raw.lower() in FALSE_WORDS:
        return None
    seconds = duration_seconds(raw)
    if seconds is None or not IDLE_AFTER_MIN_S <= seconds <= IDLE_AFTER_MAX_S:
        raise SettingsError("IDLE_AFTER", raw, f"a time span from {IDLE_AFTER_MIN_S}s to {IDLE_AFTER_MAX_S // 86400} "
                            "days, such as 900, 15min or 1h", "Set IDLE_AFTER=15min, or leave it empty to keep "
                            "the server running.")
    return seconds


def cc_text(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def resolve_dtype(dtype: str, cc: tuple[int, int] | None) -> str:
    """auto -> float16 on a device without bf16 (Turing has no bf16 datapath; vLLM casts the weights)."""
    if dtype == "auto" and cc is not None and cc < BF16_MIN_CC:
        return "float16"
    return dtype


def validate_for_device(settings: Settings, cc: tuple[int, int]) -> None:
    """Settings the device cannot run: raises SettingsError (exit 2) once its capability is known."""
    if settings.dtype == "bfloat16" and cc < BF16_MIN_CC:
        raise SettingsError("DTYPE", settings.dtype, f"float16 or auto on this device of compute capability "
                            f"{cc_text(cc)} (bf16 needs 8.0 or newer)", "Set DTYPE=auto or DTYPE=float16.")
    kv = settings.kv_cache_dtype or "auto"
    if kv == "bfloat16" and cc < BF16_MIN_CC:
        raise SettingsError("KV_CACHE_DTYPE", kv, f"auto or float16 on compute capability {cc_text(cc)} "
                            "(bf16 needs 8.0 or newer)", "Set KV_CACHE_DTYPE=auto.")
    if kv.startswith("fp8") and cc < FP8_MIN_CC:
        raise SettingsError("KV_CACHE_DTYPE", kv, f"auto or float16 on compute capability {cc_text(cc)} "
                            "(an fp8 KV cache needs 8.9 or newer)", "Set KV_CACHE_DTYPE=auto.")


def validate_parser_names(settings: Settings, registered: Mapping[str, list[str]], plugins: set[str]) -> None:
    """TOOL_CALL_PARSER / REASONING_PARSER among the names the image's vLLM registers (`registered`:
    tool_call and reasoning lists); a parser plugin given in VLLM_EXTRA_ARGS may add its own name."""
    for variable, value, kind, plugin in (("TOOL_CALL_PARSER", settings.tool_call_parser, "tool_call", "tool_parser_plugin"),
                                          ("REASONING_PARSER", settings.reasoning_parser, "reasoning",
                                           "reasoning_parser_plugin")):
        names = list(registered.get(kind) or [])
        if value is None or not names or plugin in plugins or value in names:
            continue
        raise SettingsError(variable, value, "a parser this vLLM registers: " + ", ".join(names),
                            f"Set {variable} to one of those, or leave it empty.")
