"""Run-time behaviour of the code the clamp inserts, taken from a patched real release.

No vLLM and no GPU here: the inserted statements are compiled out of the patched file
and run on real (CPU) torch tensors with TURING_CLAMP_SMEM_LIMIT, which applies without
a CUDA device. The real-launcher runs (limits 65,536 and 232,448) are in the image tier.
"""
import ast
import json
import logging

import pytest
import torch

from contract import layout
from patches import turing_clamp
from patches.turing_clamp.placement import CLAMP_FUNCTION, OWN_PREFIX
from tooling import clamp_cycle
from tests import REPO


TURING, H200, AMPERE_CONSUMER = 65_536, 232_448, 101_376
# Shared-memory needs as the fit check would write them (2d figures measured on the real
# vLLM 0.33.0 kernel for sm_75 with Triton 3.8, as docs/clamp.md lists them; 3d ones are inputs of these tests).
NEEDS = {("2d", 32): 98_304, ("2d", 16): 65_536, ("3d", 16): 65_536, ("3d", 8): 40_960}


def entry(path, tile, shared, cc=75, head=512, dtype="float16", block_m=16, warps=None, stages=None):
    return {"cc": cc, "path": path, "head_size_padded": head, "dtype": dtype, "block_m": block_m,
            "num_warps": warps, "num_stages": stages, "tile_size": tile, "shared": shared}


# cc 86 needs less than cc 75 for the same launch (inputs of the cc tests)
TWO_CC = [entry("2d", 32, 70_000, cc=86), entry("2d", 16, 40_000, cc=86),
          entry("2d", 32, 98_304, cc=75), entry("2d", 16, 65_536, cc=75),
          entry("3d", 16, 1_000, cc=75), entry("3d", 16, 1_000, cc=86)]


def write_table(path, entries):
    path.write_text(json.dumps({"format": 1, "vllm_version": "0.33.0", "triton_version": "3.8.0",
                                "entries": entries}))
    return path


@pytest.fixture(scope="module")
def patched_sources(tmp_path_factory):
    sources = {}
    for version in ("0.19.0", "0.33.0"):
        target = clamp_cycle.copy_release(version, tmp_path_factory.mktemp(version))
        assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
        sources[version] = target.read_text()
    return sources


def compiled(source, keep):
    tree = ast.parse(source)
    return compile(ast.Module(body=[n for n in tree.body if keep(n)], type_ignores=[]), "<patched>", "exec")


def is_inserted(node):
    return getattr(node, "name", None) and node.name.startswith(OWN_PREFIX) or (
        isinstance(node, ast.Assign) and node.targets[0].id.lower().startswith(OWN_PREFIX))


@pytest.fixture
def clamp(patched_sources):
    """The inserted module-level code of the patched 0.33.0, fresh (empty caches) per test."""
    namespace = {"__name__": "vllm.v1.attention.ops.triton_unified_attention"}
    exec(compiled(patched_sources["0.33.0"], is_inserted), namespace)
    return namespace[CLAMP_FUNCTION]


@pytest.fixture
def defaults(patched_sources):
    """vLLM 0.33.0's own tile sizes for fp16 head 512, from its real _get_tile_size()."""
    namespace = {}
    exec(compiled(patched_sources["0.33.0"],
                  lambda n: getattr(n, "name", None) in ("_get_tile_size", "_is_gemma3_attention")), namespace)
    choose = namespace["_get_tile_size"]
    return choose(512, 0, 2, is_prefill=True), choose(512, 0, 2, is_prefill=False)


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = write_table(tmp_path / "fit-table.json",
                       [entry(path, tile, shared) for (path, tile), shared in NEEDS.items()])
    for name in (layout.ENV_SMEM_LIMIT, layout.ENV_CC, *layout.DEPRECATED_ENV_NAMES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(path))
    return path


def query(head=512, dtype=torch.float16):
    return torch.empty((3, 8, head), dtype=dtype)


def test_without_a_limit_nothing_changes_and_no_table_is_read(clamp, defaults, table):
    table.write_text("{ not json")
    assert clamp(query(), 16, *defaults) == (*defaults, None)


