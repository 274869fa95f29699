"""bench/clamp_gpu's encoder report from tooling/encoder_sweep's sweeps, on made-up sweeps (no GPU):
the clamp's launch and vLLM's are found among the configurations timed, and the ratios are theirs."""
import pytest

from tooling import clamp_gpu


@pytest.fixture(scope="module")
def bench():
    return clamp_gpu


def sweep(low, rows, clamped):
    return {"gpu": "NVIDIA H200", "device_limit": 65_536, "cases": {"encoder-h256": {
        "default": None, "clamped": clamped, "configs": rows}}}


def row(block, warps, stages, shared, ms=None, default=False):
    r = {"block": block, "num_warps": warps, "num_stages": stages, "shared": shared}
    if ms is not None:
        r["ms"] = ms
    return dict(r, vllm_default=True) if default else r


def test_the_encoder_rows_compare_the_clamps_launch_with_vllms_and_the_fastest_that_fits(bench):
    rows = [row(64, 8, 1, 131_072, 2.0, default=True), row(64, 8, 1, 131_072), row(32, 8, 1, 65_536, 1.5),
            row(32, 4, 1, 65_536, 1.2), row(16, 4, 1, 32_768, 1.6)]
    clamped = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 8, "num_stages": 1, "shared": 65_536}
    native = {"gpu": "NVIDIA H200", "device_limit": 232_448, "cases": {"encoder-h256": {
        "default": None, "clamped": None, "configs": [row(128, 8, 1, 163_840, 0.1, default=True)]}}}
    (result,) = bench.encoder_rows({"sm75": sweep("sm75", rows, clamped), "native": native})
    assert result["default_fits"] is False and result["fastest_fitting"]["block"] == 32
    assert result["clamped_over_default"] == pytest.approx(0.75)
    assert result["clamped_over_fastest"] == pytest.approx(1.25)
    assert result["native_ms_default"] == 0.1
    text = bench.render_encoder([result], {"sm75": sweep("sm75", rows, clamped)})
    assert "| Turing sm_75 | encoder-h256 | 64/8/1 (131,072 B, does not fit) | 32/8/1 | 32/4/1 |" in text
    assert "1.25" in text and "x |" in text, "a configuration that does not fit is shown untimed"


def test_the_encoder_sweep_tries_stages_only_where_the_lowering_pipelines_and_only_vllms_launch_natively():
    from tooling import encoder_sweep

    turing, ampere, native = (encoder_sweep.config_list(low, 128) for low in ("sm75", "sm86", "native"))
    assert turing[0]["vllm_default"] and native == turing[:1]
    assert {c["num_stages"] for c in turing[1:]} == {1} and {c["num_stages"] for c in ampere[1:]} == {1, 2}
    assert len(turing) == 1 + len(encoder_sweep.BLOCKS) * len(encoder_sweep.WARPS)
    assert {c["block"] for c in encoder_sweep.config_list("sm75", 256)[1:]} == {16, 32, 64}


def test_the_encoder_ranking_keys_a_launch_by_vllms_own_block_and_options_and_scores_each_configuration():
    from tooling import clamp_ranking as ranking

    own = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 1, "shared": 32_768}
    rows = [row(64, 4, 1, 32_768, 4.0, default=True), row(64, 4, 1, 32_768, 4.0), row(32, 4, 1, 16_384, 0.5),
            row(32, 8, 1, 16_384, 1.0), row(128, 4, 1, 98_304)]
    sweeps = {"sm75": {"gpu": "NVIDIA H200", "vllm": "0.33.0", "override": "sm75", "cases": {
        "encoder-h72": {"default": own, "clamped": own, "configs": rows}}},
        "native": {"cases": {"encoder-h72": {"default": own, "configs": []}}}}
    document = ranking.rank_encoder(sweeps, source="test", measured_at="2026-12-02T00:00Z")
    (launch,) = document["launches"]
    assert {k: launch[k] for k in ranking.LAUNCH_KEYS} == {
        "cc": 75, "path": "encoder", "head_size_padded": 128, "dtype": "float16", "block_m": 64, "num_warps": 4,
        "num_stages": 1, "vllm_tile_size": 64, "windowed": False}, "head 72 pads to 128; native ranks nothing"
    assert [(r["tile_size"], r["num_warps"], r["score"]) for r in launch["ranked"]] == [(32, 4, 1.0), (32, 8, 2.0),
                                                                                      (64, 4, 8.0)]


