"""The clamp's second site: vLLM's encoder-attention launcher (context_attention_fwd in
triton_prefill_attention.py) on every real release 0.19.0-0.33.0, and the inserted encoder clamp's
run-time choice, taken from the patched 0.33.0 file and run on CPU tensors (no vLLM, no GPU)."""
import ast
import json
import logging
import sys
import types

import pytest
import torch

from contract import layout
from contract.devices import AMPERE, TURING as TURING_DEVICE
from patches import turing_clamp
from patches.turing_clamp.placement import ENCODER, ENCODER_CLAMP_FUNCTION, OWN_PREFIX, UNIFIED
from tooling import clamp_cycle, vllm_releases
from tooling.clamp_cycle import launcher_of, names, run_cli

TURING, AMPERE_CONSUMER = TURING_DEVICE.limit, AMPERE.limit
# context_attention_fwd's _fwd_kernel, fp16, compiled by Triton 3.8.0 for sm_75 / sm_86 (vLLM 0.33.0,
# bench/encoder_attention_smem and the fit check): {(cc, head padded, BLOCK): shared}
MEASURED = {(75, 256, 64): 131_072, (75, 256, 32): 65_536, (75, 256, 16): 32_768,
            (75, 512, 32): 131_072, (75, 512, 16): 65_536, (75, 64, 64): 32_768,
            (86, 256, 128): 163_840, (86, 256, 64): 73_728, (86, 512, 32): 67_584}


@pytest.mark.parametrize("version", vllm_releases.RELEASES)
def test_encoder_cycle_on_release(version, tmp_path):
    cycle = clamp_cycle.run_cycle(version, tmp_path, ENCODER)
    assert cycle.launcher == "context_attention_fwd"
    assert cycle.first_apply == "applied" and cycle.parses and cycle.check == "present"
    assert cycle.second_apply == "already" and cycle.byte_identical
    assert cycle.show_empty and cycle.strip_restores


@pytest.mark.parametrize("version", vllm_releases.RELEASES)
def test_encoder_clamp_sits_after_blocks_last_assignment_and_before_the_grid_reads_it(version, tmp_path):
    target = clamp_cycle.copy_release(version, tmp_path, ENCODER)
    assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
    body = launcher_of(target.read_bytes(), ENCODER).body
    index = next(i for i, stmt in enumerate(body) if ENCODER_CLAMP_FUNCTION in ast.unparse(stmt))
    assert "BLOCK" in names(body[index - 1], ast.Store), "the statement before the clamp assigns BLOCK"
    assert not any("BLOCK" in names(stmt, ast.Store) for stmt in body[index + 1:])
    readers = [stmt for stmt in body[index + 1:] if "BLOCK" in names(stmt, ast.Load)]
    assert readers and "grid" in names(readers[0], ast.Store), "the grid is the first to read the clamped BLOCK"


def test_docs_encoder_table_is_the_one_the_cycle_produces(tmp_path):
    cycles = [clamp_cycle.run_cycle(v, tmp_path / v, ENCODER) for v in vllm_releases.RELEASES]
    doc = (clamp_cycle.REPO / "docs" / "clamp.md").read_text()
    assert clamp_cycle.doc_table(doc, ENCODER) == clamp_cycle.markdown_table(cycles), \
        "regenerate with bench/clamp_releases --write-doc docs/clamp.md"


def test_both_sites_of_one_release_carry_one_runtime_block_and_their_own_call(tmp_path):
    unified = clamp_cycle.copy_release("0.33.0", tmp_path, UNIFIED)
    encoder = clamp_cycle.copy_release("0.33.0", tmp_path, ENCODER)
    assert run_cli("apply", "--target", unified).returncode == 0
    applied = run_cli("apply", "--target", encoder, "--json")
    assert applied.returncode == 0 and json.loads(applied.stdout)["outcome"] == "applied"
    assert json.loads(applied.stdout)["vllm_version"] == "0.33.0"
    for target, site in ((unified, UNIFIED), (encoder, ENCODER)):
        assert turing_clamp.check(target).outcome is turing_clamp.Outcome.PRESENT
        other = ENCODER if site is UNIFIED else UNIFIED
        tree = ast.parse(target.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == other.clamp_function]
        assert not calls, f"{target.name} calls the other site's clamp"
    # the CLI's --site finds each launcher of an installed vLLM
    site_packages = unified.parents[4]
    env = {"PYTHONPATH": f"{site_packages}:{clamp_cycle.REPO}", "PATH": "/usr/bin:/bin"}
    checked = run_cli("check", "--site", "encoder", "--json", env=env)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["file"].endswith("triton_prefill_attention.py")


