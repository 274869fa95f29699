"""Which checks run, bound to the real paths and values of this container, and running them
(skipped by SKIP_CHECKS with a warning, each timed)."""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from contract.model_config import ModelConfig
from contract.verdict import Result, failed, warned

from . import environment, hub_access, nvml
from .argv import Extras, argv_result, json_object, speculative_drafter
from .image_facts import Loaded
from .checks import (audio, cache, clamp, devices, disk, driver, fetched, fp16, memory, model, parallel, parsers, port,
                     shm, turing_settings)
from .device import Device, Probe, context_error
from .settings import CHECK_NAMES, Settings
from door import files

Check = Callable[[], Result]


def read_text(path: str) -> str:
    """A kernel file (/proc/meminfo), "" where it cannot be read."""
    return files.read_system(path) or ""


@dataclass(frozen=True)
class Background:
    """A check whose slow part starts before the other checks run: `start` begins it and returns
    the callable that waits for its result."""
    start: Callable[[], Check]


def nvml_view(probe: Probe | None) -> nvml.NvmlView:
    """NVML's view as the probe read it before the preflight's context, else read now."""
    return probe.nvml_view() if probe is not None else nvml.read()


def needs_device(name: str, device: Device | None, run: Callable[[Device], Check | Background]):
    if device is None:
        return lambda: warned(name, "not run: no CUDA device (see the device line)", "see the devices and driver checks")
    return run(device)


def torch_check(loaded: Loaded, context: Callable[[int], str | None] | None = None
                ) -> Callable[[Device], Check | Background]:
    """`context`: what the driver says when asked for a context on a device (default: ask it now)."""
    def imported(device: Device) -> Result:
        from .checks import torch_runtime

        result = torch_runtime.check_torch(device.cc)  # imports torch: seconds
        return Result(result.name, result.status, f"{result.message} (torch imported: {loaded.why_not})", result.fix)

    def from_facts(device: Device) -> Background:
        # The driver's context on the device takes a tenth of a second or more (cuDevicePrimaryCtxRetain),
        # in ctypes calls that release the GIL: it runs beside the other checks.
        from .checks import torch_runtime

        def start() -> Check:
            made = in_thread(lambda: (context or context_error)(device.ordinal))

            def judged() -> Result:
                error = made(CHECK_DEADLINE_S)
                if error is OVERDUE:
                    error = f"no answer from cuDevicePrimaryCtxRetain in {CHECK_DEADLINE_S:g} s"
                return torch_runtime.check_torch_from_facts(loaded.facts.torch, device.cc, error)
            return judged
        return Background(start)
    if loaded.facts is not None:
        return from_facts
    return lambda device: lambda: imported(device)


NOT_JUDGED = Extras({}, judged=False)


def fit_check(resolved: model.Resolved, tensor_parallel_size: int = 1, dtype: str = "auto",
              extras: Extras = NOT_JUDGED, env: Mapping[str, str] | None = None) -> Callable[[Device], Check | Background]:
    """The fit check of one rank's attention shapes (TENSOR_PARALLEL_SIZE ranks split the heads) in the
    dtype vLLM will run them in on the device (DTYPE, else the checkpoint's where the device has bf16),
    and what the extra words and the environment make it launch beyond them (ReplaySSM, tuned files)."""
    def run(device: Device) -> Check | Background:
        config = resolved.config_file
        if config is not None and resolved.config is not None and resolved.overridden:
            config = written_config(resolved.config)
        if config is None or model_config(resolved) is None:
            return lambda: warned(clamp.FIT, "not run: the model's config.json is not present or not readable",
                                  "see the model check")
        typed = resolved.typed
        model_type = (typed.text_model_type or typed.model_type) if typed else None
        unproven = [why for why in (
            clamp.replayssm_unproven(extras.get("use_replayssm"), extras.get("replayssm_buffer_len"), model_type),
            clamp.tuned_folder_unproven(env or {})) if why]
        towers = str(extras.get("mm_encoder_attn_backend") or "").strip().upper() == "TRITON_ATTN"
        return Background(lambda: begun_in_thread(clamp.FIT, lambda: clamp.with_unproven(
            clamp.start_fit(config, model_config(resolved), device.cc, device.smem_optin, tensor_parallel=tensor_parallel_size,
                            dtype=dtype, towers=towers), unproven)))
    return run


