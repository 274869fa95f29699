"""A probe's run in a container of the image: this checkout mounted, its JSON lines read back."""
import sys
from pathlib import Path
from door import files
from door import children

REPO = Path(__file__).resolve().parents[2]


def container_lines(bench: str, image: str, program: list[str], rows_of=lambda lines: lines, network: bool = False,
                    tail: int = 3) -> list[dict] | None:
    """The JSON lines `python3 PROGRAM...` prints in a container of `image` (this checkout mounted
    read-only, no GPU: nothing runs on a device; no network unless `network`), or None, said in one
    line on stderr naming `bench` with the last `tail` lines of its stderr, when the container failed
    or printed no rows (rows_of picks them from the lines)."""
    command = ["docker", "run", "--rm", *([] if network else ["--network", "none"]), "--entrypoint", "python3",
               "-e", "CUDA_VISIBLE_DEVICES=", "-e", "PYTHONPATH=/bench-src", "-w", "/bench-src",
               "-v", f"{REPO}:/bench-src:ro", image, *program]
    done = children.run(command)
    lines = [files.own_json(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows_of(lines):
        print(f"{bench}: the container failed (exit {done.returncode}): "
              f"{done.stderr.strip().splitlines()[-tail:] or ['no output']}", file=sys.stderr)
        return None
    return lines


def probe_lines(bench: str, image: str, probe: str, args: list[str], rows_of=lambda lines: lines) -> list[dict] | None:
    """The JSON lines the module `probe` (python3 -m) prints in a container of `image`, with no network."""
    return container_lines(bench, image, ["-m", probe, *args], rows_of)
