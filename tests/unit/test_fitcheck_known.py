"""--known-table: which launches take their need from a fit table written here and which are
compiled; the report and the entrypoint's argv that carry it. Launches are the fit check's own
Launch records with real torch tensors as the query, as the recorder makes them."""
import json

import pytest
import torch

from entrypoint.checks.clamp import fit_command, judge_fit
from patches.fitcheck.__main__ import main
from patches.fitcheck.recorder import Launch
from patches.fitcheck.fit_report import COMPILED, TABLE, build_report, format_table, summary
from patches.fitcheck.attention import Case, LayerShape
from door.problem import UsageError
from patches.fitcheck.fit_table import (known_needs, launch_entries, merge, read_table, table_mismatch,
                                    write_table)

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}
SLIDING = LayerShape("m", "sliding", 8, 1, 256, 512)
GLOBAL = LayerShape("m", "global", 8, 1, 512, None)


def attention(shape, path, tile, dtype=torch.float16):
    params = {"query_ptr": torch.empty(1, shape.num_query_heads, shape.head_size, dtype=dtype),
              "HEAD_SIZE_PADDED": shape.head_size, "BLOCK_M": 16, "TILE_SIZE": tile, "IS_3D": path == "3d"}
    return Launch(Case(shape, "prefill" if path == "2d" else "decode", 32 if path == "2d" else 1),
                  "kernel_unified_attention", None, (1, 1, 1), params)


def reduction(shape):
    params = {"HEAD_SIZE_PADDED": shape.head_size, "TILE_SIZE": 16, "num_query_heads": shape.num_query_heads}
    return Launch(Case(shape, "decode", 1), "reduce_segments", None, (1, 8), params)


def entry(path, head, tile, shared, cc=75, **changes):
    return dict({"cc": cc, "path": path, "head_size_padded": head, "dtype": "float16", "block_m": 16,
                 "num_warps": None, "num_stages": None, "tile_size": tile, "shared": shared}, **changes)


@pytest.fixture
def table(tmp_path):
    """A table as the build writes it, read back the way the fit check reads it."""
    def write(entries, **versions):
        path = tmp_path / "fit-table.json"
        write_table(path, {"format": 1, "vllm_version": versions.get("vllm", "0.33.0"),
                           "triton_version": versions.get("triton", "3.8.0"), "entries": entries})
        return read_table(path, "--known-table")
    return write


def test_launches_with_a_key_in_the_table_take_its_number_the_rest_are_compiled(table):
    document = table([entry("2d", 256, 32, 49152), entry("2d", 512, 16, 65536), entry("2d", 512, 32, 98304),
                      entry("3d", 256, 16, 32768)])
    launches = [attention(SLIDING, "2d", 32), attention(GLOBAL, "2d", 16), attention(SLIDING, "3d", 16),
                attention(GLOBAL, "3d", 16), reduction(SLIDING)]
    # head 512 on the 3D path is not in this table; the reduction never is.
    assert known_needs(launches, 75, document) == [49152, 65536, 32768, None, None]


def test_another_cc_dtype_or_launch_option_is_not_the_tables_launch(table):
    document = table([entry("2d", 512, 16, 65536)])
    launch = attention(GLOBAL, "2d", 16)
    assert known_needs([launch], 75, document) == [65536]
    assert known_needs([launch], 86, document) == [None]
    assert known_needs([attention(GLOBAL, "2d", 16, torch.bfloat16)], 75, document) == [None]
    launch.options = {"num_stages": 1}
    assert known_needs([launch], 75, document) == [None]


def test_a_reduce_entry_is_not_trusted_its_need_depends_on_the_head_count(table):
    document = table([entry("reduce", 256, 16, 2048, block_m=None)])
    assert known_needs([reduction(SLIDING)], 75, document) == [None]


def test_repeated_keys_in_a_hand_merged_table_take_the_largest_need(table):
    document = table([entry("2d", 512, 16, 60000), entry("2d", 512, 16, 65536), entry("2d", 512, 16, 61000)])
    assert known_needs([attention(GLOBAL, "2d", 16)], 75, document) == [65536]


def test_a_table_of_other_versions_is_named_as_the_reason_to_ignore_it(table):
    assert table_mismatch(table([]), VERSIONS) is None
    reason = table_mismatch(table([], triton="3.6.0"), VERSIONS)
    assert reason == "written for vLLM 0.33.0 / Triton 3.6.0, running vLLM 0.33.0 / Triton 3.8.0"
    assert "vLLM 0.32.0" in table_mismatch(table([], vllm="0.32.0"), VERSIONS)


def test_a_table_of_another_vllm_merged_under_this_one_starts_fresh(table, tmp_path):
    # A 0.32.0 table holds a launch 0.33.0 no longer makes (head 256, tile 32) and an old number
    # for one it does; merged under 0.33.0 neither may survive with the new stamp.
    old = table([entry("2d", 256, 32, 40_000), entry("2d", 512, 16, 60_000)], vllm="0.32.0")
    fresh = [entry("2d", 512, 16, 65_536)]
    write_table(tmp_path / "fit-table.json", merge(old, fresh, VERSIONS))
    merged = read_table(tmp_path / "fit-table.json")
    assert (merged["vllm_version"], merged["triton_version"]) == ("0.33.0", "3.8.0")
    assert merged["entries"] == fresh
    assert known_needs([attention(SLIDING, "2d", 32), attention(GLOBAL, "2d", 16)], 75, merged) == [None, 65_536]


