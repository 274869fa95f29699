"""The cache check (entrypoint/checks/cache.py): whether VLLM_CACHE_ROOT belongs to this image, a
one-line warning for anything else (another image, no stamp, an odd or unwritable root), never a
failure; `check` only reports, the serve path stamps."""
import json
import os
import sys
from pathlib import Path

import pytest

from contract.layout import CACHE_STAMP_NAME, START_LEDGER_NAME
from contract.verdict import Status
from entrypoint.checks import cache
from tests.support.entrypoint_cli import REPO, run_entrypoint
from tests.support.model_files import write_model_dir
from tests.support.standin_vllm import write_standin_vllm
from tooling.serving_stack import free_port

OURS = cache.Identity({"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"}, "a" * 64)
THEIRS = cache.Identity({"vllm": "0.32.0", "torch": "2.13.0", "triton": "3.7.0"}, "b" * 64)
DEVICE_CHECKS = "devices,driver,torch,clamp,fit"


def one_line(result):
    assert "\n" not in result.message + result.fix
    return result


def test_a_fresh_cache_passes_and_check_writes_nothing(tmp_path):
    for root in (tmp_path / "absent" / "vllm", tmp_path):
        result = one_line(cache.check_cache(str(root), OURS))
        assert result.status is Status.PASS and "empty" in result.message, result
    assert list(tmp_path.iterdir()) == []


def test_a_stamped_cache_belongs_to_the_image_that_stamped_it(tmp_path):
    cache.write_stamp(str(tmp_path), OURS)
    (tmp_path / "torch_compile_cache").mkdir()
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.PASS and "belongs to this image (vLLM 0.33.0, torch 2.14.0, Triton 3.8.0" \
        in result.message
    assert not cache.needs_stamp(cache.inspect(str(tmp_path)), OURS)


def test_a_cache_from_another_image_is_a_one_line_warning_naming_both(tmp_path):
    cache.write_stamp(str(tmp_path), THEIRS)
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.WARN
    assert "another image (vLLM 0.32.0, torch 2.13.0, Triton 3.7.0, image bbbbbbbbbbbb" in result.message
    assert "this one is vLLM 0.33.0" in result.message and "own cache volume" in result.fix
    assert cache.needs_stamp(cache.inspect(str(tmp_path)), OURS)


def test_a_cache_without_a_stamp_is_a_warning_and_an_empty_one_is_not(tmp_path):
    # empty folders, as an image carries where a build step made a cache folder, hold no cache
    (tmp_path / "inductor" / "fxgraph").mkdir(parents=True)
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.PASS and "empty" in result.message, result
    (tmp_path / "inductor" / "fxgraph" / "entry").write_bytes(b"graph")
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.WARN and "without a stamp" in result.message


@pytest.mark.parametrize("make", [lambda d: (d / "link").symlink_to("/nonexistent"), lambda d: os.mkfifo(d / "fifo"),
                                  lambda d: (d / CACHE_STAMP_NAME).write_text("{}")], ids=["symlink", "fifo", "nested-stamp"])
def test_anything_but_a_folder_counts_as_cache(tmp_path, make):
    (tmp_path / "a" / "b").mkdir(parents=True)
    make(tmp_path / "a" / "b")
    assert cache.holds_files(str(tmp_path))


def test_a_huge_tree_of_empty_folders_counts_as_filled_past_the_walk_limit(tmp_path):
    for index in range(30):
        (tmp_path / f"d{index}").mkdir()
    assert not cache.holds_files(str(tmp_path), limit=30)
    assert cache.holds_files(str(tmp_path), limit=29)


@pytest.mark.parametrize("content, why", [("{not json", "is not valid JSON"), ('{"image": 3}', "not a stamp of this format"),
                                          ("x" * (cache.STAMP_MAX_BYTES + 1), "more than the 64 KiB"),
                                          ("[]", "not a JSON object")])
def test_a_garbled_stamp_is_a_warning_and_is_rewritten_at_start(tmp_path, content, why):
    (tmp_path / CACHE_STAMP_NAME).write_text(content)
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.WARN and why in result.message
    assert cache.stamp_before_start(str(tmp_path), (), OURS) is None
    assert cache.check_cache(str(tmp_path), OURS).status is Status.PASS


