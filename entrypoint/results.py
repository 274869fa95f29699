"""The outcome of one check: pass, warn or fail, what was found and the one thing to do."""
from __future__ import annotations

import dataclasses

from contract.verdict import Status  # one enum, so checks written on contract.verdict's Result count here too


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    message: str
    fix: str = ""
    elapsed_s: float = 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status.value, "message": self.message,
                "fix": self.fix, "elapsed_s": round(self.elapsed_s, 4)}


def passed(name: str, message: str) -> CheckResult:
    return CheckResult(name, Status.PASS, message)


def warned(name: str, message: str, fix: str) -> CheckResult:
    return CheckResult(name, Status.WARN, message, fix)


def failed(name: str, message: str, fix: str) -> CheckResult:
    return CheckResult(name, Status.FAIL, message, fix)


def any_failed(results: list[CheckResult]) -> bool:
    return any(result.status is Status.FAIL for result in results)
