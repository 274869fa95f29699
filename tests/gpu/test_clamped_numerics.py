"""The clamped tile configuration computes the same attention as vLLM's default one.

vLLM 0.33.0's patched unified_attention runs on every Gemma 4 case and family layer
(tooling/attention_cases.py ALL_CASE_NAMES) in four modes, each in its
own process: clamped (TURING_CLAMP_SMEM_LIMIT=65536 with a fit table compiled for sm_75,
so the tiles are those a Turing GPU launches) and default (no limit: the H200's own
232,448 bytes, where vLLM's tiles fit unchanged), each natively and under Turing's lowering
(TRITON_OVERRIDE_ARCH=sm75: Triton compiles as for sm_75, so the clamp takes the sm_75 entries
of the fit table and, where $TURING_CLAMP_RANKED_CONFIGS names them, the ranked configurations
for cc 75, and the compiled kernel's shared memory is what a Turing GPU would need). All are
compared with a float32 reference of paged attention computed from the same fp16 inputs.

Two more modes run as an RTX 3090 does (tests/gpu/ampere_proxy.py): Triton lowering for sm_86, the clamp
at Ampere's 101,376 bytes with the fit table for sm_86 and the ranked configurations for cc 86 of the
run's dtype, whose rows must be what launched: clamped-sm86 runs every case in fp16, clamped-sm86-bf16
the Gemma 4 cases in bf16 (a bf16 checkpoint), compared with the float32 reference of the same bf16
inputs. bf16 never runs under the sm_75 lowering: Turing has no bf16.
"""
from __future__ import annotations

import functools

import pytest

from contract.devices import TURING
from tests.gpu.ampere_proxy import AMPERE_LIMIT, bf16_bound
from tooling.attention_cases import ALL_CASE_NAMES, CASE_NAMES, case_named

# fp16 inputs, fp32 accumulation, fp16 output: outputs reach |4.6| here (see
# paged_attention.QUERY_GAIN), where rounding to fp16 alone costs up to 2e-3 (half an ulp).
# Measured on the H200 (docs/gpu-validation.md): max 1.95e-3, mean <= 6.3e-5 in both modes.
MAX_ABS_TOLERANCE = 1e-2
MEAN_ABS_TOLERANCE = 2e-4
MODES = ("clamped", "default", "clamped-sm75", "default-sm75")
# the Ampere proxy's modes and their dtypes: fp16 on every case, bf16 on the Gemma 4 cases (the ones the
# ranking's bf16 rows were timed on)
AMPERE_MODES = {"clamped-sm86": "float16", "clamped-sm86-bf16": "bfloat16"}
BF16_MODE = "clamped-sm86-bf16"
# (max, mean) absolute error against float32 per dtype; bf16's: tests/gpu/ampere_proxy.py, BF16_OVER_FP16_ROUNDING
TOLERANCES = {"float16": (MAX_ABS_TOLERANCE, MEAN_ABS_TOLERANCE),
              "bfloat16": (bf16_bound(MAX_ABS_TOLERANCE), bf16_bound(MEAN_ABS_TOLERANCE))}
# (clamped mode, its default mode) per lowering
PAIRS = (("clamped", "default"), ("clamped-sm75", "default-sm75"))


def modes_of(case_name: str) -> tuple:
    return MODES + tuple(mode for mode in AMPERE_MODES if mode != BF16_MODE or case_name in CASE_NAMES)


def ampere_modes_of(case_name: str) -> tuple:
    return tuple(mode for mode in modes_of(case_name) if mode in AMPERE_MODES)


def dtype_of(mode: str) -> str:
    return AMPERE_MODES.get(mode, "float16")


@pytest.fixture(scope="module")
def runs(vllm_site, fit_table, scratch, ampere):
    """{mode: (folder with <case>.pt outputs, {case: launches})} for the modes on the GPU's own and the
    sm_75 lowering (MODES). The Ampere proxy's runs (ampere) are started first, so their compiles overlap
    these."""
    from tooling.gpu_site import run_attention

    results = {}
    for mode in MODES:
        folder = scratch / f"outputs-{mode}"
        results[mode] = (folder, run_attention(vllm_site, fit_table, mode, folder)["cases"])
    return results


