"""The preflight report: one line per finding with its fix, and how long the checks took."""
from __future__ import annotations

import json

from .device import Device
from door.files import shown
from door.redact import redact
from contract.verdict import Result, Status, any_failed


def counts(results: list[Result]) -> dict[str, int]:
    return {status.value: sum(result.status is status for result in results) for status in Status}


def device_line(device: Device | None, device_error: str) -> str:
    if device is None:
        return f"device: none ({device_error})"
    return (f"device: {device.name} x{device.count}, compute capability {device.cc[0]}.{device.cc[1]}, "
            f"{device.smem_optin} bytes shared memory per block")


def render_text(results: list[Result], elapsed_s: float, device: Device | None, device_error: str) -> str:
    width = max(len(result.name) for result in results)
    lines = [f"vllm-turing preflight, {shown(device_line(device, device_error))}"]
    for result in results:
        line = f"{result.status.value.upper():4}  {result.name:{width}}  {shown(redact(result.message))}"
        lines.append(line + (f" -> fix: {shown(redact(result.fix))}" if result.fix and result.status is not Status.PASS
                             else ""))
    tally = counts(results)
    lines.append(f"checks took {elapsed_s:.2f} s: {tally['fail']} failed, {tally['warn']} warned, "
                 f"{tally['pass']} passed")
    return "\n".join(lines)


def render_json(results: list[Result], elapsed_s: float, device: Device | None, device_error: str,
                argv: list[str]) -> str:
    return json.dumps({
        "ok": not any_failed(results),
        "elapsed_s": round(elapsed_s, 4),
        "device": device.to_dict() if device else None,
        "device_error": device_error or None,
        "counts": counts(results),
        "checks": [{**result.to_dict(), "message": redact(result.message), "fix": redact(result.fix or "") or result.fix}
                   for result in results],
        "argv": argv,
    }, indent=2)
