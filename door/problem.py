"""The project's one kind of problem, on both sides of the image boundary.

A Problem is what was found, in one line that names the setting, flag or file, and the fix; its
exit code follows the project's convention: 1 a check or step failed (run it again, or fix the
host), 2 bad input. UsageError is bad input. Subclass only where a caller catches one kind apart.
"""
from __future__ import annotations


class Problem(Exception):
    exit_code = 1

    def __init__(self, message: str, fix: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.fix = fix
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)

    def line(self) -> str:
        """The one line a command prints: the message, then the fix where there is one."""
        return f"{self}; {self.fix}" if self.fix else str(self)


class UsageError(Problem):
    """Bad input: a flag, a setting or a file the user named (exit 2)."""

    exit_code = 2
