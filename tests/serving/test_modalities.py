"""Every input the served model takes, asked of a real server: the tiny Gemma 4 with its vision and audio
towers (tiny_gemma4.py --multimodal: Gemma4ForConditionalGeneration, as E2B and E4B ship), served by the
vehicle through the shipped compose.yaml, and `build.py smoke` run as a user runs it, with MODEL_DIR as
compose had it. Smoke reads the served model's config.json, finds both towers, and asks text, image (a
solid colour and a full-range checkerboard) and audio. Each request reaches the engine and comes back
whole: HTTP 200, every log-probability finite, the answer not token 0 repeated (what an fp16 overflow
gives), and the engine is still up after the audio tower ran. The weights are random, so the answers
are not judged; the contract is (docs/serving-tier.md, "Image and audio on the vehicle").
"""
import json
import os

import pytest

from tests.serving.conftest import FIGURES
from tooling import serving_stack

HEALTHY_WITHIN_S = 900  # a bound for a hang: the multimodal model came up in 61 s on an idle host, 84-90 s on a loaded one
PROBES = ("text", "image", "image-contrast", "audio")


@pytest.fixture(scope="module")
def served(vehicle, tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("multimodal-models")
    serving_stack.make_tiny_model(vehicle, models_dir, multimodal=True)
    settings = {**serving_stack.CPU_SETTINGS, "MODEL": f"/models/{serving_stack.MULTIMODAL_MODEL_NAME}"}
    stack = serving_stack.Stack(project=f"vllm-turing-modalities-{os.getpid()}", image=vehicle, models_dir=models_dir,
                                workdir=tmp_path_factory.mktemp("modalities"), settings=settings)
    try:
        FIGURES["multimodal_healthy_s"] = round(stack.up(HEALTHY_WITHIN_S), 1)
    except RuntimeError as error:
        stack.down()
        pytest.fail(f"the multimodal tiny Gemma 4 did not come up: {error}", pytrace=False)
    yield stack
    stack.down()


def test_smoke_asks_image_and_audio_of_a_model_with_both_towers_and_each_answer_holds(served, monkeypatch, reports_dir):
    monkeypatch.setenv("MODEL_DIR", str(served.models_dir))
    proc, report, wall = serving_stack.smoke(served.url, "--contract-only")
    assert report is not None, f"smoke printed no JSON report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    (reports_dir / "smoke-multimodal.json").write_text(json.dumps(report, indent=2) + "\n")
    FIGURES["multimodal_smoke_s"] = round(wall, 1)
    assert "Traceback" not in proc.stderr
    config = served.models_dir / serving_stack.MULTIMODAL_MODEL_NAME / "config.json"
    assert report["inputs"]["source"].startswith(str(config)), report["inputs"]
    assert sorted(report["inputs"]["modalities"]) == ["audio", "image", "text"], report["inputs"]
    rows = {row["name"]: row for row in report["checks"]}
    for name in PROBES:
        assert rows[name]["http_status"] == 200 and rows[name]["status"] in ("pass", "not judged"), rows[name]
    failed = {name: row.get("message") for name, row in rows.items() if row["status"] == "fail"}
    assert not failed and proc.returncode == 0, failed
    health = served.compose("ps", "--format", "{{.State}}", serving_stack.SERVICE).stdout.strip()
    assert health == "running", f"the engine did not outlive the probes ({health}): {served.logs()[-3000:]}"
