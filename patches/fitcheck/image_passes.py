"""The image build's fit check: every pass, with vLLM, torch and Triton imported once rather than
once per pass. `python3 -m patches.fitcheck.image_passes` (the Dockerfile's step).

The passes run in two processes, split by target (TARGET_GROUPS): the parent imports, then forks a
child for the second group, so that each one's serial recording runs while the other compiles and
both cores stay busy. A target's passes stay in one process: they share its table entries and its
full compiles. Each group writes its own fit table, merged into the image's at the end.

Each pass merges its entries and verdicts into its group's table; its JSON report is written once
the full compiles have confirmed it (a failing pass's at once). The full compiles that confirm the
shared-memory-only ones (compiler.cross_check) run once per group, after its passes, one per kernel
and target: a kernel met in fp16 and bf16 on one target is compiled in full once, at its larger need.
A pass that fails (exit 1: a launch does not fit; 2: bad input) ends the run with its code, its
report written and its failing launches printed whole, so the build fails naming them. Last, the
versions the passes proved.

While it runs it prints a progress line per pass and, during long compile batches, the compiles done
and left (patches/fitcheck/progress.py); at the end a summary of at most about 30 lines.

Before the passes it takes the compile record of this vLLM release from the repository's
contract/compile-records/ (bind-mounted at COMPILE_RECORDS_MOUNT), when it was written by this Triton:
its answers stand for the shared-memory-only compiles of the same keys (contract/compile_record.py), and
the full compiles that confirm each kernel's largest need still run. After them it writes the record of
every shared-memory-only answer of the passes (COMPILE_RECORD, outside the install folder: the Dockerfile's
compile-record stage holds it, not the image), for build.py to export and keep.
"""
from __future__ import annotations

from door.problem import Problem
import gzip
import importlib.metadata
import json
import os
import signal
import sys
import time
from pathlib import Path

from contract import compile_record
from contract.clamp_paths import (COMPILE_RECORD, COMPILE_RECORDS_MOUNT, FIT_REPORT, FIT_REPORT_SM86,
                                  FIT_REPORT_SM86_BF16, FIT_TABLE, VERSIONS_REPORT, write_report)
from patches.fitcheck import progress as progress_
from patches.fitcheck import fit_report as report_

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
# The passes' devices by process: the first group in the parent, the second in a forked child.
# Balanced by their compiles' CPU time (docs/benchmarks.md): sm_86 in two dtypes against the rest.
TARGET_GROUPS = (("sm75", "sm90"), ("sm86",))
# Per pass and for each group's closing cross-check: (label, wall seconds, the span of compiler.LEDGER it
# added), for bench/fitcheck's breakdown.
TIMINGS: list[tuple[str, float, int, int]] = []


def check_pass(options: tuple, table: str = FIT_TABLE) -> dict:
    """One pass's report (its cross-check left to the end); raises the check's refusals."""
    from patches.fitcheck.__main__ import parse
    from patches.fitcheck.proof import plan, run

    fit_options, _ = parse([*options, "--write-table", table])
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


def device_of(options: tuple) -> str:
    return options[options.index("--device") + 1]


def grouped(passes=None, groups=None) -> list[list[tuple]]:
    """The passes of each target group, in PASSES order; a device no group names joins the first."""
    passes, groups = passes or PASSES, groups or TARGET_GROUPS
    placed = [[] for _ in groups]
    for entry in passes:
        index = next((i for i, devices in enumerate(groups) if device_of(entry[0]) in devices), 0)
        placed[index].append(entry)
    return [group for group in placed if group]