def test_the_configurations_tried_line_up_under_one_header_when_cases_tried_different_ones(bench):
    small = [row(64, 4, 1, 16_384, 1.0, default=True), row(128, 4, 1, 32_768, 0.9), row(64, 4, 1, 16_384, 1.0)]
    large = [row(64, 8, 1, 73_728, 2.0, default=True), row(64, 4, 1, 73_728, 2.1)]
    sweeps = {"sm86": {"device_limit": 101_376, "cases": {"encoder-h64": {"configs": small},
                                                          "encoder-h256": {"configs": large}}}}
    lines = bench.tried_tables(sweeps, "Encoder configurations tried", lambda c: f"{c['block']}/{c['num_warps']}")
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| case | 128/4 | 64/4 |"
    assert table[2:] == ["| encoder-h64 | 32,768 / 0.900 | 16,384 / 1.000 |", "| encoder-h256 | - | 73,728 / 2.100 |"]


def test_a_block_whose_scaled_need_is_over_the_limit_is_skipped_at_its_warps_and_stages_only():
    from tooling import encoder_sweep

    configs = encoder_sweep.config_list("sm75", 512)
    chains = encoder_sweep.chains(configs)
    assert chains[0] == configs[:1], "vLLM's own launch is a chain of its own, always compiled"
    assert [[c["block"] for c in chain] for chain in chains[1:]] == [[16, 32, 64]] * len(encoder_sweep.WARPS)
    needs = {}
    for config, shared in ((configs[0], 131_072), ({"block": 16, "num_warps": 4, "num_stages": 1}, 65_536),
                           ({"block": 16, "num_warps": 8, "num_stages": 1}, 16_384)):
        encoder_sweep.note_need(config, shared, needs)
    assert needs == {(4, 1): (16, 65_536), (8, 1): (16, 16_384)}, "vLLM's own launch scales no chain"
    decided = {(c["block"], c["num_warps"]): encoder_sweep.over_limit(c, needs, 65_536) for c in configs[1:]}
    assert decided[(32, 4)] == "BLOCK 16 at these warps and stages needs 65,536 bytes, so BLOCK 32 at least 131,072"
    assert decided[(16, 4)] is None, "a BLOCK already compiled is not judged again"
    assert decided[(32, 8)] is None and decided[(64, 8)] is None, "16,384 scaled to 64 is exactly the limit"
    assert decided[(32, 2)] is None, "nothing compiled yet at 2 warps"
    assert encoder_sweep.over_limit(configs[0], needs, 65_536) is None


def test_a_skipped_configuration_is_marked_in_the_configurations_tried(bench):
    rows = [row(32, 8, 1, 131_072, 2.0, default=True), row(16, 4, 1, 65_536, 1.0), row(32, 4, 1, 131_072),
            {"block": 64, "num_warps": 4, "num_stages": 1, "skipped": "BLOCK 32 at these warps and stages ..."}]
    lines = bench.tried_tables({"sm75": sweep("sm75", rows, None)}, "Encoder configurations tried",
                               lambda c: f"{c['block']}/{c['num_warps']}")
    assert [line for line in lines if line.startswith("| encoder")] == [
        "| encoder-h256 | 65,536 / 1.000 | 131,072 / x | s |"]


def test_a_childs_progress_reaches_the_benchs_stderr_as_it_runs_and_its_failure_is_named(bench, capfd):
    # a device call cut off mid-compile must still show how far each child got: nothing is held back
    import os
    import sys

    from door.problem import Problem

    child = bench.start([sys.executable, "-c", "import sys; print('compiled 3 of 9', file=sys.stderr, flush=True); "
                         "print('not progress'); sys.exit(3)"], dict(os.environ), "encoder compile shard 0 (sm75)")
    with pytest.raises(Problem, match=r"^encoder compile shard 0 \(sm75\) exited 3 \(its error is above\)$"):
        bench.wait([child])
    captured = capfd.readouterr()
    assert "compiled 3 of 9" in captured.err and "not progress" not in captured.out + captured.err
