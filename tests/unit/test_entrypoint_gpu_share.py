"""The memory check on a shared card: the server's share (GPU_MEMORY_UTILIZATION x the card) against
what NVML reports free beside other processes. Two servers cannot share a real GPU here, so a
gcc-built StandIn NVML (tooling/standins/standin_driver.py) reports another process's use."""
from __future__ import annotations

import time

import pytest
from hypothesis import example, given, strategies as st

from contract.verdict import Status
from entrypoint import nvml
from entrypoint.checks.memory import GpuMemory, check_memory, judge_gpu_share
from entrypoint.nvml import NvmlView
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver
from tests.support.slack import SCHEDULING_SLACK_S
from tooling.serving_stack import free_port

GIB = 2**30
PLENTY = "MemTotal: 67108864 kB\nMemAvailable: 67108864 kB\nSwapFree: 0 kB\n"


@pytest.fixture(scope="module")
def neighbour_nvml(tmp_path_factory):
    """A 15 GiB card of which another process (pid 4242) holds 8 GiB."""
    return build_standin_driver(tmp_path_factory.mktemp("nvml"), gpu_total=15 * GIB, others_used=8 * GIB)


def test_nvml_reports_the_card_and_the_neighbour_without_waiting_for_a_timeout(neighbour_nvml):
    started = time.monotonic()
    cards = nvml.read(str(neighbour_nvml / "libnvidia-ml.so.1")).memory(1)
    assert time.monotonic() - started < SCHEDULING_SLACK_S
    assert cards == (GpuMemory(0, 15 * GIB, 7 * GIB, ((4242, 8 * GIB),)),)


def test_no_nvml_reads_no_card(tmp_path):
    assert nvml.read(str(tmp_path / "libnvidia-ml.so.1")).memory(1) == ()


def test_the_servers_cards_are_given_only_where_nvml_read_each_of_them():
    first, second = GpuMemory(0, 15 * GIB, 7 * GIB), GpuMemory(1, 15 * GIB, 15 * GIB)
    assert NvmlView(present=2, cards=(first, second)).memory(1) == (first,)
    assert NvmlView(present=2, cards=(first,)).memory(2) == ()  # the second card did not answer
    assert NvmlView(present=1, cards=(first,)).memory(4) == (first,)  # fewer cards than ranks: the parallel check's
    assert NvmlView(load_error="libnvidia-ml.so.1 does not load").memory(1) == ()


def test_a_share_that_no_longer_fits_is_refused_with_the_numbers_and_the_fix(neighbour_nvml):
    cards = nvml.read(str(neighbour_nvml / "libnvidia-ml.so.1")).memory(1)
    result = check_memory(GIB, PLENTY, "/nonexistent", gpus=cards, utilization=0.6)
    assert result.status is Status.FAIL
    assert "GPU_MEMORY_UTILIZATION 0.6" in result.message and "7.00 GiB is free" in result.message
    assert "pid 4242: 8.00 GiB" in result.message
    assert "at most 0.46" in result.fix and "--env-file" in result.fix


def test_a_share_that_fits_beside_the_neighbour_passes_and_says_so(neighbour_nvml):
    cards = nvml.read(str(neighbour_nvml / "libnvidia-ml.so.1")).memory(1)
    result = check_memory(GIB, PLENTY, "/nonexistent", gpus=cards, utilization=0.4)
    assert result.status is Status.PASS and "GPU 0 6.00 GiB of 7.00 GiB free" in result.message


def test_unset_means_vllms_default_share():
    result = judge_gpu_share((GpuMemory(0, 10 * GIB, 8 * GIB),), None)
    assert result.status is Status.FAIL and "unset" in result.message


def test_the_host_check_still_decides_first():
    result = check_memory(64 * GIB, PLENTY, "/nonexistent", gpus=(GpuMemory(0, 10 * GIB, 0),), utilization=0.5)
    assert result.status is Status.FAIL and "staging" in result.message


@given(total=st.integers(1, 2**40), used=st.integers(0, 2**40), fraction=st.floats(0.01, 1.0),
       sizes=st.lists(st.one_of(st.none(), st.integers(0, 2**40)), max_size=6))
@example(total=1, used=1, fraction=1.0, sizes=[])  # a full card: no fraction fits
def test_refused_exactly_when_the_share_exceeds_what_is_free(total, used, fraction, sizes):
    free = max(total - used, 0)
    card = GpuMemory(0, total, free, tuple((100 + i, size) for i, size in enumerate(sizes)))
    result = judge_gpu_share((card,), fraction)
    assert result.failed is (fraction * total > free)
    if result.failed:
        assert "GPU_MEMORY_UTILIZATION" in result.message and "GPU_MEMORY_UTILIZATION" in result.fix + result.message
        assert "\n" not in result.message + result.fix


def test_the_preflight_refuses_the_second_server_before_the_server_starts(tmp_path, neighbour_nvml):
    write_model_dir(tmp_path / "model")
    env = {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()), "GPU_MEMORY_UTILIZATION": "0.6",
           "SKIP_CHECKS": "devices,torch,clamp,fit,quantization,driver"}
    done = run_entrypoint(env, "check", library_path=neighbour_nvml)
    line = next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["memory"])
    assert done.returncode == 1 and line.startswith("FAIL"), done.stdout + done.stderr
    assert "pid 4242" in line and "at most 0.46" in line
    env["GPU_MEMORY_UTILIZATION"] = "0.4"
    fits = run_entrypoint(env, "check", library_path=neighbour_nvml)
    assert next(line for line in fits.stdout.splitlines() if line.split()[1:2] == ["memory"]).startswith("PASS")
