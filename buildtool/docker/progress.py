"""Build progress: a live status line on a terminal, a short log otherwise.

BuildKit's plain output is always captured, so a failure can be reported by the
last line the failing step printed (our tools print their refusal as one line).
A log (CI, a file) gets each step that runs, the lines our own build steps address to the
reader (PROGRESS_PREFIXES: the fit check's progress and its refusals) and BuildKit's errors;
the rest (pip's, apt's and vLLM's chatter, thousands of lines) stays in `lines` for the failure.
"""
import re
import shutil
import sys

from buildtool.status_line import StatusLine

_STEP_OUTPUT = re.compile(r"^#(\d+) (?:\d+\.\d+ )?(.*)$")
_STEP_ERROR = re.compile(r"^#(\d+) ERROR: (.*)$")
_STEP_HEADER = re.compile(r"^#\d+ \[(?:([\w.-]+) +)?(\d+/\d+)\] (.*)$")
_UNNAMED_STAGE = re.compile(r"stage-\d+")  # BuildKit's name for a stage the Dockerfile does not name
_NOISE = ("sha256:", "transferring", "DONE", "CACHED", "extracting", "resolve ", "naming to", "exporting")
# A step's output lines that say nothing: none, and BuildKit's "#12 ..." (the step goes on after other
# steps' lines), which a loaded host gets between a step's last line and its error.
_CONTINUED = ("", "...")
# What our build steps print for the reader of the build's log (patches/fitcheck/progress.py).
PROGRESS_PREFIXES = ("fitcheck: ",)
STEP_TEXT_WIDTH = 100


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
            shown = log_line(line)
            if shown is not None:
                print(shown, file=self.status.stream, flush=True)
            return
        match = _STEP_OUTPUT.match(line)
        text = match.group(2) if match else line
        if text.startswith("[") and "]" in text:
            self._step = text
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.status.update((self._step + "  " + text if text != self._step else text)[:width])

    def close(self) -> None:
        self.status.finish()


def log_line(line: str) -> str | None:
    """What a log shows of one line of BuildKit's plain output, None for nothing."""
    header = _STEP_HEADER.match(line)
    if header:
        stage, step, text = header.groups()
        if stage and not _UNNAMED_STAGE.fullmatch(stage):
            step = f"{stage} {step}"
        text = " ".join(text.split())
        return f"[{step}] {text[:STEP_TEXT_WIDTH]}{'...' if len(text) > STEP_TEXT_WIDTH else ''}"
    if _STEP_ERROR.match(line) or line.startswith("ERROR"):
        return line
    output = _STEP_OUTPUT.match(line)
    if output and output.group(2).startswith(PROGRESS_PREFIXES):
        return output.group(2)
    return None


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
                       not m.group(2).startswith(_NOISE) and m.group(2).strip() not in _CONTINUED]
        if step_output:
            return step_output[-1].strip()
        return errors[-1]
    tail = [l for l in lines if l.strip()]
    return tail[-1].strip() if tail else "the build printed nothing"