@pytest.fixture(scope="module")
def ampere_runs(ampere):
    """{mode: (folder with <case>.pt outputs, {case: launches})} for AMPERE_MODES, as `runs` holds MODES."""
    results = {}
    for mode, dtype in AMPERE_MODES.items():
        folder, summary = ampere[dtype].unified()
        assert summary["smem_limit"] == str(AMPERE_LIMIT), summary["smem_limit"]
        results[mode] = (folder, summary["cases"])
    return results


def runs_of(request, mode: str) -> dict:
    """The runs holding `mode`: ampere_runs for AMPERE_MODES, else runs."""
    return request.getfixturevalue("ampere_runs" if mode in AMPERE_MODES else "runs")


@functools.lru_cache(maxsize=1)
def reference(case_name: str, dtype: str = "float16"):
    """The float32 reference of one case from its `dtype` inputs on the GPU (kept while that case's tests run)."""
    import torch

    from tooling.paged_attention import make_batch, reference_attention

    case = case_named(case_name)
    return reference_attention(make_batch(case, device="cuda", dtype=getattr(torch, dtype)), case.layer)


def output(runs, mode: str, case_name: str):
    import torch

    return torch.load(runs[mode][0] / f"{case_name}.pt").cuda()


def attention_launch(runs, mode: str, case_name: str) -> dict:
    launches = [l for l in runs[mode][1][case_name] if l["kernel"] == "kernel_unified_attention"]
    assert len(launches) == 1, f"{case_name} ({mode}) launched the attention kernel {len(launches)} times"
    return launches[0]


@pytest.mark.parametrize("case_name", ALL_CASE_NAMES)
def test_launch_takes_the_phase_kernel_path(request, case_name):
    """Prefill batches take the 2D kernel, decode batches the 3D split-K kernel and its reduction,
    and the reduction uses the tile size the clamped kernel ran with."""
    expect_3d = case_named(case_name).phase == "decode"
    for mode in modes_of(case_name):
        runs = runs_of(request, mode)
        launch = attention_launch(runs, mode, case_name)
        assert launch["IS_3D"] is expect_3d, f"{case_name} ({mode}): IS_3D={launch['IS_3D']}"
        reductions = [l for l in runs[mode][1][case_name] if l["kernel"] == "reduce_segments"]
        assert [r["TILE_SIZE"] for r in reductions] == ([launch["TILE_SIZE"]] if expect_3d else [])


@pytest.mark.parametrize("clamped_mode,default_mode", PAIRS)
def test_clamp_shrinks_the_head_512_prefill_tile(runs, clamped_mode, default_mode):
    """The launch users report (head 512, 2D, TILE_SIZE 32: 98,304 bytes on sm_75) is clamped."""
    default = attention_launch(runs, default_mode, "global-h512-prefill")["TILE_SIZE"]
    clamped = attention_launch(runs, clamped_mode, "global-h512-prefill")["TILE_SIZE"]
    assert clamped < default, f"TILE_SIZE {clamped} clamped vs {default} default: the clamp changed nothing"


@pytest.mark.parametrize("case_name", ALL_CASE_NAMES)
def test_clamped_tiles_fit_turing_shared_memory(runs, fit_table, figures, case_name):
    """Every clamped launch needs at most 65,536 bytes on sm_75, by the compiled fit table;
    no clamped tile is larger than vLLM's default."""
    from tooling.gpu_site import turing_needs

    needs = turing_needs(fit_table)
    rows = {}
    for mode in ("clamped", "default"):
        launch = attention_launch(runs, mode, case_name)
        key = ("3d" if launch["IS_3D"] else "2d", launch["HEAD_SIZE_PADDED"], "float16", launch["BLOCK_M"],
               launch["num_warps"], launch["num_stages"])
        rows[mode] = {"tile_size": launch["TILE_SIZE"], "sm75_shared": needs.get(key, {}).get(launch["TILE_SIZE"]),
                      "launch": list(key)}
    figures.setdefault("tiles", {})[case_name] = rows
    assert rows["clamped"]["sm75_shared"] is not None, (
        f"{case_name}: fit table {fit_table} has no sm_75 entry for {rows['clamped']}")
    assert rows["clamped"]["sm75_shared"] <= TURING.limit
    assert rows["clamped"]["tile_size"] <= rows["default"]["tile_size"]


