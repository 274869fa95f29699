"""The disk check, the cache check and docs/deploy.md say the same about a read-only or full cache:
a read-only Hub cache warns in both checks, a read-only vLLM or Triton cache or TMPDIR fails, and
too little free space fails the disk check (the cache check leaves space to it). Real filesystems:
small tmpfs mounts (the test machine runs as root)."""
import subprocess

import pytest

from contract.verdict import Status
from entrypoint import preflight
from entrypoint.checks import cache, disk
from entrypoint.settings import parse_settings
from tests import REPO

OURS = cache.Identity({}, "a" * 64)


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def mount(name: str, options: str):
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", str(point)], check=True)


def settings_env(tmp_path, **paths) -> dict:
    return {"MODEL": "/models/m", "HF_HUB_CACHE": str(tmp_path / "hub"), "TMPDIR": str(tmp_path),
            "TRITON_CACHE_DIR": str(tmp_path / "triton"), "VLLM_CACHE_ROOT": str(tmp_path / "vllm"),
            "XDG_CACHE_HOME": str(tmp_path / "xdg"), **{k: str(v) for k, v in paths.items()}}


def settings_for(tmp_path, **paths):
    return parse_settings(settings_env(tmp_path, **paths))


def both(settings):
    return (disk.check_disk(preflight.disk_targets(settings)),
            cache.check_cache(settings.vllm_cache_root, OURS, preflight.cache_writes(settings, preflight.NOT_JUDGED),
                              compiles=preflight.writes_vllm_cache(settings)))


def test_a_read_only_vllm_cache_fails_in_both_checks(tmp_path, tmpfs):
    # vLLM 0.33.0's compile makes its folder there (os.makedirs) and would die after the load
    read_only = tmpfs("ro", "size=16m,ro")
    disk_result, cache_result = both(settings_for(tmp_path, VLLM_CACHE_ROOT=read_only))
    assert disk_result.status is Status.FAIL and "vLLM cache" in disk_result.message, disk_result
    assert "read-only" in disk_result.message
    assert cache_result.status is Status.FAIL and "read-only" in cache_result.message, cache_result


def test_with_enforce_eager_on_one_gpu_a_read_only_vllm_cache_warns_in_both_checks(tmp_path, tmpfs):
    # measured on the CPU vehicle as uid 4242: eager, vLLM serves without writing VLLM_CACHE_ROOT
    read_only = tmpfs("ro", "size=16m,ro")
    settings = parse_settings({**settings_env(tmp_path, VLLM_CACHE_ROOT=read_only), "ENFORCE_EAGER": "1"})
    disk_result, cache_result = both(settings)
    assert disk_result.status is Status.WARN and "vLLM cache" in disk_result.message, disk_result
    assert cache_result.status is Status.WARN and "with ENFORCE_EAGER on one GPU" in cache_result.message, cache_result
    settings = parse_settings({**settings_env(tmp_path, VLLM_CACHE_ROOT=read_only), "ENFORCE_EAGER": "1",
                               "TENSOR_PARALLEL_SIZE": "2"})
    assert [result.status for result in both(settings)] == [Status.FAIL, Status.FAIL]


def test_a_read_only_hub_cache_warns_in_both_checks(tmp_path, tmpfs):
    read_only = tmpfs("ro", "size=16m,ro")
    disk_result, cache_result = both(settings_for(tmp_path, HF_HUB_CACHE=read_only / "hub"))
    assert disk_result.status is Status.WARN and "HF cache" in disk_result.message, disk_result
    assert cache_result.status is Status.WARN and "HF_HUB_CACHE" in cache_result.message, cache_result


def test_a_read_only_triton_cache_fails_in_both_checks(tmp_path, tmpfs):
    read_only = tmpfs("ro", "size=16m,ro")
    disk_result, cache_result = both(settings_for(tmp_path, TRITON_CACHE_DIR=read_only))
    assert disk_result.status is Status.FAIL and "Triton cache" in disk_result.message, disk_result
    assert cache_result.status is Status.FAIL and "TRITON_CACHE_DIR" in cache_result.message, cache_result


def test_a_read_only_filesystem_holding_a_kept_and_a_written_cache_fails(tmp_path, tmpfs):
    read_only = tmpfs("ro", "size=16m,ro")
    result = disk.check_disk([disk.Target("vLLM cache", str(read_only / "v"), 1, must_write=False),
                              disk.Target("TMPDIR", str(read_only / "t"), 1)])
    assert result.status is Status.FAIL and "TMPDIR" in result.message


def test_a_too_small_vllm_cache_fails_the_disk_check_only(tmp_path, tmpfs):
    small = tmpfs("small", "size=1m")
    disk_result, cache_result = both(settings_for(tmp_path, VLLM_CACHE_ROOT=small))
    assert disk_result.status is Status.FAIL and "vLLM cache" in disk_result.message, disk_result
    assert cache_result.status is Status.PASS and "free" not in cache_result.message


def test_deploy_doc_states_the_same_rules():
    text = " ".join((REPO / "docs" / "deploy.md").read_text().split())
    assert "A read-only Hub cache is a one-line warning in both the `disk` and the `cache` checks" in text
    assert "A read-only or unwritable `VLLM_CACHE_ROOT`, `TRITON_CACHE_DIR` or `TMPDIR` fails both" in text
    assert "less free space than the need fails the `disk` check" in text
    assert "With `ENFORCE_EAGER` on one GPU an unwritable `VLLM_CACHE_ROOT` warns in both instead" in text


def test_a_read_only_vllm_cache_fails_even_with_other_unwritable_caches_beside_it(tmp_path, tmpfs):
    # the units' layout: inductor's and XDG's caches under VLLM_CACHE_ROOT, all read-only together
    read_only = tmpfs("ro", "size=16m,ro")
    settings = settings_for(tmp_path, VLLM_CACHE_ROOT=read_only, XDG_CACHE_HOME=read_only / "xdg",
                            TORCHINDUCTOR_CACHE_DIR=read_only / "inductor")
    _, cache_result = both(settings)
    assert cache_result.status is Status.FAIL and "VLLM_CACHE_ROOT" in cache_result.message, cache_result
