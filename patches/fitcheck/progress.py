"""The fit check's progress for the reader of a build log: a line per stage of each pass, and while
compiles run, their count done and left with the time spent, at most one line every EVERY_S seconds.

Lines go to stderr and start with "fitcheck: " (build.py's log shows exactly such lines of a build
step, buildtool/docker/progress.py). Off unless a caller turns it on (the image's passes do).
"""
from __future__ import annotations

import sys
import time

EVERY_S = 30.0
PREFIX = "fitcheck: "


class Progress:
    def __init__(self, stream=None, every_s: float = EVERY_S, clock=time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self.label = ""
        self._printed_at = float("-inf")
        self.batches = 0  # compile batches begun under this label (a pass runs several: tile search, launches, ...)

    def elapsed(self) -> str:
        return f"{self.clock() - self.started:.0f} s"

    def say(self, text: str) -> None:
        print(f"{PREFIX}{self.label}{': ' if self.label else ''}{text} ({self.elapsed()})", file=self.stream,
              flush=True)
        self._printed_at = self.clock()

    def compiled(self, done: int, total: int) -> None:
        """Called as compiles finish; prints when EVERY_S has passed since the last line."""
        if done == 1:
            self.batches += 1
        if done < total and self.clock() - self._printed_at >= self.every_s:
            self.say(f"compile batch {self.batches}: {done}/{total} done, {total - done} left")

    def start(self, label: str) -> None:
        self.label, self.batches = label, 0


_CURRENT: list[Progress | None] = [None]


def current() -> Progress | None:
    return _CURRENT[0]


def turn_on(progress: Progress | None) -> None:
    _CURRENT[0] = progress
