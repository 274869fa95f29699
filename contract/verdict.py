"""One verdict vocabulary for every check on either side of the image: the entrypoint's preflight,
the build's verification, smoke's rows, the disk check's findings, readiness."""
from __future__ import annotations

import dataclasses
import enum


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    NOT_JUDGED = "not judged"  # ran, but what it shows cannot be judged here (e.g. a random-weights model)

    @property
    def severity(self) -> int:
        """Order for "the worst of several": skip, not judged < pass < warn < fail."""
        return _SEVERITY[self]


_SEVERITY = {Status.SKIP: 0, Status.NOT_JUDGED: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3}


@dataclasses.dataclass(frozen=True)
class Result:
    """A named verdict: what was found and, unless it passed, the one thing to do."""
    name: str
    status: Status
    message: str
    fix: str = ""
    elapsed_s: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status.value, "message": self.message,
                "fix": self.fix, "elapsed_s": round(self.elapsed_s, 4)}


def passed(name: str, message: str) -> Result:
    return Result(name, Status.PASS, message)


def warned(name: str, message: str, fix: str) -> Result:
    return Result(name, Status.WARN, message, fix)


def failed(name: str, message: str, fix: str) -> Result:
    return Result(name, Status.FAIL, message, fix)


def skipped(name: str, message: str) -> Result:
    return Result(name, Status.SKIP, message)


def any_failed(results) -> bool:
    return any(result.failed for result in results)


def worst(results) -> Status:
    return max((result.status for result in results), key=lambda status: status.severity,
               default=Status.SKIP)
