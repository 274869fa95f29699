"""patches/fitcheck/image_passes.py, the Dockerfile's fit-check step: each pass's report written
where the image keeps it, the first failing pass ends the step with its exit code (the build fails)
and its failing launches printed whole, the full compiles that confirm the others run once after
every pass, and the log gets progress and a short summary, not every launch. The passes themselves
(the real fit check) run in every image build; here a stand-in answers by pass."""
import json

import pytest

from patches.fitcheck import image_passes
from door.problem import Problem
from patches.fitcheck.proof import UsageError

LIMITS = {"sm75": (75, 65536), "sm86": (86, 101376), "sm90": (90, 232448)}


@pytest.fixture
def passes(tmp_path, monkeypatch):
    reports = [tmp_path / "sm75.json", tmp_path / "sm86.json", None]
    monkeypatch.setattr(image_passes, "PASSES", tuple(zip(
        (("--device", "sm75"), ("--device", "sm86", "--dtype", "bfloat16"), ("--device", "sm90", "--matrix", "gemma4")),
        reports)))
    monkeypatch.setattr(image_passes, "FIT_TABLE", str(tmp_path / "fit-table.json"))
    monkeypatch.setattr(image_passes, "TARGET_GROUPS", (("sm75", "sm86", "sm90"),))  # one process (see below)
    monkeypatch.setattr(image_passes, "VERSIONS_REPORT", str(tmp_path / "versions.json"))
    monkeypatch.setattr(image_passes, "COMPILE_RECORDS_MOUNT", str(tmp_path / "run" / "compile-records"))
    monkeypatch.setattr(image_passes, "COMPILE_RECORD", str(tmp_path / "compile-record.json.gz"))
    monkeypatch.setattr(image_passes, "proved_versions", lambda: {"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"})
    return tmp_path, reports


def row(model: str, shared: int, limit: int) -> dict:
    return {"model": model, "layer": "global", "head_size": 512, "kind": "prefill", "query_len": 16, "kernel":
            "kernel_unified_attention", "path": "2d", "tile_size": 16, "block_m": 16, "shared": shared,
            "limit": limit, "fits": shared <= limit, "error": None}


def standin_check(fails: set, ran: list, launches: int = 2500):
    def check_pass(options, table=None):
        device = options[options.index("--device") + 1]
        ran.append(options)
        cc, limit = LIMITS[device]
        shared = limit + 1 if device in fails else limit // 2
        rows = [row(f"model-{i % 7}", shared if i == 0 else 1024, limit) for i in range(launches)]
        if device == "sm86":  # a model vLLM serves only from Ampere: the built-in matrix leaves it out on Turing
            rows += [row("deepseek-v3-tp2", 2048, limit)]
        matrix = options[options.index("--matrix") + 1] if "--matrix" in options else "all"
        return {"matrix": matrix, "device": {"name": device, "cc": cc, "limit": limit}, "dtype": "float16", "launches": rows,
                "mixer_launches": [], "max_shared": shared, "all_fit": device not in fails, "inert": None,
                "unpatched": None, "compile": {"mode": "shared-only", "cross_checked": []}}
    return check_pass


def test_every_pass_writes_its_report_and_the_full_compiles_run_once_after_them(passes, monkeypatch, capsys):
    folder, reports = passes
    ran, checks = [], []
    monkeypatch.setattr(image_passes, "check_pass", standin_check(set(), ran))
    monkeypatch.setattr(image_passes, "cross_check", lambda: checks.append(len(ran)) or [
        {"kernel": "kernel_unified_attention", "cc": 75, "shared": 32768},
        {"kernel": "kernel_unified_attention", "cc": 86, "shared": 50688}])
    assert image_passes.main() == 0
    assert checks == [3], "one cross-check, after every pass"
    written = [json.loads(r.read_text()) for r in reports[:2]]
    assert [w["device"]["name"] for w in written] == ["sm75", "sm86"]
    assert [w["compile"]["cross_checked"][0]["cc"] for w in written] == [75, 86], "each report its own target's"
    assert json.loads((folder / "versions.json").read_text())["vllm"] == "0.33.0"
    err = capsys.readouterr().err.splitlines()
    assert all(line.startswith("fitcheck: ") for line in err)
    assert len(err) <= 30, "a summary, not the 7,500 launches"
    assert any("sm86 float16: 2501 launches, largest need 50688 of 101376 bytes" in line for line in err)
    sm75 = err.index(next(line for line in err if line.startswith("fitcheck: sm75 float16: 2500 launches, largest")))
    assert err[sm75 + 1] == "fitcheck:   proven: 7 models (model-0, model-1, model-2, model-3, model-4, model-5, model-6)"
    assert err[sm75 + 2] == "fitcheck:   not proven, vLLM cannot serve them here: deepseek-v3"
    assert not any("not proven" in line for line in err[err.index(next(l for l in err if "sm90" in l and "launches, largest" in l)):])


