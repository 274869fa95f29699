"""Which checks run, bound to the real paths and values of this container, and running them
(skipped by SKIP_CHECKS with a warning, each timed)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

from .checks import clamp, devices, disk, driver, memory, model, parallel, port
from .device import Device
from .results import CheckResult, warned
from .settings import CHECK_NAMES, Settings

Check = Callable[[], CheckResult]


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
    def run() -> CheckResult:
        from .checks.torch_runtime import check_torch  # torch is imported here only

        return check_torch(device.cc)
    return run


def fit_check(settings: Settings) -> Callable[[Device], Check | Background]:
    def run(device: Device) -> Check | Background:
        where = model.locate(settings.model, settings.hf_hub_cache)
        config = os.path.join(where, "config.json") if where else None
        if config is None or not os.path.isfile(config):
            return lambda: warned(clamp.FIT, "not run: the model's config.json is not present", "see the model check")
        return Background(lambda: clamp.start_fit(config, device.cc, device.smem_optin))
    return run


def disk_targets(settings: Settings) -> list[disk.Target]:
    return [disk.Target("HF cache", settings.hf_hub_cache, disk.NEED_HF_CACHE),
            disk.Target("TMPDIR", settings.tmpdir, disk.NEED_TMPDIR),
            disk.Target("Triton cache", settings.triton_cache_dir, disk.NEED_TRITON_CACHE),
            disk.Target("vLLM cache", settings.vllm_cache_root, disk.NEED_VLLM_CACHE)]


def staged_bytes(settings: Settings) -> int | None:
    sizes = [model.weight_bytes(name, settings.hf_hub_cache) for name in (settings.model, settings.drafter) if name]
    return None if None in sizes else sum(sizes)


def parallel_check(settings: Settings, gpus: list[Device], env) -> Check | Background:
    if settings.world_size == 1:
        return lambda: parallel.decide(1, 1, gpus, None)
    where = model.locate(settings.model, settings.hf_hub_cache)
    config = os.path.join(where, "config.json") if where else None
    planned = parallel.plan_parallel(settings.tensor_parallel_size, settings.pipeline_parallel_size, gpus, config, env)
    return Background(planned) if callable(planned) else (lambda: planned)


def plan(settings: Settings, device: Device | None, gpus: list[Device] | None = None,
         env=None) -> dict[str, Check | Background]:
    """Every check by name, in report order."""
    checks = {
        "devices": lambda: devices.check_devices("/dev"),
        "driver": lambda: driver.check_driver(),
        "torch": needs_device("torch", device, torch_check),
        "clamp": lambda: clamp.check_clamp(),
        "fit": needs_device("fit", device, fit_check(settings)),
        "model": lambda: model.check_model(settings.model, settings.hf_hub_cache, settings.hf_offline),
        "drafter": lambda: model.check_drafter(settings.drafter, settings.hf_hub_cache, settings.hf_offline),
        "disk": lambda: disk.check_disk(disk_targets(settings)),
        "memory": lambda: memory.check_memory(staged_bytes(settings), read_text(memory.MEMINFO)),
        "port": lambda: port.check_port(settings.host, settings.port),
        "parallel": parallel_check(settings, gpus if gpus is not None else [device] if device else [],
                                   os.environ if env is None else env),
    }
    assert tuple(checks) == CHECK_NAMES
    return checks


def run_checks(checks: dict[str, Check | Background], skip: tuple[str, ...]) -> list[CheckResult]:
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
        results.append(CheckResult(result.name, result.status, result.message, result.fix,
                                   time.perf_counter() - started))
    return results
