"""Build progress: a live status line on a terminal, plain lines otherwise.

BuildKit's plain output is always captured, so a failure can be reported by the
last line the failing step printed (our tools print their refusal as one line).
"""
import re
import shutil
import sys

from buildtool.status_line import StatusLine

_STEP_OUTPUT = re.compile(r"^#(\d+) (?:\d+\.\d+ )?(.*)$")
_STEP_ERROR = re.compile(r"^#(\d+) ERROR: (.*)$")
_NOISE = ("sha256:", "transferring", "DONE", "CACHED", "extracting", "resolve ", "naming to", "exporting")


class ProgressView:
    """Every line kept (for failure_line); shown in full, or as one live line on a terminal."""

    def __init__(self, stream=sys.stdout, live: bool | None = None):
        self.status = StatusLine(stream, live)
        self.lines: list[str] = []
        self._step = ""

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        self.lines.append(line)
        if not self.status.live:
            print(line, file=self.status.stream, flush=True)
            return
        match = _STEP_OUTPUT.match(line)
        text = match.group(2) if match else line
        if text.startswith("[") and "]" in text:
            self._step = text
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.status.update((self._step + "  " + text if text != self._step else text)[:width])

    def close(self) -> None:
        self.status.finish()


def failure_line(lines: list[str]) -> str:
    """The last line the failing build step printed, or BuildKit's own error."""
    failed = None
    errors = []
    for line in lines:
        match = _STEP_ERROR.match(line)
        if match:
            failed = match.group(1)
            errors.append(match.group(2))
    if failed is not None:
        step_output = [m.group(2) for m in map(_STEP_OUTPUT.match, lines)
                       if m and m.group(1) == failed and not m.group(2).startswith(("ERROR", "[")) and
                       not m.group(2).startswith(_NOISE) and m.group(2).strip()]
        if step_output:
            return step_output[-1].strip()
        return errors[-1]
    tail = [l for l in lines if l.strip()]
    return tail[-1].strip() if tail else "the build printed nothing"