def test_a_table_of_another_triton_starts_fresh_and_one_of_these_versions_keeps_its_other_entries(table):
    other = entry("2d", 256, 32, 40_000)
    fresh = [entry("2d", 512, 16, 65_536)]
    assert merge(table([other], triton="3.6.0"), fresh, VERSIONS)["entries"] == fresh
    assert merge(table([other]), fresh, VERSIONS)["entries"] == [other] + fresh


def test_a_file_that_is_no_fit_table_names_the_known_table_option(tmp_path):
    path = tmp_path / "fit-table.json"
    path.write_text(json.dumps({"format": 1, "entries": [dict(entry("2d", 512, 16, 0), shared="lots")]}))
    with pytest.raises(UsageError, match="shared is 'lots'.*another --known-table path"):
        read_table(path, "--known-table")


@pytest.mark.parametrize("extra", [["--write-table", "t.json"], ["--launcher", "other.py"]])
def test_known_table_with_write_table_or_launcher_is_refused_before_vllm_loads(tmp_path, capsys, extra):
    code = main(["--device", "sm75", "--known-table", str(tmp_path / "t.json"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fitcheck: --known-table") and err.count("\n") == 1, err


def rows(sources):
    return [{"model": "m", "layer": "global", "head_size": 512, "kind": "prefill", "query_len": n, "num_seqs": 1,
             "kernel": "kernel_unified_attention", "path": "2d", "grid": [n], "tile_size": 16, "block_m": 16,
             "launch_num_warps": None, "launch_num_stages": None, "num_warps": None, "num_stages": None,
             "shared": 65536, "source": source, "limit": 65536, "headroom": 0, "fits": True, "error": None}
            for n, source in enumerate(sources, start=1)]


def test_the_report_counts_and_prints_each_numbers_source():
    note = {"path": "/opt/vllm-turing/fit-table.json", "used": True, "ignored_because": None}
    report = build_report(versions=VERSIONS, device={"name": "sm75", "cc": 75, "limit": 65536},
                          launches=rows([TABLE, TABLE, COMPILED]), unpatched=None, elapsed_s=1.0, known_table=note)
    assert report["known_table"] == dict(note, from_table=2, compiled=1)
    lines = format_table(report).splitlines()
    column = lines[0].index("source")
    assert [line[column:].split()[0] for line in lines[1:]] == [TABLE, COMPILED]  # same source, one line
    assert "2 from the fit table /opt/vllm-turing/fit-table.json, 1 compiled" in summary(report)


def test_an_ignored_table_says_why_in_report_and_preflight():
    note = {"path": "t.json", "used": False, "ignored_because": "written for vLLM 0.32.0 / Triton 3.8.0, ..."}
    report = build_report(versions=VERSIONS, device={"name": "sm75", "cc": 75, "limit": 65536},
                          launches=rows([COMPILED]), unpatched=None, elapsed_s=1.0, known_table=note)
    assert "fit table t.json ignored (written for vLLM 0.32.0" in summary(report)
    result = judge_fit(0, json.dumps(report), "", (7, 5), 65536)
    assert "fit table ignored: written for vLLM 0.32.0" in result.message


def test_the_preflight_passes_the_fit_table_only_when_there_is_one():
    with_table = fit_command("/m/config.json", (7, 5), 65536, "/opt/vllm-turing/fit-table.json")
    assert with_table[-2:] == ["--known-table", "/opt/vllm-turing/fit-table.json"]
    without = fit_command("/m/config.json", (7, 5), 65536, None)
    assert "--known-table" not in without and without == with_table[:-2]
    assert without[without.index("--cc") + 1] == "75" and without[without.index("--limit") + 1] == "65536"


def test_the_clamped_launches_own_needs_enter_the_table_so_a_ranked_launch_is_answered_from_it():
    """A ranked configuration launches with its own warps: the build's table, which held only vLLM's
    launches and their halvings, must hold that launch too, or the preflight compiles it."""
    ranked = attention(SLIDING, "3d", 32)
    ranked.options = {"num_warps": 8}
    document = merge(None, [entry("3d", 256, 32, 49152)], VERSIONS)
    assert known_needs([ranked], 75, document) == [None]
    launches = [ranked, attention(GLOBAL, "2d", 16), attention(GLOBAL, "2d", 16), reduction(SLIDING),
                attention(SLIDING, "2d", 32)]
    entries = launch_entries(launches, [40960, 65536, 61440, 2048, None], 75)
    # the reduction is never a table entry, a launch that did not compile has no need, repeats keep the largest
    assert sorted((e["path"], e["head_size_padded"], e["num_warps"], e["shared"]) for e in entries) == \
        [("2d", 512, None, 65536), ("3d", 256, 8, 40960)]
    document = merge(document, entries, VERSIONS)
    assert known_needs([ranked, attention(GLOBAL, "2d", 16), attention(SLIDING, "3d", 32)], 75, document) == \
        [40960, 65536, 49152]
