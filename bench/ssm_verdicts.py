"""The hybrid families' Mamba-2 mixer shapes and the fit verdict over measured SSM launches
(bench/ssm_kernels_smem measures; bench/ssm_kernels_probe.py compiles what
patches/fitcheck/mixer_launches.py records)."""
import json
import pathlib
import subprocess
import sys
from collections import defaultdict

from patches.fitcheck.mixers import BUILTIN_HYBRIDS

REPO = pathlib.Path(__file__).resolve().parent.parent

# The matrix's hybrids (patches/fitcheck/mixers.py BUILTIN_HYBRIDS): their Mamba-2 mixers are measured.
FAMILIES = tuple(BUILTIN_HYBRIDS)


def verdicts(rows: list[dict]) -> list[dict]:
    """Per (device, family, kind, kernel): configurations measured, how many fit, the smallest need,
    and the verdict (an autotuned kernel fits when one configuration does; a plain one must)."""
    groups = defaultdict(list)
    for row in rows:
        if "device" in row:
            groups[(row["device"], row["limit"], row["family"], row["kind"], row["kernel"])].append(row)
    out = []
    for (device, limit, family, kind, kernel), members in groups.items():
        needs = [m["shared"] for m in members if m["shared"] is not None]
        fitting = [n for n in needs if n <= limit]
        autotuned = members[0]["config"] is not None
        out.append({"device": device, "limit": limit, "family": family, "kind": kind, "kernel": kernel,
                    "autotuned": autotuned, "configs": len(members), "compiled": len(needs), "fitting": len(fitting),
                    "smallest": min(needs, default=None), "largest": max(needs, default=None),
                    "fits": bool(fitting) and (autotuned or len(fitting) == len(members))})
    return out


def probe_lines(bench: str, image: str, probe: str, args: list[str], rows_of=lambda lines: lines) -> list[dict] | None:
    """The JSON lines bench/`probe` prints in a container of `image` (this checkout mounted read-only, no
    network, no GPU: nothing runs on a device), or None, said in one line on stderr, when the container
    failed or printed no rows (rows_of picks them from the lines)."""
    command = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", "-e", "CUDA_VISIBLE_DEVICES=",
               "-e", "PYTHONPATH=/bench-src", "-w", "/bench-src", "-v", f"{REPO}:/bench-src:ro", image,
               f"/bench-src/bench/{probe}", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows_of(lines):
        print(f"{bench}: the container failed (exit {done.returncode}): "
              f"{done.stderr.strip().splitlines()[-3:] or ['no output']}", file=sys.stderr)
        return None
    return lines