def test_a_launcher_whose_block_is_read_before_its_last_assignment_is_refused(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path, ENCODER)
    source = target.read_text()
    drifted = source.replace("    if Lk >= 512:\n        BLOCK = min(BLOCK, 32)\n",
                             "    grid0 = BLOCK\n    if Lk >= 512:\n        BLOCK = min(BLOCK, 32)\n")
    assert drifted != source, "0.33.0's head-512 rule moved: update this test"
    target.write_text(drifted)
    report = turing_clamp.apply(target)
    assert report.outcome is turing_clamp.Outcome.REFUSED and report.sha256_before == report.sha256_after
    assert "BLOCK is read at line" in report.message and "vLLM 0.33.0" in report.message


# --- the inserted encoder clamp at run time -------------------------------------------------------

def entry(head, block, shared, cc=75, warps=8, stages=1, dtype="float16"):
    return {"cc": cc, "path": "encoder", "head_size_padded": head, "dtype": dtype, "block_m": block,
            "num_warps": warps, "num_stages": stages, "tile_size": block, "shared": shared}


@pytest.fixture(scope="module")
def patched_encoder_source(tmp_path_factory):
    target = clamp_cycle.copy_release("0.33.0", tmp_path_factory.mktemp("encoder"), ENCODER)
    assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
    return target.read_text()


def is_inserted(node):
    return getattr(node, "name", None) and node.name.startswith(OWN_PREFIX) or (
        isinstance(node, ast.Assign) and node.targets[0].id.lower().startswith(OWN_PREFIX))


@pytest.fixture
def inserted(patched_encoder_source):
    tree = ast.parse(patched_encoder_source)
    namespace = {"__name__": "vllm.v1.attention.ops.triton_prefill_attention"}
    exec(compile(ast.Module(body=[n for n in tree.body if is_inserted(n)], type_ignores=[]), "<patched>", "exec"),
         namespace)
    return namespace


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "fit-table.json"
    path.write_text(json.dumps({"format": 1, "vllm_version": "0.33.0", "triton_version": "3.8.0", "entries": [
        entry(head, block, shared, cc) for (cc, head, block), shared in MEASURED.items()]}))
    for name in (layout.ENV_SMEM_LIMIT, layout.ENV_CC, *layout.DEPRECATED_ENV_NAMES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(path))
    return path


def query(head, dtype="float16"):
    return torch.empty((64, 3, head), dtype=getattr(torch, dtype))


@pytest.mark.parametrize("cc, limit, head, vllm_block, expected", [
    (75, TURING, 256, 64, 32),  # EmbeddingGemma on a T4: 131,072 -> 65,536
    (75, TURING, 512, 32, 16),
    (75, TURING, 64, 64, 64),  # BERT: vLLM's own tile fits and stays
    (86, AMPERE_CONSUMER, 256, 128, 64),  # RTX 3090: 163,840 -> 73,728
    (86, AMPERE_CONSUMER, 512, 32, 32),
])
def test_the_encoder_block_is_the_largest_that_fits(inserted, table, monkeypatch, cc, limit, head, vllm_block, expected):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(limit))
    monkeypatch.setenv(layout.ENV_CC, str(cc))
    assert inserted[ENCODER_CLAMP_FUNCTION](query(head), vllm_block) == expected


def test_without_a_limit_the_block_stays_and_no_table_is_read(inserted, table):
    table.write_text("{ not json")
    assert inserted[ENCODER_CLAMP_FUNCTION](query(256), 64) == 64


def test_nothing_fits_names_the_encoder_head_size_and_limit(inserted, table, monkeypatch):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, "30000")
    with pytest.raises(RuntimeError, match="no encoder attention tile fits for head size 256.*30000 bytes"):
        inserted[ENCODER_CLAMP_FUNCTION](query(256), 64)


