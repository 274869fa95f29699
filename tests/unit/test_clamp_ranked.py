"""The clamp's choice from ranked launch configurations (tooling/clamp_ranking.py), run from
the code inserted into a patched real release, and the ranking built from a benchmark sweep.

No vLLM, GPU or Triton here: as tests/unit/test_clamp_runtime.py, the inserted statements run on
CPU tensors with TURING_CLAMP_SMEM_LIMIT (cc 75 without a CUDA device)."""
import json
import logging

import pytest
import torch

from contract import layout
from tooling import clamp_ranking as ranking
from tests.unit.test_clamp_runtime import TURING, clamp, patched_sources, query, table  # noqa: F401 (fixtures)

AMPERE_CONSUMER = 101_376
LAUNCH_2D = {"cc": 75, "path": "2d", "head_size_padded": 512, "dtype": "float16", "block_m": 16,
             "num_warps": None, "num_stages": None, "vllm_tile_size": 32, "windowed": False}


def config(tile, warps, stages, shared, score):
    return {"tile_size": tile, "num_warps": warps, "num_stages": stages, "shared": shared, "score": score}


def write_ranked(path, ranked_2d, vllm_version="0.33.0"):
    path.write_text(json.dumps({"format": ranking.FORMAT, "vllm_version": vllm_version, "provenance": {},
                                "launches": [dict(LAUNCH_2D, cases=["c"], ranked=ranked_2d)]}))
    return path


@pytest.fixture
def ranked(tmp_path, monkeypatch, clamp):
    """Writes a ranked file the clamp reads; the inserted code sees vLLM 0.33.0."""
    monkeypatch.setitem(clamp.__globals__, "_vllm_turing_release", lambda: "0.33.0")
    path = tmp_path / "ranked-configs.json"
    monkeypatch.setenv(ranking.ENV_RANKED, str(path))
    return lambda *args, **kwargs: write_ranked(path, *args, **kwargs)


def options(clamp):
    return dict(clamp.__globals__["_vllm_turing_path_options"])


