"""A status line: rewritten in place on a terminal, plain lines otherwise.

Plain output (a log, CI) gets a line when the status changes and at most one
every `every_s` seconds while it does not, so a long load stays readable.
"""
from __future__ import annotations

import sys
import time


class StatusLine:
    def __init__(self, stream=None, live: bool | None = None, every_s: float = 15.0):
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.every_s = every_s
        self._key = None
        self._printed_at = float("-inf")
        self._open = False

    def update(self, text: str, key: str = "") -> None:
        if self.live:
            print("\r\033[K" + text, end="", file=self.stream, flush=True)
            self._open = True
            return
        now = time.monotonic()
        if key != self._key or now - self._printed_at >= self.every_s:
            print(text, file=self.stream, flush=True)
            self._key, self._printed_at = key, now

    def finish(self) -> None:
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False
