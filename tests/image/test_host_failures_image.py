"""The host-failure checks against the image's real parts: vLLM's own quantization minimums, the
image's real torch CUDA version for the driver floor (StandIn 535 driver libraries mounted where the
units mount the host's), vLLM's audio extra as the image's metadata lists it."""
import json

import pytest

from tests.image.containers import run_to_end
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver, proc_driver_version_text

NVIDIA_LIBS = "/usr/local/nvidia/lib64"


def python_json(docker_client, image, script, **kwargs):
    code, out, err = run_to_end(docker_client, image, ["-c", script], entrypoint="python3", **kwargs)
    assert code == 0, err[-2000:]
    return json.loads(out.splitlines()[-1])


def test_quantization_minimums_come_from_the_installed_vllm(docker_client, image):
    script = ("import json; from entrypoint.checks.turing_settings import vllm_min_capability as m; "
              "print(json.dumps({q: m(q) for q in ('fp8', 'awq', 'gptq', 'modelopt', 'mxfp4', 'nope')}))")
    found = python_json(docker_client, image, script, environment={"CUDA_VISIBLE_DEVICES": ""})
    # vLLM 0.33.0's get_min_capability(): fp8 75 (Marlin on Turing), AWQ 75, GPTQ 60, ModelOpt FP8 80, MXFP4 80
    assert found == {"fp8": 75, "awq": 75, "gptq": 60, "modelopt": 80, "mxfp4": 80, "nope": None}


@pytest.fixture(scope="module")
def standin_535(tmp_path_factory):
    root = tmp_path_factory.mktemp("standin-535")
    build_standin_driver(root / "lib", driver_version="535.104.05", name="Tesla T4")
    (root / "version").write_text(proc_driver_version_text("535.104.05"))
    return root


def test_a_535_driver_under_the_images_cuda_13_torch_fails_the_floor(docker_client, image, standin_535):
    script = ("import json; from entrypoint.checks.driver import check_driver; "
              "print(json.dumps(check_driver(proc_version='/standin/version', gpu_name='Tesla T4').to_dict()))")
    result = python_json(docker_client, image, script,
                         volumes={str(standin_535 / "lib"): {"bind": NVIDIA_LIBS, "mode": "ro"},
                                  str(standin_535): {"bind": "/standin", "mode": "ro"}})
    assert result["status"] == "fail" and "535.104.05 is below 580" in result["message"], result
    # the PyPI base has no /usr/local/cuda/compat; the official base has and would warn instead
    assert "PyPI base" in result["message"] or "upgrade the host driver" in result["fix"]


AUDIO_REQUESTED = {"VLLM_EXTRA_ARGS": """--limit-mm-per-prompt '{"audio": 1}'"""}


def audio_verdict(docker_client, image, tmp_path, environment=None) -> dict:
    """The preflight's audio check for a model with an audio tower, in `image`."""
    write_model_dir(tmp_path / "model", {"model_type": "gemma4", "audio_config": {"hidden_size": 8}})
    code, out, err = run_to_end(docker_client, image, ["check", "--json"],
                                environment={"MODEL": "/models/a", **(environment or {})},
                                volumes={str(tmp_path / "model"): {"bind": "/models/a", "mode": "ro"}})
    return {c["name"]: c for c in json.loads(out)["checks"]}["audio"]


def test_audio_requested_of_an_image_that_cannot_decode_audio_fails(docker_client, image, tmp_path):
    audio = audio_verdict(docker_client, image, tmp_path, AUDIO_REQUESTED)
    decodes = python_json(docker_client, image, "import json; from entrypoint.checks import audio as a; "
                          "print(json.dumps(a.available_decoders(a.module_installed, a.ffmpeg_present)))")
    assert audio["status"] == ("pass" if decodes else "fail"), audio
    if not decodes:
        assert "--extras audio" in audio["fix"] and '"audio": 0' in audio["fix"]