def run_group(passes: list[tuple], table: str, shown) -> tuple[int, list[tuple], list[dict], list[str]]:
    """(exit code, [(options, report path, report)], the cross-check, the failure's lines) of one group's
    passes, in order; each report is written once confirmed, a failing one at once (then the code is 1
    or 2, and the lines, for main to print last, name what failed: a failing launch whole)."""
    from patches.fitcheck.__main__ import refusals

    done = []
    for options, path in passes:
        shown.start(pass_label(options))
        shown.say("recording and compiling")
        try:
            report = _timed(shown.label, lambda: check_pass(options, table))
        except refusals() as error:
            return 2, done, [], [f"fitcheck: {shown.label}: {error}"]
        done.append((options, path, report))
        if not report["all_fit"]:
            _write(path, report)  # the build log names the launch; the report holds every row
            return 1, done, [], [f"fitcheck: does not fit: {line}" for line in report_.failures(report)]
        shown.say(report_.pass_line(report))
    shown.start(group_label(passes))
    shown.say("compiling the largest need of each kernel in full, to confirm the shared-memory-only compiles")
    try:
        checked = _timed("cross-check " + shown.label, cross_check)
    except refusals() as error:
        return 2, done, [], [f"fitcheck: {error}"]
    for _, path, report in done:  # written once, with the full compiles that confirmed its target's needs
        cc = report["device"]["cc"]
        report["compile"]["cross_checked"] = [entry for entry in checked if entry["cc"] == cc]
        _write(path, report)
    return 0, done, checked, []


def _child(passes: list[tuple], table: str, connection) -> None:
    """The forked group, in a process group of its own (so that a stop takes its compile workers
    too): its outcome, reports, compiler ledger and record answers go back through `connection`."""
    from patches.fitcheck.compiler import LEDGER, RECORDABLE
    from patches.fitcheck.recorder import RECORDING

    os.setpgid(0, 0)
    shown = progress_.Progress()
    progress_.turn_on(shown)
    first, recorded = len(LEDGER), len(RECORDING)
    try:
        code, done, checked, lines = run_group(passes, table, shown)
    except BaseException as error:  # the parent reports it; a traceback here would be lost in the log
        connection.send((2, [], [], [f"fitcheck: {group_label(passes)}: the check failed: {type(error).__name__}: {error}"], [], [], {}, []))
        return
    finally:
        from patches.fitcheck.recorder import remove_scratch

        remove_scratch()
    timings = [(label, wall, start - first, end - first) for label, wall, start, end in TIMINGS]
    connection.send((code, done, checked, lines, LEDGER[first:], timings, RECORDABLE, RECORDING[recorded:]))
    connection.close()


def _run_in_child(passes: list[tuple], table: str):
    """Starts `passes` in a forked child; returns a function that waits for its outcome, and one that
    stops it at once, its compile workers with it, leaving nothing to print."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    # not a daemon: its compiles run in a pool of its own
    child = context.Process(target=_child, args=(passes, table, sending))
    child.start()
    try:  # also here, so that a stop before the child's own setpgid still finds its group
        os.setpgid(child.pid, child.pid)
    except (PermissionError, ProcessLookupError):
        pass
    sending.close()

    def outcome() -> tuple[int, list[tuple], list[dict], list[str]]:
        from patches.fitcheck.compiler import LEDGER, RECORDABLE
        from patches.fitcheck.recorder import RECORDING

        try:
            code, done, checked, lines, ledger, timings, answers, recording = receiving.recv()
        except EOFError:
            code, done, checked, lines, ledger, timings, answers, recording = 2, [], [], [
                f"fitcheck: {group_label(passes)}: the check ended without a result"], [], [], {}, []
        child.join()
        offset = len(LEDGER)
        LEDGER.extend(ledger)
        RECORDING.extend(recording)
        RECORDABLE.update(answers)
        TIMINGS.extend((label, wall, start + offset, end + offset) for label, wall, start, end in timings)
        return code, done, checked, lines

    def stop() -> None:
        if child.is_alive():
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        child.join()

    return outcome, stop


def merge_tables(into: str, other: str) -> None:
    """Merges the fit table at `other` (another group's: other targets' keys) into the one at `into`,
    then removes it."""
    from patches.fitcheck import fit_table as table_

    document, extra = table_.read_table(Path(into)), table_.read_table(Path(other))
    if extra is not None:
        versions = {"vllm": extra["vllm_version"], "triton": extra["triton_version"]}
        merged = table_.merge(document, extra["entries"], versions, extra.get("verdicts", ()),
                              extra.get("mixer_verdicts", ()))
        table_.write_table(Path(into), merged)
        Path(other).unlink()


def take_record() -> str:
    """Hands the compiler this vLLM release's record when this Triton wrote it; the progress line that says
    so. A UsageError when the file is there but not a record."""
    from patches.fitcheck.compiler import take_record as take

    versions = proved_versions()
    path = compile_record.record_path(Path(COMPILE_RECORDS_MOUNT), versions["vllm"])
    taken, why_not = take(compile_record.read_record(path), versions)
    if why_not is not None:
        return f"compile record {path.name}: not used ({why_not}): every launch is compiled"
    return (f"compile record {path.name}: {taken} compiles of this vLLM and Triton; a launch whose Triton cache key "
            "is among them takes its answer")


def record_line() -> str:
    """What the compile record answered and what was compiled, from the compiler's ledger."""
    from patches.fitcheck.compiler import FULL, RECORDED, SHARED_ONLY, compiles_by_mode

    counts = compiles_by_mode()
    return (f"{counts[RECORDED]} compiles answered by the compile record, {counts[SHARED_ONLY]} compiled to "
            f"the shared-memory allocation, {counts[FULL]} in full")


