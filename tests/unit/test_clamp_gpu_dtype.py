"""bench/clamp_gpu --dtype: which lowerings a dtype runs under, the one-line refusal of bf16 on the Turing
lowering, the dtype reaching the sweeps' command line and the ranking's provenance, and the fit table
the proxy's clamp reads holding launches of that dtype (no GPU, no compile)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from door.problem import Problem
from tooling import clamp_gpu, gpu_site
from tests import REPO
from tooling.attention_cases import DTYPES


@pytest.fixture(scope="module")
def bench():
    return clamp_gpu


def test_every_dtype_the_sweeps_take_names_its_lowerings(bench):
    assert tuple(bench.DTYPE_LOWERINGS) == DTYPES


@pytest.mark.parametrize("given, dtype, expected", [
    (None, "float16", ["sm75", "native", "sm86"]),  # unchanged: every lowering
    (None, "bfloat16", ["native", "sm86"]),  # Turing has no bf16
    ("sm86", "bfloat16", ["sm86"]),
    ("sm86,native", "bfloat16", ["sm86", "native"]),
    ("sm75", "float16", ["sm75"]),
])
def test_the_lowerings_default_to_those_whose_gpu_runs_the_dtype(bench, given, dtype, expected):
    assert bench.chosen_lowerings(given, dtype) == expected


@pytest.mark.parametrize("given, dtype, words", [
    ("sm75", "bfloat16", ["--dtype bfloat16 with --lowerings sm75", "sm75 stands for Turing",
                          "use --lowerings native,sm86 or --dtype float16"]),
    ("sm86,sm75", "bfloat16", ["--lowerings sm86,sm75: sm75 stands for Turing"]),
    ("sm86,sm90", "bfloat16", ["unknown lowering sm90; expected some of sm75, native, sm86"]),
    ("sm86", "bf16", ["--dtype 'bf16': expected one of float16, bfloat16"]),
])
def test_a_dtype_a_lowering_cannot_run_is_refused_in_one_line(bench, given, dtype, words):
    with pytest.raises(ValueError) as refused:
        bench.chosen_lowerings(given, dtype)
    message = str(refused.value)
    assert "\n" not in message and all(word in message for word in words), message


@pytest.mark.parametrize("args, says", [
    (["--dtype", "bfloat16", "--lowerings", "sm75,sm86"], "sm75 stands for Turing, which has no bfloat16"),
    (["--dtype", "bfloat16", "--lowerings", "sm75", "--kernels", "encoder"], "sm75 stands for Turing"),
    (["--dtype", "bf16"], "--dtype 'bf16': expected one of float16, bfloat16"),
])
def test_the_bench_exits_2_with_that_one_line_before_it_touches_a_gpu(args, says):
    done = subprocess.run([sys.executable, "bench/clamp_gpu", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("bench/clamp_gpu: ") and says in done.stderr, \
        done.stderr


def test_the_sweeps_run_in_the_benchs_dtype(bench, monkeypatch):
    assert bench.sweep_command("sweep")[-2:] == ["--dtype", "float16"], "float16 unless --dtype says otherwise"
    monkeypatch.setattr(bench, "DTYPE", "bfloat16")
    command = bench.sweep_command("clamped", "--out", "x.json")
    assert command[2:6] == ["tooling.clamp_sweep", "clamped", "--out", "x.json"]
    assert command[-2:] == ["--dtype", "bfloat16"], "the clamp's own launch too, not only the sweep's"


def test_the_ranking_names_the_command_line_that_ranked_it(bench):
    source = bench.ranked_by(["--dtype", "bfloat16", "--lowerings", "sm86", "--ranked-out", "/out dir/r.json"])
    assert source.startswith("bench/clamp_gpu --dtype bfloat16 --lowerings sm86 --ranked-out '/out dir/r.json'")


def write_table(path: Path, dtypes) -> Path:
    path.write_text(json.dumps({"format": 1, "entries": [
        {"cc": 86, "path": "2d", "head_size_padded": 512, "dtype": dtype, "block_m": 16, "num_warps": None,
         "num_stages": None, "tile_size": 16, "shared": 49_792} for dtype in dtypes]}))
    return path


@pytest.fixture
def written(monkeypatch):
    """The fit tables ensure_fit_table writes: [(table, device, dtype)] (none is compiled here)."""
    calls = []
    monkeypatch.setattr(gpu_site, "write_fit_table", lambda site, table, device, dtype: calls.append(
        (table, device, dtype)))
    return calls


def test_a_bf16_run_writes_its_own_table_when_the_given_one_holds_fp16_launches_only(tmp_path, monkeypatch, written):
    # tests/gpu/run-on-device hands over its fp16 tables; the clamp looks a bf16 launch up by its dtype
    monkeypatch.setenv(gpu_site.AMPERE_TABLE_ENV, str(write_table(tmp_path / "given.json", ["float16"])))
    table = gpu_site.ensure_fit_table(tmp_path / "site", tmp_path, "sm86", "bfloat16")
    assert table == tmp_path / "fit-table-sm86-bfloat16.json"
    assert written == [(table, "sm86", "bfloat16")]


def test_a_given_table_is_used_when_it_holds_the_dtypes_launches(tmp_path, monkeypatch, written):
    given = write_table(tmp_path / "given.json", ["float16", "bfloat16"])
    monkeypatch.setenv(gpu_site.AMPERE_TABLE_ENV, str(given))
    monkeypatch.setenv(gpu_site.TABLE_ENV, str(given))
    assert gpu_site.ensure_fit_table(tmp_path / "site", tmp_path, "sm86", "bfloat16") == given
    assert gpu_site.ensure_fit_table(tmp_path / "site", tmp_path, "sm75") == given, "fp16 as before"
    assert written == []


@pytest.mark.parametrize("text", ["{ not json", "[]"])
def test_a_given_table_that_is_no_fit_table_is_named_in_one_line(tmp_path, monkeypatch, written, text):
    given = tmp_path / "given.json"
    given.write_text(text)
    monkeypatch.setenv(gpu_site.AMPERE_TABLE_ENV, str(given))
    with pytest.raises(Problem, match=rf"^{gpu_site.AMPERE_TABLE_ENV}={given} is not a readable fit table"):
        gpu_site.ensure_fit_table(tmp_path / "site", tmp_path, "sm86", "bfloat16")
    assert written == []


def test_without_a_given_table_each_dtype_gets_its_own_file(tmp_path, monkeypatch, written):
    for name in (gpu_site.TABLE_ENV, gpu_site.AMPERE_TABLE_ENV):
        monkeypatch.delenv(name, raising=False)
    tables = [gpu_site.ensure_fit_table(tmp_path / "site", tmp_path, device, dtype)
              for device, dtype in (("sm75", "float16"), ("sm86", "float16"), ("sm86", "bfloat16"))]
    assert [t.name for t in tables] == ["fit-table.json", "fit-table-sm86.json", "fit-table-sm86-bfloat16.json"]
    assert [(device, dtype) for _, device, dtype in written] == [
        ("sm75", "float16"), ("sm86", "float16"), ("sm86", "bfloat16")]


def test_the_fit_check_is_asked_for_the_dtype(tmp_path, monkeypatch):
    seen = {}

    def standin_run(command, **kwargs):
        seen["command"] = command
        Path(command[command.index("--write-table") + 1]).write_text("{}")
        return subprocess.CompletedProcess(command, 0, stdout='{"all_fit": true}', stderr="")

    monkeypatch.setattr(gpu_site.subprocess, "run", standin_run)
    assert gpu_site.write_fit_table(tmp_path, tmp_path / "t.json", "sm86", "bfloat16") == {"all_fit": True}
    command = seen["command"]
    assert command[2:] == ["patches.fitcheck", "--device", "sm86", "--matrix", "attention", "--dtype", "bfloat16",
                           "--write-table", str(tmp_path / "t.json"), "--json"]


def test_a_compile_timed_twice_counts_by_its_mean_as_the_ranking_scores_it(bench):
    """vLLM's own launch (d/d) is timed again where a swept configuration equals it (4 warps, 3
    stages): the bench's ratio takes the mean of both, as ranking.rank does, not the first."""
    configs = [{"tile_size": 16, "num_warps": None, "num_stages": None, "vllm_default": True, "shared": 100, "ms": 0.290},
               {"tile_size": 16, "num_warps": 4, "num_stages": 3, "shared": 100, "ms": 0.280},
               {"tile_size": 32, "num_warps": 8, "num_stages": 1, "shared": 200, "ms": 0.272},
               {"tile_size": 64, "num_warps": 8, "num_stages": 1, "shared": 999, "ms": 0.100}]  # does not fit
    sweep = {"cases": {"c": {"configs": configs}}}
    assert bench.timed_config(sweep, "c", {"tile_size": 16, "num_warps": None, "num_stages": None})["ms"] == \
        pytest.approx(0.285)
    fastest = bench.fastest_fitting(sweep, "c", 500)
    assert (fastest["tile_size"], fastest["ms"]) == (32, 0.272)
    assert bench.fastest_fitting(sweep, "c", 50) is None
