"""Which checks run, bound to the real paths and values of this container, and running them
(skipped by SKIP_CHECKS with a warning, each timed)."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable

from .checks import audio, clamp, devices, disk, driver, memory, model, port, turing_settings
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


def model_config(settings: Settings) -> dict | None:
    """The model's config.json, or None when it is absent or unreadable (the model check says why)."""
    where = model.locate(settings.model, settings.hf_hub_cache)
    try:
        with open(os.path.join(where or "", "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def quantization_check(settings: Settings, args: tuple[str, ...]) -> Callable[[Device], Check]:
    return lambda device: lambda: turing_settings.check_quantization(model_config(settings), args, device.cc)


def plan(settings: Settings, device: Device | None, args: tuple[str, ...] = ()) -> dict[str, Check | Background]:
    """Every check by name, in report order (args: the server's extra arguments)."""
    checks = {
        "devices": lambda: devices.check_devices("/dev"),
        "driver": lambda: driver.check_driver(gpu_name=device.name if device else None,
                                              compat_mode=settings.cuda_compat),
        "torch": needs_device("torch", device, torch_check),
        "clamp": lambda: clamp.check_clamp(),
        "fit": needs_device("fit", device, fit_check(settings)),
        "model": lambda: model.check_model(settings.model, settings.hf_hub_cache, settings.hf_offline),
        "drafter": lambda: model.check_drafter(settings.drafter, settings.hf_hub_cache, settings.hf_offline),
        "quantization": needs_device("quantization", device, quantization_check(settings, args)),
        "audio": lambda: audio.check_audio(model_config(settings)),
        "disk": lambda: disk.check_disk(disk_targets(settings)),
        "memory": lambda: memory.check_memory(staged_bytes(settings), read_text(memory.MEMINFO)),
        "port": lambda: port.check_port(settings.host, settings.port),
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
