"""Disk and memory checks: real filesystems (tmpfs mounts of known size) and /proc/meminfo-format
text with real cgroup files."""
import subprocess

import pytest

from contract.verdict import Status
from entrypoint.checks.disk import Target, check_disk
from entrypoint.checks.memory import check_memory, parse_meminfo

GIB = 2**30
MIB = 2**20


@pytest.fixture
def small_fs(tmp_path):
    """A real 64 MiB filesystem mounted inside tmp_path (the test machine runs as root)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_each_path_is_measured_on_its_own_filesystem(tmp_path, small_fs):
    # One `df /` would pass: the big filesystem has room, the small one holding TMPDIR has not.
    result = check_disk([Target("HF cache", str(tmp_path / "hub"), 10 * MIB),
                         Target("TMPDIR", str(small_fs / "tmp"), 100 * MIB)])
    assert result.status is Status.FAIL and "TMPDIR" in result.message and "HF cache" not in result.message


def test_needs_of_paths_on_one_filesystem_add_up(small_fs):
    targets = [Target("Triton cache", str(small_fs / "triton"), 40 * MIB),
               Target("vLLM cache", str(small_fs / "vllm"), 40 * MIB)]
    assert check_disk(targets[:1]).status is Status.WARN  # 64 MiB free, 40 MiB needed: tight
    result = check_disk(targets)
    assert result.status is Status.FAIL and "Triton cache" in result.message and "vLLM cache" in result.message


def test_the_fix_names_the_variables_that_move_the_paths_or_a_mount(small_fs):
    caches = [Target("Triton cache", str(small_fs / "triton"), 40 * MIB, setting="TRITON_CACHE_DIR"),
              Target("vLLM cache", str(small_fs / "vllm"), 40 * MIB, setting="VLLM_CACHE_ROOT")]
    assert check_disk(caches).fix == "free space there or point TRITON_CACHE_DIR or VLLM_CACHE_ROOT at a larger volume"
    assert check_disk(caches[1:]).fix == "free space there or point VLLM_CACHE_ROOT at a larger volume"   # a warning
    assert check_disk([Target("models folder", str(small_fs), 100 * MIB)]).fix == (
        "free space there or mount a larger volume there")


def test_disk_passes_with_room_and_counts_filesystems(tmp_path, small_fs):
    result = check_disk([Target("HF cache", str(tmp_path / "a" / "b"), MIB), Target("TMPDIR", str(small_fs), MIB)])
    assert result.status is Status.PASS and "2 filesystem(s)" in result.message


def test_read_only_filesystem_fails_a_path_the_server_must_write(small_fs):
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    result = check_disk([Target("TMPDIR", str(small_fs / "tmp"), MIB)])
    assert result.status is Status.FAIL and "read-only" in result.message


def meminfo(available_gib, swap_free_gib):
    return (f"MemTotal:       {int(available_gib * 1.1 * 2**20)} kB\nMemFree:         1024 kB\n"
            f"MemAvailable:   {int(available_gib * 2**20)} kB\nSwapTotal:      {int(swap_free_gib * 2**20)} kB\n"
            f"SwapFree:       {int(swap_free_gib * 2**20)} kB\n")


def test_meminfo_is_read_in_bytes():
    assert parse_meminfo(meminfo(2, 1))["SwapFree"] == GIB


def test_seed_host_without_swap_fails_for_a_bf16_e2b(tmp_path):
    # 7.8 GB host, no swap, 4.6 GB of bf16 weights: OOM-killed while staging.
    result = check_memory(int(4.6e9), meminfo(7.0, 0), str(tmp_path / "no-cgroup"))
    assert result.status is Status.FAIL and "far below" in result.message and "swap" in result.fix


def test_memory_is_tight_then_enough(tmp_path):
    assert check_memory(int(4.6e9), meminfo(7.0, 4.0), str(tmp_path)).status is Status.WARN
    assert check_memory(int(4.6e9), meminfo(7.0, 8.0), str(tmp_path)).status is Status.PASS


def test_cgroup_v2_limit_counts_below_host_memory(tmp_path):
    (tmp_path / "memory.max").write_text(f"{6 * GIB}\n")
    (tmp_path / "memory.current").write_text(f"{GIB}\n")
    (tmp_path / "memory.swap.max").write_text("0\n")
    result = check_memory(4 * GIB, meminfo(64, 16), str(tmp_path))
    assert result.status is Status.FAIL and "container's memory limit" in result.message
    (tmp_path / "memory.max").write_text("max\n")
    assert check_memory(4 * GIB, meminfo(64, 16), str(tmp_path)).status is Status.PASS


def test_cgroup_v1_limit(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{9 * GIB}\n")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("0\n")
    assert check_memory(4 * GIB, meminfo(64, 0), str(tmp_path)).status is Status.WARN
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert check_memory(4 * GIB, meminfo(64, 0), str(tmp_path)).status is Status.PASS


def test_memory_warns_when_the_weights_are_unknown(tmp_path):
    assert check_memory(None, meminfo(64, 0), str(tmp_path)).status is Status.WARN