@pytest.mark.parametrize("case_name", ALL_CASE_NAMES)
def test_clamped_launches_fit_turing_under_its_lowering(runs, figures, case_name):
    """Under TRITON_OVERRIDE_ARCH=sm75 the compiled kernel's own shared memory is Turing's: every
    launch the clamp makes there (fit table and ranked configurations) needs at most 65,536 bytes."""

    launches = runs["clamped-sm75"][1][case_name]
    figures.setdefault("sm75_launches", {})[case_name] = launches
    assert launches and all(l["shared"] is not None for l in launches), launches
    too_large = [l for l in launches if l["shared"] > TURING.limit]
    assert not too_large, f"{case_name}: launches above {TURING.limit} bytes on sm_75: {too_large}"


@pytest.mark.parametrize("case_name,mode", [(c, m) for c in ALL_CASE_NAMES for m in ampere_modes_of(c)])
def test_ampere_launch_is_the_ranked_one_within_its_limit(ampere_runs, figures, case_name, mode):
    """On the Ampere proxy the clamp launched the configuration the ranking's rows for cc 86 in the run's
    dtype give this case's launch (tests/gpu/ampere_proxy.py, ranked_choice), and its compiled kernel needs
    at most Ampere's 101,376 bytes."""
    from tooling import clamp_ranking as ranking
    from tests.gpu.ampere_proxy import configuration, ranked_choice, ranked_file, ranked_launch

    dtype = dtype_of(mode)
    launch = attention_launch(ampere_runs, mode, case_name)
    path = "3d" if launch["IS_3D"] else "2d"
    ranked = ranked_launch(ranking.read(ranked_file()), dtype, path, launch["HEAD_SIZE_PADDED"], case_name)
    expected = ranked_choice(ranked)
    ran = (launch["TILE_SIZE"], launch["num_warps"], launch["num_stages"])
    figures.setdefault(mode.replace("clamped-", "").replace("-", "_"), {})[case_name] = {
        "launch": list(ran), "shared": launch["shared"], "ranked": list(configuration(expected)),
        "ranked_shared": expected["shared"], "vllm_tile_size": ranked["vllm_tile_size"]}
    assert launch["BLOCK_M"] == ranked["block_m"], f"{case_name}: BLOCK_M {launch['BLOCK_M']} vs ranked {ranked}"
    assert ran == configuration(expected), (
        f"{case_name}: launched TILE_SIZE/num_warps/num_stages {ran}, the ranked {dtype} choice is "
        f"{configuration(expected)} ({ranked_file()}, launch {ranked['path']} head {ranked['head_size_padded']})")
    assert launch["shared"] is not None and launch["shared"] <= AMPERE_LIMIT, f"{case_name}: {launch}"


@pytest.mark.parametrize("case_name,mode", [(c, m) for c in ALL_CASE_NAMES for m in modes_of(c)])
def test_output_matches_float32_reference(request, figures, case_name, mode):
    from tooling.paged_attention import error_figures

    dtype = dtype_of(mode)
    result = output(runs_of(request, mode), mode, case_name)
    assert str(result.dtype) == f"torch.{dtype}", f"{case_name} ({mode}): output in {result.dtype}"
    errors = error_figures(result, reference(case_name, dtype))
    figures.setdefault("errors", {}).setdefault(case_name, {})[mode] = errors
    max_abs, mean_abs = TOLERANCES[dtype]
    assert errors["ref_std"] > 0.1, f"{case_name}: reference outputs are too small to judge ({errors})"
    assert errors["max_abs"] <= max_abs, f"{case_name} ({mode}): {errors}"
    assert errors["mean_abs"] <= mean_abs, f"{case_name} ({mode}): {errors}"


@pytest.mark.parametrize("case_name,pair", [(c, p) for c in ALL_CASE_NAMES for p in PAIRS])
def test_clamped_and_default_outputs_agree(runs, figures, case_name, pair):
    from tooling.paged_attention import error_figures

    differences = error_figures(output(runs, pair[0], case_name), output(runs, pair[1], case_name))
    figures.setdefault("clamped_vs_default", {}).setdefault(case_name, {})[pair[0]] = differences
    assert differences["max_abs"] <= MAX_ABS_TOLERANCE, f"{case_name}: {differences}"