def test_the_inserted_call_runs_in_the_launcher_scope(patched_encoder_source, inserted, table, monkeypatch):
    launcher = launcher_of(patched_encoder_source, ENCODER)
    call = next(s for s in launcher.body if ENCODER_CLAMP_FUNCTION in ast.unparse(s))
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    inserted.update(q=query(256), BLOCK=64)
    exec(compile(ast.Module(body=[call], type_ignores=[]), "<call>", "exec"), inserted)
    assert inserted["BLOCK"] == 32


class OutOfResourcesStandin(Exception):
    """Stands in for triton.runtime.errors.OutOfResources (no Triton on this host)."""


@pytest.fixture
def triton_errors_standin(monkeypatch):
    errors = types.ModuleType("triton.runtime.errors")
    errors.OutOfResources = OutOfResourcesStandin
    for name, module in (("triton", types.ModuleType("triton")), ("triton.runtime", types.ModuleType("triton.runtime")),
                         ("triton.runtime.errors", errors)):
        monkeypatch.setitem(sys.modules, name, module)


class KernelStandin:
    """A kernel that refuses BLOCK_M above `largest` as a GPU does (OutOfResources before it runs)."""

    def __init__(self, largest):
        self.largest, self.launches = largest, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if kwargs["BLOCK_M"] > self.largest:
                raise OutOfResourcesStandin()
            self.launches.append((grid, kwargs["BLOCK_M"], kwargs["BLOCK_N"]))
        return launch


def test_without_a_table_entry_a_refused_block_halves_and_the_grid_covers_every_query(
        inserted, table, monkeypatch, caplog, triton_errors_standin):
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    kernel = KernelStandin(largest=32)
    inserted["_fwd_kernel"] = kernel
    with caplog.at_level(logging.WARNING):
        assert inserted[ENCODER_CLAMP_FUNCTION](query(128), 64) == 64, "no entry for head 128: vLLM's BLOCK"
    assert any("no fit-table entry" in r.getMessage() and "encoder" in r.getMessage() for r in caplog.records)
    guarded = inserted["_fwd_kernel"]
    assert guarded is not kernel and guarded._vllm_turing_kernel is kernel
    for _ in range(2):
        guarded[(2, 3, 5)](BLOCK_M=64, BLOCK_N=64, BLOCK_DMODEL=128, num_warps=8, num_stages=1)
    # 5 query blocks of 64 become 10 of 32; the step-down is remembered (no second refusal)
    assert kernel.launches == [((2, 3, 10), 32, 32), ((2, 3, 10), 32, 32)]
    assert sum("refused tile 64" in r.getMessage() for r in caplog.records) == 1


def write_encoder_ranking(path, rows, cc=75, head=64, block=64, own=(4, 1)):
    """A ranked-configurations file with one encoder launch: rows [(BLOCK, warps, stages, shared, score)]."""
    from tooling import clamp_ranking as ranking

    path.write_text(json.dumps({"format": ranking.FORMAT, "vllm_version": "0.33.0", "provenance": {}, "launches": [
        {"cc": cc, "path": "encoder", "head_size_padded": head, "dtype": "float16", "block_m": block,
         "num_warps": own[0], "num_stages": own[1], "vllm_tile_size": block, "windowed": False, "cases": ["c"],
         "ranked": [{"tile_size": b, "num_warps": w, "num_stages": s, "shared": shared, "score": score}
                    for b, w, s, shared, score in rows]}]}))


@pytest.fixture
def encoder_ranked(inserted, tmp_path, monkeypatch):
    from tooling import clamp_ranking as ranking

    monkeypatch.setitem(inserted, "_vllm_turing_release", lambda: "0.33.0")
    path = tmp_path / "ranked-configs.json"
    monkeypatch.setenv(ranking.ENV_RANKED, str(path))
    return lambda *args, **kwargs: write_encoder_ranking(path, *args, **kwargs)