def test_two_target_groups_run_in_two_processes_and_end_as_one_step(passes, monkeypatch, capfd):
    """The real fork: the child's passes write their reports, its full compiles stay its own, its
    compiler ledger and timings come back, and its progress reaches the same log."""
    from patches.fitcheck import compiler
    from patches.fitcheck.compiler import CompileResult

    folder, reports = passes
    monkeypatch.setattr(image_passes, "TARGET_GROUPS", (("sm75", "sm90"), ("sm86",)))
    monkeypatch.setattr(image_passes, "TIMINGS", [])
    monkeypatch.setattr(compiler, "LEDGER", [])
    parent = __import__("os").getpid()
    standin = standin_check(set(), [])

    def check_pass(options, table):
        compiler.LEDGER.append(compiler.Compiled("shared-only", 0, "kernel_in_" + str(__import__("os").getpid() == parent), CompileResult(1, 4, 1)))
        assert table.endswith("fit-table.json" if __import__("os").getpid() == parent else ".group1")
        return standin(options)
    checks = []
    monkeypatch.setattr(image_passes, "check_pass", check_pass)
    monkeypatch.setattr(image_passes, "cross_check", lambda: checks.append(1) or [
        {"kernel": "kernel_unified_attention", "cc": 75, "shared": 32768},
        {"kernel": "kernel_unified_attention", "cc": 86, "shared": 50688}])
    assert image_passes.main() == 0
    assert checks == [1], "the parent's cross-check here; the child's in the child"
    written = [json.loads(r.read_text()) for r in reports[:2]]
    assert [w["device"]["name"] for w in written] == ["sm75", "sm86"]
    assert [w["compile"]["cross_checked"][0]["cc"] for w in written] == [75, 86]
    assert sorted(entry.kernel for entry in compiler.LEDGER) == ["kernel_in_False", "kernel_in_True", "kernel_in_True"]
    assert [label for label, *_ in image_passes.TIMINGS if not label.startswith("cross")] == \
        ["sm75 float16", "sm90 float16 (gemma4)", "sm86 bfloat16"]
    err = capfd.readouterr().err.splitlines()
    assert any(line.startswith("fitcheck: sm86 bfloat16: 2501 launches") for line in err), ("the child's progress", err)
    assert sum("launches, largest need" in line and "every launch fits" in line and "(" not in line.split("fits")[-1]
               for line in err) == 3, "one summary, in PASSES order"


def test_a_failing_pass_in_the_child_group_fails_the_step_with_its_code(passes, monkeypatch, capfd):
    folder, reports = passes
    monkeypatch.setattr(image_passes, "TARGET_GROUPS", (("sm75", "sm90"), ("sm86",)))
    monkeypatch.setattr(image_passes, "check_pass", lambda options, table: standin_check({"sm86"}, [])(options))
    monkeypatch.setattr(image_passes, "cross_check", lambda: [])
    assert image_passes.main() == 1
    assert json.loads(reports[1].read_text())["all_fit"] is False
    assert not (folder / "versions.json").exists()
    assert any(line.startswith("fitcheck: does not fit: model-0/global") for line in capfd.readouterr().err.splitlines())


