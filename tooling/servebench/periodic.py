"""A sample taken on entry, every interval in a thread, and on exit (for peaks over a run)."""
from __future__ import annotations

import threading


class Periodic:
    interval_s: float

    def sample(self) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        """A sample from the thread; subclasses may tolerate a missed one."""
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