def test_a_stamp_that_is_a_fifo_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / CACHE_STAMP_NAME)  # opening it for reading would wait for a writer forever
    result = one_line(cache.check_cache(str(tmp_path), OURS))
    assert result.status is Status.WARN and f"{CACHE_STAMP_NAME} is a named pipe (FIFO)" in result.message


@pytest.mark.parametrize("make, kind", [(lambda p: p.write_text("x"), "a regular file"),
                                        (os.mkfifo, "a named pipe (FIFO)")])
def test_a_cache_root_that_is_no_directory_is_a_warning_and_is_left_alone(tmp_path, make, kind):
    root = tmp_path / "vllm"
    make(root)
    result = one_line(cache.check_cache(str(root), OURS))
    assert result.status is Status.WARN and f"is {kind}, not a directory" in result.message
    assert cache.stamp_before_start(str(root), (), OURS) is None  # nothing to stamp, nothing raised
    assert cache.inspect(str(root)).kind == kind


def test_an_unwritable_root_fails_since_vllms_compile_would_die_making_its_folder_there():
    state = cache.CacheState("directory", False, "read-only filesystem")
    result = one_line(cache.judge("/cache/vllm", state, OURS))
    assert result.status is Status.FAIL and "not writable (read-only filesystem)" in result.message
    assert not cache.needs_stamp(state, OURS)
    # a real read-only volume: tests/serving/test_cache_checks.py (a :ro mount in the CPU vehicle)


def test_a_stamp_that_cannot_be_written_is_a_warning_line_not_an_error(tmp_path):
    (tmp_path / CACHE_STAMP_NAME).mkdir()  # a directory where the stamp goes: os.replace refuses
    problem = cache.stamp_before_start(str(tmp_path), (), OURS)
    assert problem and problem.startswith(f"cannot stamp VLLM_CACHE_ROOT {tmp_path} for this image:")
    assert [p.name for p in tmp_path.iterdir()] == [CACHE_STAMP_NAME]  # no temporary file left behind


def test_skip_checks_cache_leaves_the_cache_untouched(tmp_path):
    assert cache.stamp_before_start(str(tmp_path), ("cache",), OURS) is None
    assert list(tmp_path.iterdir()) == []


def test_the_identity_is_the_build_reports_and_changes_with_them(tmp_path):
    versions = tmp_path / "versions.json"
    versions.write_text(json.dumps({"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"}))
    table = tmp_path / "fit-table.json"
    table.write_text("{}")
    files = (str(versions), str(table), str(tmp_path / "absent.json"))
    first = cache.image_identity(files, str(versions), fallback=lambda: pytest.fail("versions.json is there"))
    assert first.versions == {"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"}
    assert cache.image_identity(files, str(versions)) == first
    table.write_text('{"verdicts": {}}')
    assert cache.image_identity(files, str(versions)).digest != first.digest
    # no versions.json (the CPU vehicle): the installed packages' metadata, without importing them
    bare = cache.image_identity((), str(tmp_path / "none.json"), fallback=lambda: {"vllm": "0.32.0"})
    assert bare.versions == {"vllm": "0.32.0"} and bare.digest != first.digest


def test_check_mode_reports_and_serve_mode_stamps_before_exec(tmp_path):
    write_model_dir(tmp_path / "model")
    root = tmp_path / "vllm-cache"
    env = {"MODEL": str(tmp_path / "model"), "SKIP_CHECKS": DEVICE_CHECKS, "VLLM_CACHE_ROOT": str(root),
           "HF_HOME": str(tmp_path / "hf"), "PORT": str(free_port())}
    done = run_entrypoint(env, "check", "--json")
    report = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert report["cache"]["status"] == "pass" and "empty" in report["cache"]["message"]
    assert not root.exists()
    standin = write_standin_vllm(tmp_path / "standin", "import os; print('served', sorted(os.listdir(os.environ['VLLM_CACHE_ROOT'])))")
    done = run_entrypoint({**env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                           "PYTHONPATH": f"{standin}:{REPO}"})
    assert done.returncode == 0, done.stdout + done.stderr
    # stamped, and the start recorded in the ledger, before the server started
    assert f"served {sorted([CACHE_STAMP_NAME, START_LEDGER_NAME])}" in done.stdout
    done = run_entrypoint(env, "check", "--json")
    report = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert report["cache"]["status"] == "pass" and "belongs to this image" in report["cache"]["message"]