def test_a_failing_parent_group_stops_the_child_and_its_workers_and_names_its_launch_last(passes, monkeypatch,
                                                                                       capfd, tmp_path):
    """The child's compile workers die with it (its process group), so nothing they print after the
    parent's failure (a broken pipe, say) becomes the build's last line."""
    import os
    import subprocess
    import time

    monkeypatch.setattr(image_passes, "TARGET_GROUPS", (("sm75", "sm90"), ("sm86",)))
    worker_pid = tmp_path / "worker.pid"
    failing = standin_check({"sm75"}, [])

    def check_pass(options, table):
        if "sm86" in options:  # the child: a worker of its own, then a long pass
            worker = subprocess.Popen(["sleep", "600"])
            worker_pid.write_text(str(worker.pid))
            time.sleep(600)
        deadline = time.monotonic() + 60
        while not worker_pid.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return failing(options)
    monkeypatch.setattr(image_passes, "check_pass", check_pass)
    monkeypatch.setattr(image_passes, "cross_check", lambda: [])
    assert image_passes.main() == 1
    worker = int(worker_pid.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the child's worker outlived the step")
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fitcheck: does not fit: model-0/global"), err[-3:]


def test_a_failing_pass_ends_the_step_with_its_code_its_report_and_its_launches(passes, monkeypatch, capsys):
    folder, reports = passes
    ran = []
    monkeypatch.setattr(image_passes, "check_pass", standin_check({"sm86"}, ran))
    monkeypatch.setattr(image_passes, "cross_check", lambda: pytest.fail("no cross-check after a failed pass"))
    assert image_passes.main() == 1
    assert json.loads(reports[1].read_text())["all_fit"] is False
    assert len(ran) == 2 and not (folder / "versions.json").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fitcheck: does not fit: model-0/global prefill") and "needs 101377 bytes" in err[-1]


@pytest.mark.parametrize("refusal, where", [(UsageError("--matrix 'x' is unknown"), "check_pass"),
                                            (Problem("kernel_unified_attention (cc 75): differs"), "cross_check")])
def test_a_refusal_ends_the_step_with_exit_2_in_one_line(passes, monkeypatch, capsys, refusal, where):
    def refused(*_):
        raise refusal
    monkeypatch.setattr(image_passes, "check_pass", standin_check(set(), []))
    monkeypatch.setattr(image_passes, "cross_check", lambda: [])
    monkeypatch.setattr(image_passes, where, refused)
    assert image_passes.main() == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("fitcheck: ") and str(refusal) in last


def progress_lines(every_s: float, stage_s: float, compiles: int = 300) -> list[str]:
    """The lines one stage of `compiles` compiles spread over `stage_s` seconds prints (a standin clock)."""
    import io

    from patches.fitcheck.progress import Progress

    now = [100.0]
    stream = io.StringIO()
    shown = Progress(stream, every_s=every_s, clock=lambda: now[0])
    now[0] += 7.0  # the stage starts after the passes' imports: its marks count from its own start
    shown.start("sm75 float16")
    shown.say("recording and compiling")
    for done in range(1, compiles + 1):
        now[0] += stage_s / compiles
        shown.compiled(done, compiles)
    return stream.getvalue().splitlines()


def test_compile_progress_is_a_line_at_the_interval_then_each_time_the_stage_doubles_never_one_per_compile():
    lines = progress_lines(every_s=20.0, stage_s=150.0)  # the interval given, not the default
    assert lines == ["fitcheck: sm75 float16: recording and compiling (7 s)",
                     "fitcheck: sm75 float16: compile batch 1: 40/300 done, 260 left (27 s)",
                     "fitcheck: sm75 float16: compile batch 1: 80/300 done, 220 left (47 s)",
                     "fitcheck: sm75 float16: compile batch 1: 160/300 done, 140 left (87 s)"], lines


def test_a_stage_ten_times_slower_prints_four_lines_more_not_ten_times_as_many():
    idle, loaded = progress_lines(every_s=30.0, stage_s=120.0), progress_lines(every_s=30.0, stage_s=1200.0)
    assert (len(idle), len(loaded)) == (3, 7), (idle, loaded)  # marks at 30, 60 | 30 ... 960 s

def test_the_summary_gives_a_devices_dtypes_one_verdict_when_they_read_the_same():
    from patches.fitcheck.fit_report import build_summary

    def report(device, dtype, shared, models):
        cc, limit = LIMITS[device]
        return {"device": {"name": device, "cc": cc, "limit": limit}, "dtype": dtype, "max_shared": shared,
                "all_fit": True, "launches": [row(model, shared, limit) for model in models]}
    summary = build_summary([report("sm75", "float16", 65536, ["a", "b"]), report("sm86", "float16", 99000, ["a", "b"]),
                             report("sm86", "bfloat16", 99000, ["a", "b"]), report("sm90", "float16", 83200, ["a"]),
                             report("sm90", "bfloat16", 83000, ["a"])], "/t.json")
    assert [line.split(":")[0] for line in summary if not line.startswith(" ")] == [
        "sm75 float16", "sm86 float16 and bfloat16", "sm90 float16", "sm90 bfloat16", "the fit table"]
    assert summary[2] == ("sm86 float16 and bfloat16: 2 launches, largest need 99000 of 101376 bytes "
                          "(a/global, kernel_unified_attention), every launch fits")


def test_the_step_takes_this_releases_record_and_writes_what_both_groups_answered(passes, monkeypatch, capfd):
    """The record of the release (by vLLM, Triton and the cut) reaches the compiler before the fork, so both
    groups take its answers; what each group answered, compiled or recorded, comes back into one record."""
    import gzip

    from contract import compile_record
    from contract.compile_record import Answer
    from patches.fitcheck import compiler

    folder, _ = passes
    monkeypatch.setattr(image_passes, "TARGET_GROUPS", (("sm75", "sm90"), ("sm86",)))
    for name, value in (("LEDGER", []), ("_RECORD", {}), ("RECORDABLE", {})):
        monkeypatch.setattr(compiler, name, value)
    committed = {"a" * 64: Answer("kernel_unified_attention", 75, 32768, 4, 1)}
    records = folder / "run" / "compile-records"
    records.mkdir(parents=True)
    (records / "vllm-0.33.0.json").write_text(compile_record.render(committed, {"vllm": "0.33.0", "triton": "3.8.0"},
                                                                     compiler.SHARED_ONLY_KEY))
    standin = standin_check(set(), [])
    parent = __import__("os").getpid()

    def check_pass(options, table):
        assert compiler._RECORD == committed, "taken before the fork"
        mine = ("b" if __import__("os").getpid() == parent else "c") * 64
        compiler.RECORDABLE[mine] = Answer("reduce_segments", 75, 100, 4, 1)
        compiler.LEDGER.append(compiler.Compiled(compiler.RECORDED, 75, "kernel_unified_attention", compiler.CompileResult(32768, 4, 1)))
        return standin(options)
    monkeypatch.setattr(image_passes, "check_pass", check_pass)
    monkeypatch.setattr(image_passes, "cross_check", lambda: [])
    assert image_passes.main() == 0
    written = compile_record.parse_record(gzip.decompress((folder / "compile-record.json.gz").read_bytes()).decode())
    assert sorted(key[0] for key in written.answers) == ["b", "c"]
    err = capfd.readouterr().err
    assert "compile record vllm-0.33.0.json: 1 compiles of this vLLM and Triton; a launch whose Triton cache key is" in err
    assert "3 compiles answered by the compile record, 0 compiled to the shared-memory allocation, 0 in full" in err


def test_a_record_of_another_triton_is_not_used_and_a_broken_one_stops_the_step_before_any_pass(passes, monkeypatch,
                                                                                                capsys):
    from contract import compile_record
    from contract.compile_record import Answer
    from patches.fitcheck import compiler

    folder, _ = passes
    monkeypatch.setattr(compiler, "_RECORD", {})
    records = folder / "run" / "compile-records"
    records.mkdir(parents=True)
    record = records / "vllm-0.33.0.json"
    record.write_text(compile_record.render({"a" * 64: Answer("k", 75, 1, 4, 1)}, {"vllm": "0.33.0", "triton": "3.7.1"},
                                            compiler.SHARED_ONLY_KEY))
    ran = []
    monkeypatch.setattr(image_passes, "check_pass", standin_check(set(), ran))
    monkeypatch.setattr(image_passes, "cross_check", lambda: [])
    assert image_passes.main() == 0 and compiler._RECORD == {}
    assert "not used (written for vLLM 0.33.0 / Triton 3.7.1" in capsys.readouterr().err
    record.write_text(record.read_text()[:-20])
    ran.clear()
    (folder / "versions.json").unlink()
    assert image_passes.main() == 2
    assert ran == [] and not (folder / "versions.json").exists()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("fitcheck: contract/compile-records/vllm-0.33.0.json is not a compile record (not JSON")
    assert "git checkout" in line
