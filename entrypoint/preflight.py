"""Which checks run, bound to the real paths and values of this container, and running them
(skipped by SKIP_CHECKS with a warning, each timed)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from contract.verdict import Result, warned

from . import environment
from .checks import (audio, cache, clamp, devices, disk, driver, memory, model, parallel, parsers, port, shm,
                     turing_settings)
from .device import Device
from .settings import CHECK_NAMES, Settings

Check = Callable[[], Result]


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


@dataclass(frozen=True)
class Background:
    """A check whose slow part starts before the other checks run: `start` begins it and returns
    the callable that waits for its result."""
    start: Callable[[], Check]


def needs_device(name: str, device: Device | None, run: Callable[[Device], Check | Background]):
    if device is None:
        return lambda: warned(name, "not run: no CUDA device (see the device line)", "see the devices and driver checks")
    return run(device)


def torch_check(device: Device) -> Check:
    def run() -> Result:
        from .checks.torch_runtime import check_torch  # torch is imported here only

        return check_torch(device.cc)
    return run


def fit_check(resolved: model.Resolved) -> Callable[[Device], Check | Background]:
    def run(device: Device) -> Check | Background:
        config = resolved.config_file
        if config is None or resolved.config is None:
            return lambda: warned(clamp.FIT, "not run: the model's config.json is not present or not readable",
                                  "see the model check")
        return Background(lambda: clamp.start_fit(config, resolved.config, device.cc, device.smem_optin))
    return run


@dataclass(frozen=True)
class Models:
    """MODEL and DRAFTER, each found and read once for every check that looks at them."""
    model: model.Resolved
    drafter: model.Resolved | None

    @property
    def loaded(self) -> list[model.Resolved]:
        return [self.model] + ([self.drafter] if self.drafter else [])


def resolve_models(settings: Settings) -> Models:
    def resolve(name: str, variable: str, value: str) -> model.Resolved:
        return model.resolve(name, variable, value, settings.hf_hub_cache, settings.hf_offline)
    return Models(resolve(model.MODEL, "MODEL", settings.model),
                  resolve(model.DRAFTER, "DRAFTER", settings.drafter) if settings.drafter else None)


def disk_targets(settings: Settings) -> list[disk.Target]:
    return [disk.Target("HF cache", settings.hf_hub_cache, disk.NEED_HF_CACHE),
            disk.Target("TMPDIR", settings.tmpdir, disk.NEED_TMPDIR),
            disk.Target("Triton cache", settings.triton_cache_dir, disk.NEED_TRITON_CACHE),
            disk.Target("vLLM cache", settings.vllm_cache_root, disk.NEED_VLLM_CACHE)]


def model_config(resolved: model.Resolved) -> dict | None:
    """The model's config.json as read once (also when its weights are not whole), or None when it
    could not be read (the model check says why)."""
    return resolved.config


def quantization_check(models: Models, argv: list[str]) -> Callable[[Device], Check]:
    return lambda device: lambda: turing_settings.check_quantization(model_config(models.model), tuple(argv), device.cc)


def parallel_check(settings: Settings, gpus: list[Device], models: Models, env) -> Check | Background:
    if settings.world_size == 1:
        return lambda: parallel.decide(1, 1, gpus, None)
    planned = parallel.plan_parallel(settings.tensor_parallel_size, settings.pipeline_parallel_size, gpus,
                                     model_config(models.model), env)
    return Background(planned) if callable(planned) else (lambda: planned)


def plan(settings: Settings, device: Device | None, models: Models, argv: list[str],
         env: Mapping[str, str], gpus: list[Device] | None = None) -> dict[str, Check | Background]:
    """Every check by name, in report order; `argv` is the server's, `env` the entrypoint's, `gpus`
    every visible device (default: the one `device`)."""
    parallel_sizes = shm.parallel_from_argv(argv)
    parser_settings = {"TOOL_CALL_PARSER": settings.tool_call_parser, "REASONING_PARSER": settings.reasoning_parser}
    checks = {
        "devices": lambda: devices.check_devices("/dev"),
        "driver": lambda: driver.check_driver(gpu_name=device.name if device else None,
                                              compat_mode=settings.cuda_compat),
        "torch": needs_device("torch", device, torch_check),
        "clamp": lambda: clamp.check_clamp(),
        "fit": needs_device("fit", device, fit_check(models.model)),
        "model": lambda: model.check_model(models.model),
        "drafter": lambda: model.check_drafter(models.drafter),
        "parsers": lambda: parsers.judge_parsers(parser_settings, models.model),
        "quantization": needs_device("quantization", device, quantization_check(models, argv)),
        "audio": lambda: audio.check_audio(model_config(models.model)),
        "disk": lambda: disk.check_disk(disk_targets(settings)),
        "cache": lambda: cache.check_cache(settings.vllm_cache_root),
        "shm": lambda: shm.check_shm(parallel_sizes, parallel_sizes.executor(cuda=device is not None),
                                     shm.mq_chunk_mb(env)),
        "memory": lambda: memory.check_memory(model.staged_bytes(models.loaded), read_text(memory.MEMINFO)),
        "port": lambda: port.check_port(settings.host, settings.port),
        "env": lambda: environment.check_env(env),
        "parallel": parallel_check(settings, gpus if gpus is not None else [device] if device else [], models, env),
    }
    assert tuple(checks) == CHECK_NAMES
    return checks


def run_checks(checks: dict[str, Check | Background], skip: tuple[str, ...]) -> list[Result]:
    """Background checks start first; results come in report order, each timed from its start."""
    started_at, collectors = {}, {}
    for name, check in checks.items():
        if isinstance(check, Background) and name not in skip:
            started_at[name] = time.perf_counter()
            collectors[name] = check.start()
    results = []
    for name, check in checks.items():
        if name in skip:
            results.append(warned(name, "skipped by SKIP_CHECKS", f"remove {name} from SKIP_CHECKS to run it"))
            continue
        started = started_at.get(name, time.perf_counter())
        result = collectors[name]() if name in collectors else check()
        results.append(Result(result.name, result.status, result.message, result.fix,
                                   time.perf_counter() - started))
    return results