def test_turing_limit_keeps_the_largest_tiles_that_fit(clamp, defaults, table, monkeypatch):
    assert defaults == (32, 16), "vLLM 0.33.0's defaults for head 512 fp16"
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, *defaults) == (16, 16, None)


@pytest.mark.parametrize("limit", [AMPERE_CONSUMER, H200, 98_304])
def test_where_the_defaults_fit_they_are_kept_exactly(clamp, defaults, table, monkeypatch, limit):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(limit))
    assert clamp(query(), 16, *defaults, 4, 2, adjust_stages=True) == (*defaults, 2)
    assert clamp(query(), 16, *defaults) == (*defaults, None)


def test_nothing_fits_names_head_size_limit_and_version(clamp, defaults, table, monkeypatch):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, "60000")
    with pytest.raises(RuntimeError) as error:
        clamp(query(), 16, *defaults)
    message = str(error.value)
    assert "head size 512" in message and "60000 bytes" in message and "vLLM " in message
    assert "65536" in message, "names the smallest need"


def test_a_launch_without_table_entry_keeps_defaults_for_triton_to_judge_and_warns_once(
        clamp, table, monkeypatch, caplog):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert clamp(query(head=128), 16, 32, 16) == (32, 16, None)
    warnings = [r for r in caplog.records if "python -m patches.fitcheck" in r.getMessage()]
    assert len(warnings) == 1, "one per launch shape, not one per call"
    assert warnings[0].args[1] == "2d/3d" and "OutOfResources" in warnings[0].getMessage()


@pytest.fixture
def inserted(patched_sources):
    """The namespace of the inserted code of the patched 0.33.0 (fresh per test)."""
    namespace = {"__name__": "vllm.v1.attention.ops.triton_unified_attention"}
    exec(compiled(patched_sources["0.33.0"], is_inserted), namespace)
    return namespace


def test_a_refused_tile_halves_down_to_the_smallest_tile_and_no_further(inserted):
    next_tile = inserted["_vllm_turing_next_tile"]
    assert [next_tile(t) for t in (128, 64, 32, 16)] == [64, 32, 16, None]


def test_the_step_down_is_remembered_per_launch_shape_not_per_call(inserted):
    key = inserted["_vllm_turing_launch_key"]
    q16, q32 = torch.empty(2, 8, 512, dtype=torch.float16), torch.empty(2, 8, 512, dtype=torch.float32)
    launch = dict(query_ptr=q16, num_seqs=3, HEAD_SIZE_PADDED=512, BLOCK_M=16, TILE_SIZE=32, num_warps=4)
    same_shape_other_call = dict(launch, num_seqs=40, TILE_SIZE=16)
    assert key("kernel_unified_attention", launch) == key("kernel_unified_attention", same_shape_other_call)
    for other in (dict(launch, HEAD_SIZE_PADDED=256), dict(launch, num_warps=8), dict(launch, query_ptr=q32)):
        assert key("kernel_unified_attention", launch) != key("kernel_unified_attention", other)
    assert key("kernel_unified_attention", launch) != key("kernel_unified_attention_3d", launch)


def test_launches_are_guarded_only_where_the_table_had_no_entry(clamp, table, monkeypatch):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    clamp(query(), 16, 32, 16)
    clamp(query(head=128), 16, 32, 16)
    flags = {key[1]: decision[3] for key, decision in clamp.__globals__["_vllm_turing_clamp_cache"].items()}
    assert flags == {512: False, 128: True}


def test_a_missing_table_keeps_defaults_for_triton_to_judge_with_a_warning(clamp, defaults, table, monkeypatch, caplog):
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(table.parent / "absent.json"))
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    with caplog.at_level(logging.WARNING):
        assert clamp(query(), 16, *defaults) == (*defaults, None)
    assert any("absent.json" in r.getMessage() for r in caplog.records)


def test_a_corrupt_table_is_named(clamp, defaults, table, monkeypatch):
    table.write_text('{"format": 1, "entries": [{"cc": 75}]}')
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    with pytest.raises(RuntimeError, match="fit table .*fit-table.json.*patches.fitcheck"):
        clamp(query(), 16, *defaults)