def fp16_check(resolved: model.Resolved, dtype: str) -> Callable[[Device], Check]:
    """What runs in fp32 in the dtype vLLM runs the model in on the device (DTYPE, else float16 below 8.0)."""
    def run(device: Device) -> Check:
        config = model_config(resolved)
        return lambda: fp16.check_fp16(config, clamp.run_dtype(config, device.cc, dtype) if config else "unknown",
                                       device.cc)
    return run


def written_config(config: dict) -> str:
    """`config` (config.json with --hf-overrides applied) as a file for the fit check's subprocess."""
    folder = tempfile.mkdtemp(prefix="vllm-turing-config-")
    path = os.path.join(folder, "config.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    return path


def config_source(extras: Extras) -> model.ConfigSource:
    """Where the server reads the model's config from, as the extra words set it."""
    revision = extras.get("revision")
    load_format, config_format = extras.get("load_format"), extras.get("config_format")
    tokenizer = extras.get("tokenizer")
    return model.ConfigSource(json_object(extras.get("hf_overrides")) or None, extras.get("hf_config_path") or None,
                              extras.name("hf_config_path"), revision if isinstance(revision, str) and revision else None,
                              load_format if isinstance(load_format, str) and load_format else "auto",
                              extras.name("load_format"),
                              config_format if isinstance(config_format, str) and config_format else "auto",
                              extras.name("config_format"),
                              tokenizer if isinstance(tokenizer, str) and tokenizer else None)


@dataclass(frozen=True)
class Models:
    """MODEL and DRAFTER, each found and read once for every check that looks at them."""
    model: model.Resolved
    drafter: model.Resolved | None

    @property
    def loaded(self) -> list[model.Resolved]:
        return [self.model] + ([self.drafter] if self.drafter else [])


def hub_problem(name: str, variable: str, value: str, settings: Settings,
                env: Mapping[str, str]) -> model.Resolved | None:
    """A model id that is not in the cache, on a host that cannot reach the Hub: refused now, not
    after the server's download retries."""
    if settings.hf_offline or not settings.download_at_start or os.path.isabs(value) or value.startswith("."):
        return None  # without DOWNLOAD_AT_START the model check points to fetch, network or not
    down = hub_access.unreachable(env)
    if down is None:
        return None
    probed, why = down
    return model.Resolved(None, None, failed(
        name, f"{variable}={value} is not in the Hugging Face cache {settings.hf_hub_cache} and the Hub cannot be "
              f"reached ({probed}: {why})",
        "download the model on a host with network into the mounted HF cache or model directory, or give the "
        "container network access (HTTPS_PROXY where a proxy is needed)"))


def resolve_models(settings: Settings, env: Mapping[str, str] | None = None, extras: Extras | None = None) -> Models:
    """MODEL (its config read as the server will: --hf-config-path, --hf-overrides) and the drafter
    (DRAFTER / SPECULATIVE_CONFIG, or --speculative-config in the extra words)."""
    source = config_source(extras) if extras is not None else model.MODEL_FOLDER_CONFIG
    drafter = settings.drafter or (speculative_drafter(extras) if extras is not None else None)

    def resolve(name: str, variable: str, value: str, source: model.ConfigSource) -> model.Resolved:
        def read() -> model.Resolved:
            found = model.resolve(name, variable, value, settings.hf_hub_cache, settings.hf_offline, source,
                                  settings.download_at_start)
            if found.path is None and env is not None:
                return hub_problem(name, variable, value, settings, env) or found
            return found
        try:
            found = within(CHECK_DEADLINE_S, read)
        except Exception as error:
            return model.Resolved(None, None, could_not_run(name, error))
        if found is OVERDUE:
            return model.Resolved(None, None, failed(name, f"{variable}={value}: reading it did not finish in "
                                                           f"{CHECK_DEADLINE_S:.0f} s", "find what hangs there (a "
                                                           "network mount, a FIFO)"))
        return found
    return Models(resolve(model.MODEL, "MODEL", settings.model, source),
                  resolve(model.DRAFTER, "DRAFTER" if settings.drafter else extras.name("speculative_config") + " model",
                          drafter, model.MODEL_FOLDER_CONFIG) if drafter else None)


def writes_vllm_cache(settings: Settings) -> bool:
    """Whether the server must write VLLM_CACHE_ROOT to serve: torch.compile makes its folder there
    (vLLM 0.33.0 compilation/backends.py, os.makedirs), a multi-GPU server its peer-to-peer table
    (distributed/device_communicators/all_reduce_utils.py). With ENFORCE_EAGER on one GPU it serves
    without (measured on the CPU vehicle as uid 4242: healthy, a completion answered)."""
    return not (settings.enforce_eager and settings.world_size == 1)


def disk_targets(settings: Settings) -> list[disk.Target]:
    """The paths measured, each marked as the cache check judges an unwritable one (cache_writes)."""
    return [disk.Target("HF cache", settings.hf_hub_cache, disk.NEED_HF_CACHE, must_write=False, setting="HF_HUB_CACHE"),
            disk.Target("TMPDIR", settings.tmpdir, disk.NEED_TMPDIR, setting="TMPDIR"),
            disk.Target("Triton cache", settings.triton_cache_dir, disk.NEED_TRITON_CACHE, setting="TRITON_CACHE_DIR"),
            disk.Target("vLLM cache", settings.vllm_cache_root, disk.NEED_VLLM_CACHE,
                        must_write=writes_vllm_cache(settings), setting="VLLM_CACHE_ROOT")]


def cache_writes(settings: Settings, extras: Extras) -> tuple[cache.Written, ...]:
    """Every cache folder the server writes besides VLLM_CACHE_ROOT (the cache check judges that one
    itself), with what an unwritable one does."""
    written = [cache.Written("TRITON_CACHE_DIR", settings.triton_cache_dir, True, cache.TRITON_CONSEQUENCE, True),
               cache.Written("HF_HUB_CACHE", settings.hf_hub_cache, False,
                             "a Hub model id cannot be downloaded or locked there")]
    if settings.cache_home:
        written.append(cache.Written("XDG_CACHE_HOME", settings.cache_home, False,
                                     "libraries that keep their caches there (FlashInfer, outlines) fail or rebuild"))
    if settings.inductor_cache_dir:
        written.append(cache.Written("TORCHINDUCTOR_CACHE_DIR", settings.inductor_cache_dir, False,
                                     "torch.compile fails at its first compile unless ENFORCE_EAGER is set", True))
    if settings.cuda_cache_path:
        written.append(cache.Written("CUDA_CACHE_PATH", settings.cuda_cache_path, False,
                                     "CUDA compiles its PTX afresh at every start"))
    download = extras.get("download_dir")
    if isinstance(download, str) and os.path.isabs(download):
        written.append(cache.Written(extras.name("download_dir"), download, False,
                                     "a Hub model id cannot be downloaded there"))
    compile_cache = json_object(extras.get("compilation_config")).get("cache_dir")
    if isinstance(compile_cache, str) and os.path.isabs(compile_cache):
        written.append(cache.Written(f"{extras.name('compilation_config')} cache_dir", compile_cache, False,
                                     "torch.compile's artifacts are not kept, every start compiles afresh", True))
    return tuple(written)


def model_check(models: Models, settings: Settings, env: Mapping[str, str]) -> Check | Background:
    """The model check with its fetch manifest read; where it parses a tokenizer.json (tens of MiB) or,
    with VERIFY_HASHES_SECONDS, hashes the weights, it runs beside the other checks, bounded by that
    setting and the usual deadline."""
    def run() -> Result:
        found = model.check_model(models.model, settings.max_model_len, model.allow_long(env))
        return fetched.check_fetched(found, models.model, settings.verify_hashes_s)
    tokenizer = models.model.tokenizer_folder
    parses = (tokenizer and os.path.lexists(os.path.join(tokenizer, "tokenizer.json"))
              and "tokenizer.json" not in model.fetched_files(tokenizer))
    if not settings.verify_hashes_s and not parses:
        return run
    return in_background(model.MODEL, run, (settings.verify_hashes_s or 0) + CHECK_DEADLINE_S)


def in_background(name: str, work: Check, deadline_s: float) -> Background:
    """`work` started before the other checks, its result (or the line saying it hung) collected in order."""
    def start() -> Check:
        box: dict = {}
        thread = threading.Thread(target=lambda: box.update(result=guarded(name, work, deadline_s)), daemon=True)
        thread.start()
        return lambda: (thread.join(), box["result"])[1]
    return Background(start)


def model_config(resolved: model.Resolved) -> ModelConfig | None:
    """The model's config.json as read and typed once (also when its weights are not whole), or None when
    it could not be read (the model check says why)."""
    return resolved.typed


def quantization_check(models: Models, extras: Extras, loaded: Loaded) -> Callable[[Device], Check]:
    minimum, deprecated = turing_settings.quantization_from(loaded.facts)
    return lambda device: lambda: turing_settings.check_quantization(model_config(models.model), extras, device.cc,
                                                                     minimum, deprecated)


def parallel_check(settings: Settings, gpus: list[Device], models: Models, env) -> Check | Background:
    if settings.world_size == 1:
        return lambda: parallel.decide(1, 1, gpus, None)
    planned = parallel.plan_parallel(settings.tensor_parallel_size, settings.pipeline_parallel_size, gpus,
                                     model_config(models.model), env)
    return Background(planned) if callable(planned) else (lambda: planned)


NO_FACTS = Loaded(None, "not read")


def plan(settings: Settings, device: Device | None, models: Models, env: Mapping[str, str],
         gpus: list[Device] | None = None, extras: Extras = NOT_JUDGED, loaded: Loaded = NO_FACTS,
         argv_source: str | None = None, probe: Probe | None = None) -> dict[str, Check | Background]:
    """Every check by name, in report order; `env` the entrypoint's, `gpus` every visible device
    (default: the one `device`); `extras` what the extra words set, judged with the option table
    from `argv_source` (what the server's argv holds beyond the settings); `loaded` the image facts;
    `probe` the driver's answers begun as the process started (a context on the device, NVML's view;
    without it they are asked when the checks run)."""
    parallel_sizes = shm.Parallel(settings.tensor_parallel_size, settings.pipeline_parallel_size,
                                  extras.get("distributed_executor_backend"))
    parser_settings = {"TOOL_CALL_PARSER": settings.tool_call_parser, "REASONING_PARSER": settings.reasoning_parser}
    checks = {
        "devices": lambda: devices.check_devices("/dev"),
        "driver": lambda: driver.check_driver(gpu_name=device.name if device else None,
                                              compat_mode=settings.cuda_compat, seen=nvml_view(probe)),
        "argv": lambda: argv_result(extras, argv_source),
        "torch": needs_device("torch", device, torch_check(loaded, probe.context_error if probe else None)),
        "clamp": begun("clamp", clamp.check_clamp),  # imports the clamp and hashes both launchers
        "fit": needs_device("fit", device, fit_check(models.model, settings.tensor_parallel_size, settings.dtype,
                                                     extras, env)),
        "fp16": needs_device("fp16", device, fp16_check(models.model, settings.dtype)),
        "model": model_check(models, settings, env),
        "drafter": lambda: model.check_drafter(models.drafter),
        "parsers": lambda: parsers.judge_parsers(parser_settings, models.model),
        "quantization": needs_device("quantization", device, quantization_check(models, extras, loaded)),
        "audio": lambda: audio.check_audio(model_config(models.model), extras),
        "disk": lambda: disk.check_disk(disk_targets(settings)),
        "cache": lambda: cache.check_cache(settings.vllm_cache_root, written=cache_writes(settings, extras),
                                           compiles=writes_vllm_cache(settings)),
        "shm": lambda: shm.check_shm(parallel_sizes, parallel_sizes.executor(cuda=device is not None),
                                     shm.mq_chunk_mb(env)),
        "memory": lambda: memory.check_memory(model.staged_bytes(models.loaded), read_text(memory.MEMINFO),
                                              gpus=nvml_view(probe).memory(settings.world_size) if device else (),
                                              utilization=settings.gpu_memory_utilization),
        "port": lambda: port.check_port(settings.host, settings.port),
        "env": lambda: environment.check_env(env),
        "parallel": parallel_check(settings, gpus if gpus is not None else [device] if device else [], models, env),
    }
    assert tuple(checks) == CHECK_NAMES
    return checks


# A check that has not answered by then (a hung network file system, a device that blocks) fails
# saying so, and the preflight goes on. The torch check imports torch where the image facts are
# missing (seconds, more on a loaded host); background checks (the fit check's compile, the NCCL
# probe) keep their own, longer timeouts.
CHECK_DEADLINE_S = 15.0
DEADLINES_S = {"torch": 120.0}


OVERDUE = object()  # what a wait returns when work() has not returned by its deadline


def in_thread(work: Callable[[], object]) -> Callable[[float], object]:
    """Starts work() in a daemon thread (which neither the exec nor the exit waits for); the returned
    callable waits up to its deadline for work()'s value (work()'s exception raised), OVERDUE when it
    has not returned."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error
    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait(deadline_s: float):
        thread.join(deadline_s)
        if thread.is_alive():
            return OVERDUE
        if "error" in box:
            raise box["error"]
        return box["value"]
    return wait


def begun_in_thread(name: str, start: Callable[[], Check]) -> Check:
    """start() on a thread of its own, so that a background check's start returns at once: the fit
    check's table lookup imports the proof's families, tens of milliseconds of Python on a GPU host,
    which then run while the checks before it wait on the driver. The check returned waits for start()
    (within the check deadline), then for what start() began."""
    started = in_thread(start)

    def collected() -> Result:
        check = started(CHECK_DEADLINE_S)
        if check is OVERDUE:
            return failed(name, f"did not start in {CHECK_DEADLINE_S:g} s", f"find what hangs (a network mount); "
                          f"SKIP_CHECKS={name} skips it")
        return check()
    return collected


def within(deadline_s: float, work: Callable[[], object]):
    """work()'s value, or OVERDUE when it has not returned within deadline_s."""
    return in_thread(work)(deadline_s)


def could_not_run(name: str, error: Exception) -> Result:
    detail = " ".join(str(error).split())[:200]
    return failed(name, f"the check could not run: {type(error).__name__}: {detail}",
                  "report this line with the model's config.json")


def overdue(name: str, deadline_s: float) -> Result:
    return failed(name, f"did not finish in {deadline_s:g} s", f"find what hangs (a network mount, a device "
                  f"node); SKIP_CHECKS={name} skips it")


def guarded(name: str, work: Callable[[], Result], deadline_s: float) -> Result:
    """The check's result; a check that hangs or raises fails with one line instead."""
    try:
        result = within(deadline_s, work)
    except Exception as error:
        return could_not_run(name, error)
    return overdue(name, deadline_s) if result is OVERDUE else result


def begun(name: str, work: Callable[[], Result]) -> Background:
    """A plain check begun with the background checks, on a thread of its own, so that its Python runs
    while the checks before it in the report wait on the driver; collected in report order, within
    the check deadline from then."""
    def start() -> Check:
        wait = in_thread(work)

        def collected() -> Result:
            result = wait(CHECK_DEADLINE_S)
            return overdue(name, CHECK_DEADLINE_S) if result is OVERDUE else result
        return collected
    return Background(start)


def collect(name: str, collector: Callable[[], Result]) -> Result:
    try:
        return collector()
    except Exception as error:
        return could_not_run(name, error)


def run_checks(checks: dict[str, Check | Background], skip: tuple[str, ...]) -> list[Result]:
    """Background checks start first; results come in report order. Each is timed by what it added to
    the preflight: a check its run, a background check its start plus the wait for its result (not the
    other checks it ran beside)."""
    start_s, collectors = {}, {}
    for name, check in checks.items():
        if isinstance(check, Background) and name not in skip:
            started = time.perf_counter()
            try:
                collectors[name] = check.start()
            except Exception as error:
                collectors[name] = lambda result=could_not_run(name, error): result
            start_s[name] = time.perf_counter() - started
    results = []
    for name, check in checks.items():
        if name in skip:
            results.append(warned(name, "skipped by SKIP_CHECKS", f"remove {name} from SKIP_CHECKS to run it"))
            continue
        started = time.perf_counter()
        result = (collect(name, collectors[name]) if name in collectors
                  else guarded(name, check, DEADLINES_S.get(name, CHECK_DEADLINE_S)))
        results.append(Result(result.name, result.status, result.message, result.fix,
                              start_s.get(name, 0.0) + time.perf_counter() - started))
    return results