def write_record() -> None:
    from patches.fitcheck.compiler import RECORDABLE, SHARED_ONLY_KEY

    text = compile_record.render(RECORDABLE, proved_versions(), SHARED_ONLY_KEY)
    Path(COMPILE_RECORD).parent.mkdir(parents=True, exist_ok=True)
    Path(COMPILE_RECORD).write_bytes(gzip.compress(text.encode(), mtime=0))


def main() -> int:
    try:
        record_said = take_record()
    except Problem as error:  # the record's (a UsageError), named as the repository has it, not where the build mounts it
        print(f"fitcheck: {str(error).replace(COMPILE_RECORDS_MOUNT, 'contract/compile-records')}", file=sys.stderr,
              flush=True)
        return 2
    groups = grouped()
    tables = [FIT_TABLE] + [f"{FIT_TABLE}.group{index}" for index in range(1, len(groups))]
    for table in tables[1:]:
        Path(table).unlink(missing_ok=True)
    children = [_run_in_child(passes, table) for passes, table in zip(groups[1:], tables[1:])]
    shown = progress_.Progress()
    progress_.turn_on(shown)
    shown.say(record_said)
    failure: tuple[int, list[str]] | None = None
    try:
        code, done, checked, lines = run_group(groups[0], FIT_TABLE, shown)
        results = [(code, done, checked)]
        if code == 0:
            for outcome, _ in children:
                code, done, checked, lines = outcome()
                results.append((code, done, checked))
                if code != 0:
                    break
        if code != 0:
            failure = code, lines
        else:
            for table in tables[1:]:
                merge_tables(FIT_TABLE, table)
            by_options = {options: report for _, group_done, _ in results for options, _, report in group_done}
            shown.start("")
            shown.say(f"{sum(len(checked) for _, _, checked in results)} kernels confirmed by a full compile; "
                      f"{record_line()}")
            for line in report_.build_summary([by_options[options] for options, _ in PASSES], FIT_TABLE):
                print(f"fitcheck: {line}", file=sys.stderr, flush=True)
    finally:
        progress_.turn_on(None)
        for _, stop in children:
            stop()
    if failure is not None:  # last, after the other group stopped: the build names this failure
        for line in failure[1]:
            print(line, file=sys.stderr, flush=True)
        return failure[0]
    Path(VERSIONS_REPORT).write_text(json.dumps(proved_versions()))
    write_record()
    return 0


def pass_label(options: tuple) -> str:
    device = options[options.index("--device") + 1]
    dtype = options[options.index("--dtype") + 1] if "--dtype" in options else "float16"
    matrix = options[options.index("--matrix") + 1] if "--matrix" in options else "all"
    return f"{device} {dtype}" + ("" if matrix == "all" else f" ({matrix})")


def group_label(passes: list[tuple]) -> str:
    return ", ".join(pass_label(options) for options, _ in passes)


def _write(path: str | None, report: dict) -> None:
    if path is not None:
        write_report(path, report)


def proved_versions() -> dict[str, str]:
    return {package: importlib.metadata.version(package) for package in PROVED_PACKAGES}


if __name__ == "__main__":
    raise SystemExit(main())