@pytest.mark.parametrize("raw", ["64k", "-1", "0", "65536.0"])
def test_an_invalid_limit_is_a_clear_error(clamp, defaults, table, monkeypatch, raw):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, raw)
    with pytest.raises(ValueError, match=rf"{layout.ENV_SMEM_LIMIT}=.* positive integer"):
        clamp(query(), 16, *defaults)


def test_entries_of_the_device_cc_win_and_any_cc_serves_otherwise(clamp, table, monkeypatch):
    write_table(table, TWO_CC)
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, "80000")
    monkeypatch.setenv(layout.ENV_CC, "86")
    assert clamp(query(), 16, 32, 16)[0] == 32
    monkeypatch.setenv(layout.ENV_CC, "75")
    assert clamp(query(dtype=torch.float16), 16, 32, 16)[0] == 32, "cached per launch: no new query"


@pytest.mark.parametrize("cc, expected", [(75, 16), (86, 32), (80, 16)])
def test_cc_choice_on_a_fresh_cache(patched_sources, table, monkeypatch, cc, expected):
    namespace = {"__name__": "clamp_under_test"}
    exec(compiled(patched_sources["0.33.0"], is_inserted), namespace)
    write_table(table, TWO_CC)
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, "80000")
    monkeypatch.setenv(layout.ENV_CC, str(cc))
    # cc 80 has no entries: the largest need over all cc decides (98,304 for tile 32)
    assert namespace[CLAMP_FUNCTION](query(), 16, 32, 16)[0] == expected


