"""The fit check's progress for the reader of a build log: a line per stage of each pass, and while
compiles run, their count done and left with the time spent: the first EVERY_S seconds into a stage,
then each time the stage's time doubles (30, 60, 120, 240 s...). A stage prints about log2(its
time / EVERY_S) lines, so a slow or loaded host lengthens the log by a line or two, not by one line
per interval (the build's output after the base stays within about 60 lines).

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
        self._label_started = self.started
        self._next_due = every_s
        self.batches = 0  # compile batches begun under this label (a pass runs several: tile search, launches, ...)

    def elapsed(self) -> str:
        return f"{self.clock() - self.started:.0f} s"

    def say(self, text: str) -> None:
        print(f"{PREFIX}{self.label}{': ' if self.label else ''}{text} ({self.elapsed()})", file=self.stream,
              flush=True)

    def compiled(self, done: int, total: int) -> None:
        """Called as compiles finish; prints when the stage's time reaches the next due mark."""
        if done == 1:
            self.batches += 1
        in_stage = self.clock() - self._label_started
        if done < total and in_stage >= self._next_due:
            self.say(f"compile batch {self.batches}: {done}/{total} done, {total - done} left")
            while self._next_due <= in_stage:
                self._next_due *= 2

    def start(self, label: str) -> None:
        self.label, self.batches = label, 0
        self._label_started, self._next_due = self.clock(), self.every_s


_CURRENT: list[Progress | None] = [None]


def current() -> Progress | None:
    return _CURRENT[0]


def turn_on(progress: Progress | None) -> None:
    _CURRENT[0] = progress