class RecordingKernelStandin:
    """A kernel that records the launch options it is given (stands in for _fwd_kernel on CPU)."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, kwargs))


def test_a_faster_ranked_encoder_configuration_is_launched_with_its_own_warps(
        inserted, table, encoder_ranked, monkeypatch, triton_errors_standin):
    encoder_ranked([(32, 8, 1, 16_384, 1.0), (64, 4, 1, 32_768, 1.5)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    kernel = inserted["_fwd_kernel"] = RecordingKernelStandin()
    assert inserted[ENCODER_CLAMP_FUNCTION](query(64), 64) == 32, "BERT on a T4: the ranked BLOCK, not vLLM's 64"
    inserted["_fwd_kernel"][(2, 3, 10)](BLOCK_M=32, BLOCK_N=32, BLOCK_DMODEL=64, num_warps=4, num_stages=1)
    assert kernel.launches == [((2, 3, 10), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_DMODEL": 64, "num_warps": 8,
                                             "num_stages": 1})]


def test_vllms_own_encoder_launch_stays_when_nothing_beats_it_by_more_than_the_margin(
        inserted, table, encoder_ranked, monkeypatch):
    encoder_ranked([(32, 8, 1, 16_384, 1.0), (64, 4, 1, 32_768, 1.04)])
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(TURING))
    assert inserted[ENCODER_CLAMP_FUNCTION](query(64), 64) == 64
    assert inserted["_vllm_turing_encoder_options"] == {}


def test_a_ranked_encoder_configuration_that_does_not_fit_is_passed_over_for_the_fit_tables_block(
        inserted, table, encoder_ranked, monkeypatch):
    encoder_ranked([(64, 4, 2, 106_496, 1.0), (32, 4, 2, 51_200, 1.3), (64, 8, 1, 73_728, 1.4)],
                   cc=86, head=256, block=128, own=(8, 1))
    monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(AMPERE_CONSUMER))
    monkeypatch.setenv(layout.ENV_CC, "86")
    assert inserted[ENCODER_CLAMP_FUNCTION](query(256), 128) == 32
    assert inserted["_vllm_turing_encoder_options"] == {"num_warps": 4, "num_stages": 2}


def test_every_committed_encoder_launch_is_within_5_percent_of_the_fastest_fitting_one(inserted, monkeypatch, tmp_path):
    from tooling import clamp_ranking as ranking

    document = ranking.read(ranking.RANKED_FILE)
    launches = [launch for launch in document["launches"] if launch["path"] == "encoder"]
    assert {(launch["cc"], launch["head_size_padded"]) for launch in launches} >= {
        (75, 64), (75, 128), (75, 256), (75, 512), (86, 256), (86, 512)}
    limits = {75: TURING, 86: AMPERE_CONSUMER}
    entries = [entry(launch["head_size_padded"], r["tile_size"], r["shared"], launch["cc"], r["num_warps"],
                     r["num_stages"], launch["dtype"]) for launch in launches for r in launch["ranked"]]
    table = tmp_path / "fit-table.json"
    table.write_text(json.dumps({"format": 1, "vllm_version": "0.33.0", "triton_version": "3.6.0", "entries": entries}))
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(table))
    monkeypatch.setenv(ranking.ENV_RANKED, str(ranking.RANKED_FILE))
    monkeypatch.setitem(inserted, "_vllm_turing_release", lambda: document["vllm_version"])
    for launch in launches:
        monkeypatch.setenv(layout.ENV_SMEM_LIMIT, str(limits[launch["cc"]]))
        monkeypatch.setenv(layout.ENV_CC, str(launch["cc"]))
        inserted["_vllm_turing_clamp_cache"].clear()
        block = inserted[ENCODER_CLAMP_FUNCTION](query(launch["head_size_padded"], launch["dtype"]),
                                                 launch["vllm_tile_size"])
        options = inserted["_vllm_turing_encoder_options"]
        picked = (block, options.get("num_warps", launch["num_warps"]), options.get("num_stages", launch["num_stages"]))
        fitting = [r for r in launch["ranked"] if r["shared"] <= limits[launch["cc"]]]
        row = next(r for r in fitting if (r["tile_size"], r["num_warps"], r["num_stages"]) == picked)
        for case in launch["cases"]:
            assert row["ms"][case] / min(r["ms"][case] for r in fitting) <= ranking.KEEP_MARGIN, \
                (launch["cc"], launch["dtype"], case)