def test_fewer_stages_are_used_when_no_tile_fits_at_the_launch_stages(clamp, table, monkeypatch):
    write_table(table, [entry("2d", 32, 120_000, stages=2), entry("2d", 16, 90_000, stages=2),
                        entry("2d", 32, 80_000, stages=1), entry("2d", 16, 50_000, stages=1),
                        entry("3d", 16, 30_000, stages=2), entry("3d", 16, 20_000, stages=1)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert clamp(query(), 16, 32, 16, None, 2, adjust_stages=True) == (16, 16, 1)


def test_stages_stay_when_the_release_has_no_stage_variable(clamp, table, monkeypatch):
    write_table(table, [entry("2d", 32, 120_000, stages=2), entry("2d", 16, 90_000, stages=2),
                        entry("2d", 16, 50_000, stages=1), entry("3d", 16, 30_000, stages=2)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    with pytest.raises(RuntimeError, match="no attention tile fits"):
        clamp(query(), 16, 32, 16, None, 2)


def test_the_decision_is_cached_per_launch(clamp, defaults, table, monkeypatch):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    first = clamp(query(), 16, *defaults)
    table.unlink()
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(H200))
    assert clamp(query(), 16, *defaults) == first == (16, 16, None)
    assert clamp(query(dtype=torch.bfloat16), 16, *defaults) == (*defaults, None), \
        "another dtype is another launch: decided anew (no entry: defaults)"


@pytest.mark.parametrize("version, stages", [("0.19.0", None), ("0.33.0", 3)])
def test_the_inserted_call_statement_runs_in_the_launcher_scope(patched_sources, table, monkeypatch,
                                                                version, stages):
    source = patched_sources[version]
    tree = ast.parse(source)
    launcher = next(n for n in tree.body if getattr(n, "name", None) == "unified_attention")
    call = next(s for s in launcher.body if CLAMP_FUNCTION in ast.unparse(s))
    scope = {"__name__": "clamp_under_test"}
    exec(compiled(source, is_inserted), scope)
    write_table(table, [entry(p, t, s, stages=stages) for (p, t), s in NEEDS.items()])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    scope.update(q=query(), BLOCK_M=16, TILE_SIZE_PREFILL=32, TILE_SIZE_DECODE=16,
                 launch_num_warps=None, launch_num_stages=stages, sliding_window_val=0)
    exec(compile(ast.Module(body=[call], type_ignores=[]), "<call>", "exec"), scope)
    assert (scope["TILE_SIZE_PREFILL"], scope["TILE_SIZE_DECODE"]) == (16, 16)
    assert scope["launch_num_stages"] == stages


@pytest.fixture
def runtime_names():
    """The inserted block's own spelling of the environment names and the default table path."""
    from patches.turing_clamp import runtime
    return runtime


def test_the_inserted_code_spells_contracts_names_and_path(runtime_names):
    # The inserted code cannot import contract/ (a host install has none): its literals must agree.
    new = {runtime_names._VLLM_TURING_ENV_SMEM_LIMIT[0]: layout.ENV_SMEM_LIMIT,
           runtime_names._VLLM_TURING_ENV_CC[0]: layout.ENV_CC,
           runtime_names._VLLM_TURING_ENV_FIT_TABLE[0]: layout.ENV_FIT_TABLE}
    assert all(spelled == expected for spelled, expected in new.items())
    aliases = {old: name for name, old in (runtime_names._VLLM_TURING_ENV_SMEM_LIMIT,
                                           runtime_names._VLLM_TURING_ENV_CC,
                                           runtime_names._VLLM_TURING_ENV_FIT_TABLE)}
    assert aliases == layout.DEPRECATED_ENV_NAMES
    assert runtime_names._VLLM_TURING_DEFAULT_FIT_TABLE == layout.FIT_TABLE
    # the ranked configurations: ranking.py's name, and where the Dockerfile's COPY patches/ puts its file
    from tooling import clamp_ranking as ranking
    assert runtime_names._VLLM_TURING_ENV_RANKED == (ranking.ENV_RANKED,)
    assert runtime_names._VLLM_TURING_DEFAULT_RANKED == layout.in_install_dir(
        ranking.RANKED_FILE.relative_to(REPO).as_posix())
    assert runtime_names._VLLM_TURING_RANKED_FORMAT == ranking.FORMAT, "the format the writer writes is the one read"
    assert runtime_names._VLLM_TURING_KEEP_MARGIN == ranking.KEEP_MARGIN


def old_name(name):
    return next(old for old, new in layout.DEPRECATED_ENV_NAMES.items() if new == name)


@pytest.mark.parametrize("cc, expected", [(75, 16), (86, 32)])
def test_the_old_names_are_honoured_when_the_new_ones_are_unset(patched_sources, table, monkeypatch, cc, expected):
    namespace = {"__name__": "clamp_under_test"}
    exec(compiled(patched_sources["0.33.0"], is_inserted), namespace)
    write_table(table, TWO_CC)
    monkeypatch.delenv(layout.ENV_FIT_TABLE)
    monkeypatch.setenv(old_name(layout.ENV_FIT_TABLE), str(table))
    monkeypatch.setenv(old_name(layout.ENV_SMEM_LIMIT), "80000")
    monkeypatch.setenv(old_name(layout.ENV_CC), str(cc))
    # Tile 16 on cc 75 needs the old-named limit and table (without either vLLM's 32 stays);
    # tile 32 on cc 86 needs the old-named cc (the default is 75).
    assert namespace[CLAMP_FUNCTION](query(), 16, 32, 16)[0] == expected


def test_an_invalid_old_limit_is_named_by_its_old_name(clamp, defaults, table, monkeypatch):
    monkeypatch.setenv(old_name(layout.ENV_SMEM_LIMIT), "64k")
    with pytest.raises(ValueError, match=rf"{old_name(layout.ENV_SMEM_LIMIT)}='64k'"):
        clamp(query(), 16, *defaults)


def test_the_new_names_win_over_the_old_ones(clamp, defaults, table, monkeypatch):
    write_table(table, TWO_CC)
    monkeypatch.setenv(old_name(layout.ENV_FIT_TABLE), str(table.parent / "absent.json"))
    monkeypatch.setenv(old_name(layout.ENV_SMEM_LIMIT), str(H200))
    monkeypatch.setenv(old_name(layout.ENV_CC), "86")
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, "80000")
    monkeypatch.setenv(layout.ENV_CC, "75")
    # the new names: cc 75's table (tile 32 needs 98,304) under 80,000 bytes gives tile 16
    assert clamp(query(), 16, 32, 16)[0] == 16
