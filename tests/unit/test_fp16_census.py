"""The fp16 census's builders and magnitude shaping at tiny shapes, on CPU with real torch and transformers
(tooling/fp16_census.py; the census itself runs on the GPU: `bench/fp16_census run`). Each check would
fail if a builder lost its shaping: the peaks are measured by the census's own hooks, in fp32 and fp16."""
import json
import tarfile

import pytest
import torch

from tooling import fp16_census as census
from tooling.vllm_releases import PINNED, package_tarball

UNIFIED = f"{census.VLLM_MODELS}/gemma4_unified.py"


@pytest.fixture(scope="module")
def vllm_site(tmp_path_factory):
    """The pinned release's gemma4_unified.py alone, where the census lifts vLLM's class from."""
    site = tmp_path_factory.mktemp("vllm-site")
    with tarfile.open(package_tarball(PINNED)) as tar:
        tar.extractall(site, members=[tar.getmember(UNIFIED)], filter="data")
    return site


def test_the_vision_tower_is_shaped_to_the_published_pooler_input_and_std_bias():
    case = census.large_vision("31B", "cpu", tiny=True)
    modules, run = case.build(torch.float32)
    tower = modules["vision_tower"]
    output, peaks = census.watched(modules, run)
    last = f"vision_tower.encoder.layers.{len(tower.encoder.layers) - 1}"
    assert peaks.peak[last] == pytest.approx(census.POOLER_INPUT_PEAK, rel=1e-3)
    assert peaks.peak["vision_tower.pooler"] > census.POOLER_INPUT_PEAK  # times sqrt(hidden), in fp32
    assert 0 < float(tower.std_bias.abs().max()) <= census.STD_BIAS_PEAK
    assert float(tower.std_scale.max()) <= 1.0
    assert output.shape == (12, 96) and bool(torch.isfinite(output).all())


def test_a_census_row_in_fp16_keeps_the_pooler_in_fp32_and_the_output_finite():
    row = census.measure(census.large_vision("26B-A4B", "cpu", tiny=True), "cpu")
    assert row.output_finite and row.max_rel_error < 0.05
    assert row.need == pytest.approx(census.POOLER_INPUT_PEAK, rel=1e-3)  # the pooler's fp32 output is not counted
    assert row.need_at.startswith("vision_tower.encoder.layers.")


@pytest.mark.parametrize("real_vllm", [True, False], ids=["vllm-class", "transformers-class"])
def test_the_unified_embedder_overflows_past_the_range_and_not_below_it(vllm_site, real_vllm):
    below = census.measure(census.unified_vision(census.TARGET_IN_RANGE, vllm_site, "not imported here", "cpu",
                                                 real_vllm, tiny=True), "cpu")
    past = census.measure(census.unified_vision(census.TARGET_PAST_RANGE, vllm_site, "not imported here", "cpu",
                                                real_vllm, tiny=True), "cpu")
    assert below.need == pytest.approx(census.TARGET_IN_RANGE, rel=1e-3)
    assert below.need_at == past.need_at == "vision_embedder.patch_dense"
    assert below.output_finite and not below.fp16_first_nonfinite
    assert past.need == pytest.approx(census.TARGET_PAST_RANGE, rel=1e-3)
    assert not past.output_finite and past.fp16_first_nonfinite == "vision_embedder.patch_dense"
    assert ("lifted from gemma4_unified.py" in past.source) == real_vllm


def test_the_lifted_class_is_vllms_own_code(vllm_site):
    cls, how = census.unified_embedder_class(vllm_site, "ModuleNotFoundError: No module named 'zmq'")
    assert cls.__name__ == "Gemma4UnifiedVisionEmbedder" and "zmq" in how
    embedder = cls(census.probe_config())
    assert embedder.patch_dense.weight.shape == (8, 3 * 3 * 3)  # model patch 3 x 3 (pooling 3), 3 channels
    out = embedder(torch.rand(5, 27), torch.tensor([[0, 0], [1, 0], [2, 0], [0, 1], [-1, -1]]))
    assert out.shape == (5, 8)


def test_the_stressed_audio_tower_reaches_its_stated_peak():
    case = census.audio_tower("E2B", True, "cpu", tiny=True)
    modules, run = case.build(torch.float32)
    _, peaks = census.watched(modules, run)
    last = len(modules["audio_tower"].layers) - 1
    assert peaks.peak[f"audio_tower.layers.{last}.norm_out"] == pytest.approx(census.POOLER_INPUT_PEAK, rel=1e-3)


def test_the_checkerboard_is_full_range_and_its_patches_keep_positions():
    image = census.checkerboard_image(32, 64)
    assert set(image.unique().tolist()) == {0.0, 1.0}
    values, positions = census.patches(image, 16)  # the towers' patch
    assert values.shape == (8, 16 * 16 * 3) and positions.tolist()[:5] == [[0, 0], [1, 0], [2, 0], [3, 0], [0, 1]]
    assert float(values.std(dim=1).min()) > 0.49  # every patch half black, half white


def test_the_table_and_a_finding_past_the_range_are_printed():
    row = census.Row("r", "12B", "s", "x", 98_256.0, "vision_embedder.patch_dense", 34_400.0,
                     "vision_embedder.patch_dense", "vision_embedder.patch_dense", "", False, None, None, 0.1)
    text = census.table([row])
    assert "| r | 98,256 (vision_embedder.patch_dense) | 1.50 |" in text and "NOT FINITE" in text
    assert row.verdict() == "NOT FINITE"
    json.dumps([census.dataclasses.asdict(row)])


def test_a_missing_or_mismatched_stage_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(census, "REPO", tmp_path)
    with pytest.raises(SystemExit, match="is missing; run `bench/fp16_census prepare`"):
        census.device_environment()
    stage = tmp_path / census.STAGE
    stage.mkdir(parents=True)
    (stage / "versions.json").write_text(json.dumps({"python": "2.7", "transformers": "5.20.2"}))
    with pytest.raises(SystemExit, match=r"holds wheels for Python 2.7, this is 3\.\d+; run `bench/fp16_census "
                                         r"prepare --python-version 3\.\d+`") as stop:
        census.device_environment()
    assert "\n" not in str(stop.value)


def test_the_transformers_pin_is_the_locks():
    assert census.transformers_version() == "5.20.2"
