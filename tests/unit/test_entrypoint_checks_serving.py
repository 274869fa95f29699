"""What the server will ask of the container and the model: Gemma 4's parsers only on a Gemma 4
model, and /dev/shm (real tmpfs mounts of known size) against vLLM 0.33.0's message queues."""
import subprocess

import pytest

from contract.verdict import Status
from entrypoint.checks.model import MODEL, resolve
from entrypoint.checks.parsers import judge_parsers
from entrypoint.checks.shm import MIB, Parallel, check_shm, mq_chunk_mb, shm_need
from entrypoint.settings import parse_settings

from tests.support.model_files import write_model_dir
from tests import REPO

GEMMA4 = {"TOOL_CALL_PARSER": "gemma4", "REASONING_PARSER": "gemma4"}
QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
ENV_FILE = REPO / "quadlet/vllm-turing.env"


def resolved(tmp_path, config=None):
    write_model_dir(tmp_path / "m", config=config)
    return resolve(MODEL, "MODEL", str(tmp_path / "m"), str(tmp_path / "hub"), True)


def shipped_parsers():
    lines = ENV_FILE.read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    settings = parse_settings(env)
    return {"TOOL_CALL_PARSER": settings.tool_call_parser, "REASONING_PARSER": settings.reasoning_parser}


def test_the_shipped_env_file_sets_gemma_4s_parsers_for_its_gemma_4_model(tmp_path):
    assert shipped_parsers() == GEMMA4
    assert judge_parsers(shipped_parsers(), resolved(tmp_path)).status is Status.PASS


def test_gemma_4s_parsers_on_another_model_warn_naming_the_setting(tmp_path):
    result = judge_parsers(GEMMA4, resolved(tmp_path, QWEN2))
    assert result.status is Status.WARN
    assert "TOOL_CALL_PARSER=gemma4 and REASONING_PARSER=gemma4" in result.message and "qwen2" in result.message
    assert "TOOL_CALL_PARSER and REASONING_PARSER" in result.fix and "leave them empty" in result.fix


def test_a_gemma_4_model_without_its_tool_parser_warns_of_the_400(tmp_path):
    result = judge_parsers({"TOOL_CALL_PARSER": None, "REASONING_PARSER": "gemma4"},
                           resolved(tmp_path, {"model_type": "gemma4", "text_config": {"model_type": "gemma4_text"}}))
    assert result.status is Status.WARN and "TOOL_CALL_PARSER is not set" in result.message
    assert result.fix == "set TOOL_CALL_PARSER=gemma4, REASONING_PARSER=gemma4"


def test_another_model_with_its_own_parsers_or_none_passes_and_an_unread_model_is_not_judged(tmp_path):
    model = resolved(tmp_path, QWEN2)
    assert judge_parsers({"TOOL_CALL_PARSER": "hermes", "REASONING_PARSER": None}, model).status is Status.PASS
    assert judge_parsers({"TOOL_CALL_PARSER": None, "REASONING_PARSER": None}, model).status is Status.PASS
    absent = resolve(MODEL, "MODEL", str(tmp_path / "absent"), str(tmp_path / "hub"), True)
    assert judge_parsers(GEMMA4, absent).status is Status.SKIP


def test_one_cuda_worker_runs_in_process_and_needs_no_queue_a_cpu_build_or_mp_does():
    assert Parallel().executor(cuda=True) == "uni" and shm_need(Parallel(), "uni") == 0
    assert Parallel().executor(cuda=False) == "mp" and Parallel(backend="mp").executor(cuda=True) == "mp"
    # the broadcast queue alone is the 160 MiB that vLLM 0.32's CPU server asked for; each worker's
    # answer queue adds 240 MiB
    assert shm_need(Parallel(), "mp") == (16 * MIB + 2) * 10 + (24 * MIB + 2) * 10
    assert shm_need(Parallel(), "mp", mq_chunk_mb=4) == (4 * MIB + 2) * 10 + (24 * MIB + 2) * 10


def test_the_need_grows_with_the_workers():
    needs = [shm_need(Parallel(tensor=n), Parallel(tensor=n).executor(cuda=True)) for n in (1, 2, 4, 8)]
    assert needs[0] == 0 and needs[1] < needs[2] < needs[3]
    two = (16 * MIB + 3) * 10 + 2 * (24 * MIB + 2) * 10 + (4 * MIB + 2) * 6
    assert needs[1] == two


def test_mq_chunk_size_follows_vllms_variable():
    assert mq_chunk_mb({}) == 16 and mq_chunk_mb({"VLLM_MQ_MAX_CHUNK_BYTES_MB": "8"}) == 8


@pytest.fixture
def shm_of(tmp_path):
    """A real tmpfs of the given size, like the /dev/shm of `docker run --shm-size`."""
    mounted = []

    def mount(size: str):
        path = tmp_path / f"shm-{len(mounted)}"
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
        mounted.append(path)
        return str(path)
    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=True)


def test_dockers_default_64m_fails_a_multiprocess_server_with_the_shm_size_fix(shm_of):
    result = check_shm(Parallel(), "mp", shm_path=shm_of("64m"))
    assert result.status is Status.FAIL
    assert "64 MiB free" in result.message and "need 401 MiB" in result.message
    assert "--shm-size 1g" in result.fix and "--ipc=host" in result.fix and "shm_size: 1g" in result.fix


def test_enough_shm_passes_and_the_suggested_size_follows_the_need(shm_of):
    assert check_shm(Parallel(), "mp", shm_path=shm_of("1g")).status is Status.PASS
    eight = check_shm(Parallel(tensor=8), "mp", shm_path=shm_of("1g"))
    assert eight.status is Status.FAIL and "--shm-size 3g" in eight.fix


def test_one_cuda_worker_passes_on_dockers_default(shm_of):
    result = check_shm(Parallel(), "uni", shm_path=shm_of("64m"))
    assert result.status is Status.PASS and "needs 0 MiB" in result.message
