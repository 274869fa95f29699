"""The image build's fit check: every pass, in one process, so vLLM, torch and Triton are imported
once rather than once per pass. `python3 -m patches.fitcheck.image_passes` (the Dockerfile's step).

Each pass merges its entries and verdicts into the image's fit table; its JSON report is written
once the full compiles have confirmed it (a failing pass's at once). The full compiles that confirm
the shared-memory-only ones (compiler.cross_check) run once, after every pass, one per kernel and
target: a kernel met in fp16 and bf16 on one target is compiled in full once, at its larger need.
The first pass that fails (exit 1: a launch does not fit; 2: bad input) ends the run with its code,
its report written and its failing launches printed whole, so the build fails naming them. Last, the
versions the passes proved.

While it runs it prints a progress line per pass and, during long compile batches, the compiles done
and left (patches/fitcheck/progress.py); at the end a summary of at most about 30 lines.
"""
from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from pathlib import Path

from contract.clamp_paths import (FIT_REPORT, FIT_REPORT_SM86, FIT_REPORT_SM86_BF16, FIT_TABLE, VERSIONS_REPORT,
                                  write_report)
from patches.fitcheck import progress as progress_
from patches.fitcheck import report as report_

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
# Per pass and for the closing cross-check: (label, wall seconds, the span of compiler.LEDGER it added),
# for bench/fitcheck's breakdown.
TIMINGS: list[tuple[str, float, int, int]] = []


def check_pass(options: tuple) -> dict:
    """One pass's report (its cross-check left to the end); raises the check's refusals."""
    from patches.fitcheck.__main__ import parse
    from patches.fitcheck.run import plan, run

    fit_options, _ = parse([*options, "--write-table", FIT_TABLE])
    report = run(plan(fit_options), cross_check=False)
    report["matrix"] = fit_options.matrix
    return report


def cross_check() -> list[dict]:
    from patches.fitcheck.compiler import cross_check as full_compiles

    return full_compiles()


def _timed(label: str, work):
    from patches.fitcheck.compiler import LEDGER

    started, first = time.monotonic(), len(LEDGER)
    try:
        return work()
    finally:
        TIMINGS.append((label, time.monotonic() - started, first, len(LEDGER)))


def main() -> int:
    from patches.fitcheck.__main__ import refusals

    shown = progress_.Progress()
    progress_.turn_on(shown)
    done = []
    try:
        for options, path in PASSES:
            shown.start(pass_label(options))
            shown.say("recording and compiling")
            try:
                report = _timed(shown.label, lambda: check_pass(options))
            except refusals() as error:
                print(f"fitcheck: {shown.label}: {error}", file=sys.stderr, flush=True)
                return 2
            done.append((options, path, report))
            if not report["all_fit"]:
                _write(path, report)  # the build log names the launch; the report holds every row
                for line in report_.failures(report):
                    print(f"fitcheck: does not fit: {line}", file=sys.stderr, flush=True)
                return 1
            shown.say(report_.pass_line(report))
        shown.start("every pass")
        shown.say("compiling the largest need of each kernel in full, to confirm the shared-memory-only compiles")
        try:
            checked = _timed("cross-check", cross_check)
        except refusals() as error:
            print(f"fitcheck: {error}", file=sys.stderr, flush=True)
            return 2
        for _, path, report in done:  # written once, with the full compiles that confirmed its target's needs
            cc = report["device"]["cc"]
            report["compile"]["cross_checked"] = [entry for entry in checked if entry["cc"] == cc]
            _write(path, report)
        shown.start("")
        shown.say(f"{len(checked)} kernels confirmed by a full compile")
        for line in report_.build_summary([report for _, _, report in done], FIT_TABLE):
            print(f"fitcheck: {line}", file=sys.stderr, flush=True)
    finally:
        progress_.turn_on(None)
    Path(VERSIONS_REPORT).write_text(json.dumps(proved_versions()))
    return 0


def pass_label(options: tuple) -> str:
    device = options[options.index("--device") + 1]
    dtype = options[options.index("--dtype") + 1] if "--dtype" in options else "float16"
    matrix = options[options.index("--matrix") + 1] if "--matrix" in options else "all"
    return f"{device} {dtype}" + ("" if matrix == "all" else f" ({matrix})")


def _write(path: str | None, report: dict) -> None:
    if path is not None:
        write_report(path, report)


def proved_versions() -> dict[str, str]:
    return {package: importlib.metadata.version(package) for package in PROVED_PACKAGES}


if __name__ == "__main__":
    raise SystemExit(main())
