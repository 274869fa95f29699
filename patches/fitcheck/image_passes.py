"""The image build's fit check: every pass, in one process, so vLLM, torch and Triton are imported
once rather than once per pass. `python3 -m patches.fitcheck.image_passes` (the Dockerfile's step).

Each pass merges its entries and verdicts into the image's fit table and writes its JSON report; the
first pass that fails (exit 1: a launch does not fit; 2: bad input) ends the run with its code,
its report written, its own stderr the step's last lines, so the build fails naming the launch. Last, the versions the passes proved.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
from pathlib import Path

from contract.clamp_paths import FIT_REPORT, FIT_REPORT_SM86, FIT_REPORT_SM86_BF16, FIT_TABLE, VERSIONS_REPORT
from patches.fitcheck.__main__ import main as fitcheck

# (the pass's options, where its report goes or None)
PASSES = (
    # Turing: the whole matrix, and the launches without the clamp beside them (its inertness).
    (("--device", "sm75", "--compare-unpatched"), FIT_REPORT),
    # Ampere (RTX 30xx) in fp16, and in bf16, which it runs a bf16 checkpoint in (Turing casts to fp16).
    (("--device", "sm86"), FIT_REPORT_SM86),
    (("--device", "sm86", "--dtype", "bfloat16"), FIT_REPORT_SM86_BF16),
    # H100/H200, Gemma 4 alone: the GPU tier's device, answered from the table.
    (("--device", "sm90", "--matrix", "gemma4"), None),
    (("--device", "sm90", "--matrix", "gemma4", "--dtype", "bfloat16"), None),
)
PROVED_PACKAGES = ("vllm", "torch", "triton")


def main() -> int:
    for options, report in PASSES:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = fitcheck([*options, "--write-table", FIT_TABLE, "--json"])
        if report is not None:
            Path(report).write_text(printed.getvalue())
        if code != 0:  # the pass's own last line names the launch: build.py reports that line
            return code
    Path(VERSIONS_REPORT).write_text(json.dumps(proved_versions()))
    return 0


def proved_versions() -> dict[str, str]:
    return {package: importlib.metadata.version(package) for package in PROVED_PACKAGES}


if __name__ == "__main__":
    raise SystemExit(main())
