"""The image's own judgment of a model from its small files, before any weight byte is written: the
preflight's model, fit, quantization, memory and disk checks, called as they are, on the target GPU."""
from __future__ import annotations

from typing import Mapping, Set

from contract.devices import DeviceLimits
from contract.verdict import Result, Status, failed, worst

from door.problem import Problem
from ..argv import Extras
from ..checks import clamp, disk, memory, model, turing_settings

MODELS_FOLDER = "models folder"
NOT_JUDGED = Extras({}, judged=False)


def judge(folder: str, sizes: Mapping[str, int], missing: Set[str], device: DeviceLimits, meminfo_text: str,
          quantization_minimum, drafter: bool = False, card: tuple[str, int] | None = None,
          quantization_deprecated=turing_settings.vllm_deprecated) -> tuple[list[Result], list[str]]:
    """(results, the weight files vLLM would load) for the model whose small files are in `folder`;
    `sizes` are the repository's files by path, `missing` those not yet complete in the folder; a
    `drafter` is judged also by the preflight's drafter check; a named `card` (name, memory in bytes)
    has its memory judged against the weights."""
    cc = divmod(device.cc, 10)
    try:
        config, typed = model.read_config(folder)
        _, loaded = model.weight_files(folder, sorted(sizes))
    except Problem as problem:
        return [failed(model.MODEL, str(problem), problem.fix)], []
    weight_bytes = sum(sizes[name] for name in loaded)
    missing_bytes = sum(sizes[name] for name in loaded if name in missing)
    config_file = f"{folder}/config.json"
    results = [
        clamp.start_fit(config_file, typed, cc, device.limit)(),
        turing_settings.check_quantization(typed, NOT_JUDGED, cc, quantization_minimum, quantization_deprecated),
        memory.check_memory(weight_bytes, meminfo_text),
        *([memory.judge_card_memory(weight_bytes, *card)] if card else []),
        disk.check_disk([disk.Target(MODELS_FOLDER, folder, missing_bytes)]),
    ]
    if drafter:
        planned = model.ModelDir(folder, config, tuple(loaded), weight_bytes, typed)
        results.append(model.check_drafter(model.Resolved(folder, planned, None, config, typed)))
    return results, loaded


def refusal(results: list[Result]) -> Result | None:
    """The first failed result, when the model cannot serve there."""
    if worst(results) is not Status.FAIL:
        return None
    return next(result for result in results if result.status is Status.FAIL)