def test_a_faster_fitting_configuration_replaces_the_fail_safe_one(clamp, table, ranked, monkeypatch):
    ranked([config(16, 2, None, 65_536, 1.0), config(16, None, None, 65_536, 1.2)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {False: {"num_warps": 2}}, "the 2D launch gets 2 warps, the 3D one vLLM's"
    assert clamp.__globals__["_vllm_turing_clamp_cache"], "decided once per launch shape"
    assert clamp.__globals__["_vllm_turing_with_options"]("kernel_unified_attention", {"IS_3D": False}) == \
        {"IS_3D": False, "num_warps": 2}
    assert clamp.__globals__["_vllm_turing_with_options"]("kernel_unified_attention", {"IS_3D": True}) == \
        {"IS_3D": True}


def test_the_fail_safe_choice_stays_when_nothing_beats_it_by_more_than_the_margin(clamp, table, ranked, monkeypatch):
    ranked([config(16, 2, None, 65_536, 1.0), config(16, None, None, 65_536, 1.04)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {}


def test_a_merged_ranking_holds_the_fail_safe_choice_to_the_margin_of_the_fastest_not_of_the_best_row(
        clamp, table, ranked, monkeypatch):
    """Merged runs score a row by its worst run: the best row at 1.038 and vLLM's own at 1.082 (the
    2026-12-03 bf16 head-256 decode) mean vLLM's own was more than 5 % slower in some run, so it goes."""
    ranked([config(16, 2, None, 65_536, 1.038), config(16, None, None, 65_536, 1.082)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {False: {"num_warps": 2}}


def test_where_nothing_that_fits_is_within_the_margin_the_fail_safe_choice_is_held_to_the_best_that_fits(
        clamp, table, ranked, monkeypatch):
    ranked([config(32, 2, 1, 98_304, 1.0), config(16, 8, None, 65_536, 1.1), config(16, None, None, 65_536, 1.12)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {}, "1.12 is within 5 % of the best that fits (1.1): vLLM's own warps stay"


def test_where_vllms_own_launch_fits_and_is_fastest_it_stays(clamp, table, ranked, monkeypatch):
    ranked([config(32, None, None, 98_304, 1.0), config(16, 2, None, 65_536, 1.3)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(AMPERE_CONSUMER))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (32, 16, None) and options(clamp) == {}


def test_a_ranked_configuration_that_does_not_fit_is_passed_over(clamp, table, ranked, monkeypatch):
    ranked([config(32, 2, 1, 98_304, 1.0), config(16, 8, None, 65_536, 1.1), config(16, None, None, 65_536, 1.5)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {False: {"num_warps": 8}}


def test_a_larger_limit_takes_the_best_and_its_own_stage_count(clamp, table, ranked, monkeypatch):
    ranked([config(32, 2, 1, 98_304, 1.0), config(16, None, None, 65_536, 1.5)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(AMPERE_CONSUMER))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (32, 16, None), "the launcher's own stage count for both paths"
    assert options(clamp) == {False: {"num_warps": 2, "num_stages": 1}}


@pytest.mark.parametrize("release", ["0.32.0", "unknown"])
def test_a_ranking_of_another_release_is_ignored(clamp, table, ranked, monkeypatch, release):
    ranked([config(16, 2, None, 65_536, 1.0), config(16, None, None, 65_536, 1.5)], vllm_version=release)
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None) and options(clamp) == {}


def test_without_a_ranking_the_fail_safe_choice_is_unchanged(clamp, table, monkeypatch, tmp_path):
    monkeypatch.setenv(ranking.ENV_RANKED, str(tmp_path / "absent.json"))
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None) and options(clamp) == {}


def test_an_unreadable_ranking_warns_once_and_the_fit_table_decides(clamp, table, ranked, monkeypatch, caplog):
    ranked([]).write_text("{ not json")
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    with caplog.at_level(logging.WARNING):
        assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None)
        assert clamp(query(head=256), 16, 32, 16, sliding_window=0)[:2] == (32, 16)
    warnings = [r for r in caplog.records if "ranked configurations" in r.getMessage()]
    assert len(warnings) == 1 and ranking.ENV_RANKED in warnings[0].getMessage()


def sweep_of(times: dict, low="sm75", dtype=None) -> dict:
    """A bench sweep: one 2D head-512 case per name, {name: {(tile, warps, stages): (ms, shared)}}; its launches
    in `dtype` (None: a sweep that names none, as before --dtype: fp16)."""
    cases = {}
    for name, rows in times.items():
        configs = [{"tile_size": 32, "num_warps": None, "num_stages": None, "vllm_default": True,
                    "shared": 98_304, "ms": 2.0}]
        configs += [{"tile_size": t, "num_warps": w, "num_stages": s, "shared": shared, "ms": ms}
                    for (t, w, s), (ms, shared) in rows.items()]
        configs.append({"tile_size": 64, "num_warps": 4, "num_stages": None, "shared": 163_840})  # not timed
        cases[name] = {"default": {"TILE_SIZE": 32, "IS_3D": False, "BLOCK_M": 16, "HEAD_SIZE_PADDED": 512,
                                   "SLIDING_WINDOW": 0, "num_warps": None, "num_stages": None}, "configs": configs}
    sweep = {"gpu": "NVIDIA H200", "cc": "9.0", "triton": "3.6.0", "vllm": "0.33.0", "override": low,
             "device_limit": 65_536, "cases": cases}
    return sweep if dtype is None else dict(sweep, dtype=dtype)


def test_the_ranking_scores_by_the_worst_case_and_writes_vllms_own_options_as_none():
    sweeps = {"sm75": sweep_of({"a": {(16, 4, None): (1.0, 65_536), (16, 2, None): (1.1, 65_536)},
                                "b": {(16, 4, None): (3.0, 65_536), (16, 2, None): (2.0, 65_536)}}),
              "native": sweep_of({"a": {}, "b": {}}, low=None)}
    document = ranking.rank(sweeps, source="test", measured_at="2026-12-01T00:00Z")
    assert document["vllm_version"] == "0.33.0" and document["provenance"]["lowerings"]["sm75"]["override"] == "sm75"
    (launch,) = document["launches"]
    assert {k: launch[k] for k in LAUNCH_2D} == LAUNCH_2D, "ranked for cc 75 only: native is not a proxy"
    scores = {(r["tile_size"], r["num_warps"]): r["score"] for r in launch["ranked"]}
    # 16/4 is vLLM's warps (written None): worst case 3.0/2.0 in b; 16/2: 1.1/1.0 in a; vLLM's own 32: 2.0/1.0
    assert scores == {(16, 2): 1.1, (16, None): 1.5, (32, None): 2.0}
    assert [r["tile_size"] for r in launch["ranked"]] == [16, 16, 32]


def test_layers_whose_vllm_tile_differs_are_ranked_apart(clamp, table, ranked, monkeypatch):
    """The key holds vLLM's own tile: a ranking for its tile-32 launch leaves a tile-16 one alone."""
    ranked([config(16, 2, None, 65_536, 1.0), config(16, None, None, 65_536, 1.5)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(AMPERE_CONSUMER))
    assert clamp(query(), 16, 16, 16, sliding_window=0) == (16, 16, None) and options(clamp) == {}


def test_the_committed_ranking_is_as_its_writer_writes_it(tmp_path):
    """Compact, as ranking.write leaves it: the image ships this file, within the derived layers' budget
    (indented, it was 44 KB more); `python3 -m json.tool` shows it to a person."""
    rewritten = tmp_path / "ranked-configs.json"
    ranking.write(rewritten, ranking.read(ranking.RANKED_FILE))
    assert ranking.RANKED_FILE.read_bytes() == rewritten.read_bytes()


def test_the_committed_ranking_names_its_proxy_and_ranks_the_pinned_release():
    from contract import pins

    document = ranking.read(ranking.RANKED_FILE)
    assert document["vllm_version"] == pins.VLLM_VERSION, "re-rank with bench/clamp_gpu when the pin moves"
    lowerings = document["provenance"]["lowerings"]
    assert {low: p["override"] for low, p in lowerings.items()} == {"sm75": "sm75", "sm86": "sm86"}
    assert "proxy" in document["provenance"]["ranked_by"] and document["provenance"]["measured_at"]
    limits = {75: TURING, 86: AMPERE_CONSUMER}
    for launch in document["launches"]:
        scores = [r["score"] for r in launch["ranked"]]
        assert scores == sorted(scores) and scores[0] >= 1.0, launch
        if "," not in launch["measured_at"]:  # ranked by one run: its best is that run's fastest
            assert scores[0] == 1.0, launch
        assert any(r["shared"] <= limits[launch["cc"]] for r in launch["ranked"]), launch


def ranked_run(head, when, times):
    """A ranking of one 2D case of head `head`, measured at `when`: times {(tile, warps, stages): ms}."""
    sweeps = {"sm75": sweep_of({f"case-{when}": {config: (ms, 65_536) for config, ms in times.items()}})}
    sweeps["sm75"]["cases"][f"case-{when}"]["default"]["HEAD_SIZE_PADDED"] = head
    return ranking.rank(sweeps, source=f"run {when}", measured_at=when)


def test_a_merged_ranking_keeps_the_launches_the_new_run_did_not_rank_and_says_when_each_was_measured():
    kept = ranked_run(512, "2026-12-01T00:00Z", {(16, 2, None): 1.0, (16, 4, None): 1.2})
    both = ranking.merged(ranking.merged(kept, ranked_run(128, "2026-12-02T00:00Z", {(16, 2, None): 2.0})),
                          ranked_run(64, "2026-12-03T00:00Z", {(16, 2, None): 3.0}))
    heads = {launch["head_size_padded"]: launch for launch in both["launches"]}
    assert sorted(heads) == [64, 128, 512]
    assert [heads[h]["measured_at"] for h in (512, 128, 64)] == ["2026-12-01T00:00Z", "2026-12-02T00:00Z",
                                                                  "2026-12-03T00:00Z"]
    assert [p["measured_at"] for p in both["provenance"]["earlier"]] == ["2026-12-02T00:00Z", "2026-12-01T00:00Z"]
    assert both["provenance"]["measured_at"] == "2026-12-03T00:00Z"
    ampere = dict(kept, provenance=dict(kept["provenance"], lowerings={"sm86": {"override": "sm86"}}))
    assert set(ranking.merged(ampere, both)["provenance"]["lowerings"]) == {"sm75", "sm86"}, \
        "a run of one proxy merged over another's names both proxies"


def test_a_launch_two_runs_rank_keeps_both_runs_cases_each_configuration_scored_by_the_worse():
    # run 1: 16/2 fastest, 32/8 1.5x; run 2 (another layer vLLM launches alike): 32/8 fastest, 16/2 1.2x;
    # 16/8 timed in run 1 only; vLLM's own launch (32, Triton's defaults: 2.0 ms) in both
    first = ranked_run(256, "2026-12-01T00:00Z", {(16, 2, None): 1.0, (32, 8, None): 1.5, (16, 8, None): 1.1})
    second = ranked_run(256, "2026-12-02T00:00Z", {(16, 2, None): 1.2, (32, 8, None): 1.0})
    (launch,) = ranking.merged(first, second)["launches"]
    assert launch["cases"] == ["case-2026-12-01T00:00Z", "case-2026-12-02T00:00Z"]
    assert [(r["tile_size"], r["num_warps"], r["score"]) for r in launch["ranked"]] == [
        (16, 2, 1.2), (32, 8, 1.5), (32, None, 2.0)]
    assert launch["measured_at"] == "2026-12-01T00:00Z, 2026-12-02T00:00Z"


def test_a_windowed_layer_takes_the_windowed_ranking_and_a_launcher_that_names_no_window_none(
        clamp, table, ranked, monkeypatch):
    path = ranked([config(16, 2, None, 65_536, 1.0), config(16, None, None, 65_536, 1.5)])
    document = json.loads(path.read_text())
    document["launches"].append(dict(document["launches"][0], windowed=True,
                                     ranked=[config(16, 8, None, 65_536, 1.0), config(16, 2, None, 65_536, 1.4)]))
    path.write_text(json.dumps(document))
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, sliding_window=0) == (16, 16, None) and options(clamp) == {False: {"num_warps": 2}}
    assert clamp(query(), 16, 32, 16, sliding_window=1024) == (16, 16, None) and options(clamp) == {False: {"num_warps": 8}}
    assert clamp(query(), 16, 32, 16) == (16, 16, None) and options(clamp) == {}, \
        "a release whose launcher passes no window keeps the fail-safe launch"


def test_the_patched_launcher_passes_its_window_to_the_clamp(patched_sources):
    call = next(line for line in patched_sources["0.33.0"].splitlines() if "adjust_stages=True" in line)
    assert call.rstrip().endswith("sliding_window=sliding_window_val"), call


def test_a_format_1_ranking_is_regrouped_by_window_from_its_stored_medians():
    """The Gemma 3 global and Gemma 4 sliding layers vLLM launches alike, ranked together (each configuration
    scored by its worse case), ranked apart: each group's best is its own fastest."""
    rows = [{"tile_size": 16, "num_warps": 2, "num_stages": 2, "shared": 60_000, "score": 1.18,
             "ms": {"global": 1.0, "sliding": 1.18}},
            {"tile_size": 32, "num_warps": 4, "num_stages": 2, "shared": 90_000, "score": 1.3,
             "ms": {"global": 1.3, "sliding": 1.0}}]
    launch = {k: v for k, v in LAUNCH_2D.items() if k != "windowed"}
    old = {"format": 1, "vllm_version": "0.33.0", "provenance": {"lowerings": {"sm75": {"vllm": "0.33.0"}},
                                                                  "measured_at": "2026-12-01T00:00Z"},
           "launches": [dict(launch, measured_at="2026-12-01T00:00Z", cases=["global", "sliding"], ranked=rows)]}
    document = ranking.regrouped(old, lambda name: name == "sliding", source="test")
    assert document["format"] == ranking.FORMAT and document["vllm_version"] == "0.33.0"
    best = {launch["windowed"]: (launch["cases"], [(r["tile_size"], r["score"]) for r in launch["ranked"]])
            for launch in document["launches"]}
    assert best == {False: (["global"], [(16, 1.0), (32, 1.3)]), True: (["sliding"], [(32, 1.0), (16, 1.18)])}
    assert all(launch["measured_at"] == "2026-12-01T00:00Z" for launch in document["launches"])


def committed_choices(clamp, tmp_path, monkeypatch):
    """Per committed launch: (cc, path, cases, the score of the configuration the clamp takes at its proxy's
    limit, the best score of those that fit). A score is the configuration's time over the fastest measured,
    in the worst case and the worst run (ranking.merged). The fit table holds the needs the ranking measured."""
    document = ranking.read(ranking.RANKED_FILE)
    limits = {75: TURING, 86: AMPERE_CONSUMER}
    entries = [{"cc": launch["cc"], "path": launch["path"], "head_size_padded": launch["head_size_padded"],
                "dtype": launch["dtype"], "block_m": launch["block_m"], "num_warps": r["num_warps"] or launch["num_warps"],
                "num_stages": r["num_stages"] or launch["num_stages"], "tile_size": r["tile_size"], "shared": r["shared"]}
               for launch in document["launches"] for r in launch["ranked"]]
    table = tmp_path / "fit-table.json"
    table.write_text(json.dumps({"format": 1, "vllm_version": "0.33.0", "triton_version": "3.6.0", "entries": entries}))
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(table))
    monkeypatch.setenv(ranking.ENV_RANKED, str(ranking.RANKED_FILE))
    monkeypatch.setitem(clamp.__globals__, "_vllm_turing_release", lambda: document["vllm_version"])
    choices = []
    for launch in (launch for launch in document["launches"] if launch["path"] != "encoder"):  # test_clamp_encoder
        monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(limits[launch["cc"]]))
        monkeypatch.setenv(layout.ENV_CC, str(launch["cc"]))
        clamp.__globals__["_vllm_turing_clamp_cache"].clear()
        tile, is_3d = launch["vllm_tile_size"], launch["path"] == "3d"
        q = query(head=launch["head_size_padded"], dtype=getattr(torch, launch["dtype"]))
        tiles = clamp(q, launch["block_m"], tile, tile, launch["num_warps"], launch["num_stages"],
                      sliding_window=1024 if launch["windowed"] else 0)
        picked = dict(options(clamp).get(is_3d, {}), tile_size=tiles[is_3d])
        fitting = [r for r in launch["ranked"] if r["shared"] <= limits[launch["cc"]]]
        row = next(r for r in fitting if r["tile_size"] == picked["tile_size"]
                   and r["num_warps"] == picked.get("num_warps") and r["num_stages"] == picked.get("num_stages"))
        choices.append((launch["cc"], launch["path"], launch["cases"], row["score"], fitting[0]["score"]))
    return choices


def test_every_committed_clamped_launch_is_within_5_percent_of_the_fastest_in_every_run_where_one_that_fits_is(
        clamp, tmp_path, monkeypatch):
    """Where some fitting configuration was within KEEP_MARGIN of the fastest in every case and run it was
    measured in, the clamp's is too; where none was (timings at the launch floor that rank apart from run
    to run), the clamp's is within the margin of the best of them."""
    choices = committed_choices(clamp, tmp_path, monkeypatch)
    assert len(choices) >= 22, "both proxies, every ranked launch"
    slow = [c for c in choices if c[3] > ranking.KEEP_MARGIN * (c[4] if c[4] > ranking.KEEP_MARGIN else 1.0)]
    assert not slow, slow


def test_the_committed_ranking_ranks_bf16_on_ampere_beside_fp16_and_nothing_in_bf16_on_turing():
    document = ranking.read(ranking.RANKED_FILE)
    ranked = {(launch["cc"], launch["path"], launch["dtype"]) for launch in document["launches"]}
    assert {(86, path, "bfloat16") for path in ("2d", "3d", "encoder")} <= ranked
    assert {(cc, path, "float16") for cc in (75, 86) for path in ("2d", "3d", "encoder")} <= ranked
    assert not {launch for launch in ranked if launch[0] == 75 and launch[2] == "bfloat16"}, "Turing has no bf16"


AMPERE_TIMES = {"float16": {(16, 2, 2): (1.0, 49_664), (32, 4, 2): (1.5, 82_944)},
                "bfloat16": {(16, 2, 2): (1.5, 49_664), (32, 4, 2): (1.0, 82_944)}}


def ampere_run(dtype, when):
    """A ranking of one Ampere-lowered 2D head-512 case run in `dtype` (vLLM's own launch 2.0 ms)."""
    return ranking.rank({"sm86": sweep_of({"global-h512-prefill": AMPERE_TIMES[dtype]}, low="sm86", dtype=dtype)},
                        source=f"bench/clamp_gpu --dtype {dtype}", measured_at=when)


def test_a_bf16_run_ranks_bf16_launches_and_merged_over_the_fp16_ranking_leaves_it_as_it_was():
    fp16 = ampere_run("float16", "2026-12-01T00:00Z")
    both = ranking.merged(fp16, ampere_run("bfloat16", "2026-12-02T00:00Z"))
    by_dtype = {launch["dtype"]: launch for launch in both["launches"]}
    assert sorted(by_dtype) == ["bfloat16", "float16"], "one launch shape, ranked apart by dtype"
    assert by_dtype["float16"] == dict(fp16["launches"][0], measured_at="2026-12-01T00:00Z")
    assert [(r["tile_size"], r["num_warps"], r["num_stages"]) for r in by_dtype["bfloat16"]["ranked"]] == [
        (32, None, 2), (16, 2, 2), (32, None, None)], "4 warps are Triton's default, so vLLM's own: None"
    assert by_dtype["bfloat16"]["measured_at"] == "2026-12-02T00:00Z"
    assert both["provenance"]["script"] == "bench/clamp_gpu --dtype bfloat16"
    assert [p["script"] for p in both["provenance"]["earlier"]] == ["bench/clamp_gpu --dtype float16"]


def test_a_merge_keeps_the_earlier_runs_the_new_ranking_names_itself():
    # bench/clamp_gpu merges its encoder ranking into its unified one, then the repository's file under both
    this_run = ranking.merged(ampere_run("bfloat16", "2026-12-02T00:01Z"), ampere_run("float16", "2026-12-02T00:02Z"))
    committed = ranked_run(512, "2026-12-01T00:00Z", {(16, 2, None): 1.0})
    merged = ranking.merged(committed, this_run)
    assert merged["provenance"]["measured_at"] == "2026-12-02T00:02Z"
    assert [p["measured_at"] for p in merged["provenance"]["earlier"]] == ["2026-12-02T00:01Z", "2026-12-01T00:00Z"]


def test_the_clamp_takes_the_bf16_ranking_for_a_bf16_launch_and_the_fp16_one_for_an_fp16_launch(
        clamp, tmp_path, monkeypatch):
    path = tmp_path / "ranked-configs.json"
    ranking.write(path, ranking.merged(ampere_run("float16", "2026-12-01T00:00Z"),
                                       ampere_run("bfloat16", "2026-12-02T00:00Z")))
    # the fit table holds both dtypes' needs of vLLM's own launch on cc 86, as the build writes it
    needs = {("2d", 32): 83_200, ("2d", 16): 49_792, ("3d", 16): 49_792}
    table = tmp_path / "fit-table.json"
    table.write_text(json.dumps({"format": 1, "vllm_version": "0.33.0", "triton_version": "3.6.0", "entries": [
        {"cc": 86, "path": p, "head_size_padded": 512, "dtype": dtype, "block_m": 16, "num_warps": None,
         "num_stages": None, "tile_size": tile, "shared": shared}
        for dtype in ("float16", "bfloat16") for (p, tile), shared in needs.items()]}))
    for name, value in ((layout.ENV_FIT_TABLE, table), (ranking.ENV_RANKED, path),
                        (layout.ENV_SMEM_LIMIT, AMPERE_CONSUMER), (layout.ENV_CC, 86)):
        monkeypatch.setenv(name, str(value))
    monkeypatch.setitem(clamp.__globals__, "_vllm_turing_release", lambda: "0.33.0")
    assert clamp(query(dtype=torch.float16), 16, 32, 16, sliding_window=0) == (16, 16, None)
    assert options(clamp) == {False: {"num_warps": 2, "num_stages": 2}}
    assert clamp(query(dtype=torch.bfloat16), 16, 32, 16, sliding_window=0) == (32, 16, None)
    assert options(clamp) == {False: {"num_stages": 2}}, "bf16's fastest: vLLM's tile and warps, 2 stages"
    assert clamp(query(dtype=torch.float32), 16, 32, 16, sliding_window=0) == (32, 16, None) and \
        options(clamp) == {}, "a dtype nothing ranks takes no other dtype's ranking"
