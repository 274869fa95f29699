"""--quantization against the checkpoint's quantization_config: what entrypoint/checks/quant_method.py
decides is what vLLM 0.33.0's own ModelConfig._verify_quantization decides, in the image, for
generated flags and config.json files (tests/support/quantization_cases.py) and the issue's cases:
the same method after vLLM's overrides, and a refusal exactly where vLLM refuses (a mismatch, an
unknown method, an unknown ModelOpt algorithm). The checkout's code is mounted into the image."""
import json

import pytest
from hypothesis import given, strategies as st

from tests.image.containers import run_to_end
from tests.support.quantization_cases import capabilities, config_jsons, flags
from tests import REPO

NAMED = [
    {"flag": "fp8", "config": {"model_type": "llama", "quantization_config": {"quant_method": "gptq", "bits": 4}}},
    {"flag": "gptq_marlin", "config": {"model_type": "llama", "quantization_config": {"quant_method": "gptq"}}},
    {"flag": "fp8", "config": {"model_type": "llama", "quantization_config": {
        "producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}}},
    {"flag": None, "config": {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
                              "quantization_config": {"quant_method": "mxfp4"}}},
    {"flag": None, "config": {"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"],
                              "quantization_config": {"quant_method": "compressed-tensors",
                                                      "format": "mxfp4-pack-quantized"}}},
]


def generated() -> list[dict]:
    """The cases Hypothesis draws under the suite's profile (derandomized, fixed budget), judged in
    one container run, and the named ones."""
    drawn: list[dict] = []

    @given(flags, config_jsons(), capabilities)
    def draw(flag, config, cc):
        drawn.append({"flag": flag, "config": config, "cc": list(cc)})
    draw()
    return drawn + [{**case, "cc": [7, 5]} for case in NAMED]


@pytest.fixture(scope="module")
def outcomes(docker_client, image) -> list[dict]:
    code, out, err = run_to_end(
        docker_client, image, ["/probe/tests/image/quantization_agreement.py", "judge", json.dumps(generated())],
        entrypoint="python3", environment={"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/probe"},
        network_mode="none", timeout=600,
        volumes={str(REPO / name): {"bind": f"/probe/{name}", "mode": "ro"}
                 for name in ("imagefacts", "entrypoint", "contract", "door", "tests/image/quantization_agreement.py")})
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_the_method_is_the_one_vllm_decides(outcomes):
    disagreements = [outcome for outcome in outcomes if outcome["ours"] != outcome["vllm"]]
    assert not disagreements, disagreements[:5]


def test_the_cases_reach_both_verdicts_and_the_overrides(outcomes):
    verdicts = {outcome["vllm"] for outcome in outcomes}
    assert "refused" in verdicts and {"auto_gptq", "modelopt", "gpt_oss_mxfp4", "mxfp4"} <= verdicts, verdicts
