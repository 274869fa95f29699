"""The entrypoint judges the argv with the image facts' option table as vLLM's own parser parses it:
for words of every spelling (abbreviations, underscores, `=`, short flags, dotted JSON keys, -O),
the dests the judge finds are the dests vLLM's parser sets, and both refuse the same words. The
table in the image equals the one its installed vLLM's parser has."""
import json
from pathlib import Path

import pytest

from tests.image.containers import run_to_end

SCRIPT = Path(__file__).with_name("argv_agreement.py")
SAMPLES = [
    ["--dtype", "half"], ["--dt", "half"], ["--dtype=half"], ["-tp", "2"], ["-tp=2"], ["--tensor_parallel_size=2"],
    ["--tensor-parallel-size", "4"], ["-pp", "2"], ["--max-model", "99"], ["--max_model_len=99"],
    ["--port", "9000"], ["--host", "127.0.0.1"], ["--served_model_name", "x"], ["--api_key=k"], ["--api-key", "k"],
    ["--enforce-eager"], ["--enable-prefix-caching"], ["--no-enable-prefix-caching"], ["--seed", "7"],
    ["-q", "awq"], ["--quant", "awq"], ["--attention-backend", "FLASHINFER"], ["--attention_backend=FLASHINFER"],
    ["--attention-config.backend", "FLASHINFER"], ["--attention-config", '{"backend": "FLASHINFER"}'],
    ["-O3"], ["-O", "2"], ["--compilation-config.cudagraph_capture_sizes+", "1,2"],
    ["--structured-outputs-config.reasoning_parser", "deepseek_r1"], ["--reasoning-parser", "deepseek_r1"],
    ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"], ["--speculative-config.model", "/d"],
    ["--max-lora-rank", "8"], ["--distributed-executor-backend", "mp"], ["--uds", "/tmp/s"], ["--hf-token", "x"],
    ["/other/model"], ["--no-such-option", "1"], ["--max-lo", "1"], ["--seed"], ["--dtype"],
]


@pytest.fixture(scope="module")
def agreement(docker_client, image, tmp_path_factory):
    folder = tmp_path_factory.mktemp("argv")
    (folder / "agreement.py").write_text(SCRIPT.read_text())
    code, out, err = run_to_end(docker_client, image, ["/probe/agreement.py", json.dumps(SAMPLES)],
                                entrypoint="python3", environment={"CUDA_VISIBLE_DEVICES": ""},
                                volumes={str(folder): {"bind": "/probe", "mode": "ro"}}, timeout=900)
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_the_image_facts_table_is_the_installed_vllms_parser(agreement):
    assert agreement["table_equals_parser"]


@pytest.mark.parametrize("words", SAMPLES, ids=[" ".join(words) for words in SAMPLES])
def test_the_judge_finds_the_dests_vllms_parser_sets(agreement, words):
    result = agreement["results"][" ".join(words)]
    assert result["judge"] == result["vllm"], result
