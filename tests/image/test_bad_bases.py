"""A bad base or a misfit fails the build with the one line that says why, and the tag keeps
its image."""
import subprocess

import pytest

from tests import REPO
from tests.image.conftest import build_command

KEEP_TAG = "vllm-turing-test-keep:latest"

FIND_VLLM = "python3 -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec(\"vllm\").origin))'"
REMOVE_VLLM = FIND_VLLM + ' | { read d; rm -rf "$d" "$d"-*.dist-info "$(dirname "$d")"/vllm-*.dist-info; }'
DRIFT_ATTENTION = (FIND_VLLM + ' | { read d; sed -i "s/TILE_SIZE_PREFILL/TILE_PREFILL_RENAMED/g; '
                   's/TILE_SIZE_DECODE/TILE_DECODE_RENAMED/g" "$d/v1/attention/ops/triton_unified_attention.py"; }')


def derived_base(client, base: str, shell: str, tag: str) -> str:
    container = client.containers.run(base, entrypoint=["sh", "-c", shell], command=[], detach=True)
    try:
        assert container.wait()["StatusCode"] == 0, container.logs().decode()[-500:]
        repository, version = tag.split(":")
        container.commit(repository=repository, tag=version)
    finally:
        container.remove(force=True)
    return tag


@pytest.fixture
def kept_tag(docker_client, image):
    """KEEP_TAG points at the good image before the failing build."""
    good = docker_client.images.get(image)
    good.tag(*KEEP_TAG.split(":"))
    yield good.id
    docker_client.images.remove(KEEP_TAG, noprune=True)


def failing_build(base_ref: str) -> subprocess.CompletedProcess:
    return subprocess.run(build_command(KEEP_TAG, base=base_ref), cwd=REPO, capture_output=True, text=True)


@pytest.mark.parametrize("name, shell, expected", [
    ("no-vllm", REMOVE_VLLM, "vllm"),
    ("drifted", DRIFT_ATTENTION, "triton_unified_attention.py"),
])
def test_bad_base_fails_with_the_patch_message_and_keeps_the_tag(docker_client, image_base, kept_tag, name, shell,
                                                                expected):
    bad = derived_base(docker_client, image_base, shell, f"vllm-turing-test-badbase:{name}")
    try:
        run = failing_build(bad)
    finally:
        docker_client.images.remove(bad, noprune=False)
    message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
    assert run.returncode != 0, f"build.py accepted the {name} base"
    assert "build failed" in message and expected in message.lower(), \
        f"the {name} base failed without the patch's message; last line: {message!r}"
    assert "Traceback" not in run.stderr, f"build.py printed a traceback for the {name} base"
    assert docker_client.images.get(KEEP_TAG).id == kept_tag, f"the failed {name} build moved {KEEP_TAG}"


def test_a_base_that_is_neither_here_nor_pullable_offers_the_pypi_base(docker_client, kept_tag):
    run = failing_build("vllm-turing-test-absent/base:0")
    assert run.returncode == 1, f"exit {run.returncode}: {run.stderr[-300:]}"
    assert "cannot pull vllm-turing-test-absent/base:0" in run.stderr and \
        run.stderr.rstrip().endswith("python3 build.py --base pypi"), \
        f"the refusal does not offer the one command: {run.stderr.strip()[-300:]}"
    assert len(run.stderr.strip().splitlines()) == 1, f"the refusal is not one line: {run.stderr.strip()[-300:]}"
    assert docker_client.images.get(KEEP_TAG).id == kept_tag, "the refused build moved the tag"


def sabotaged_build(tree_copy, image_base, old: str, new: str) -> tuple[int, str]:
    """build.py of a tree whose clamp runtime has `old` replaced by `new`: (exit code, last stderr line)."""
    runtime = tree_copy / "patches" / "turing_clamp" / "runtime.py"
    sabotaged = runtime.read_text().replace(old, new)
    assert sabotaged != runtime.read_text(), "the clamp's return statement moved: update this test"
    runtime.write_text(sabotaged)
    run = subprocess.run(build_command(KEEP_TAG, base=image_base, tree=tree_copy), cwd=tree_copy,
                         capture_output=True, text=True)
    return run.returncode, run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""


def assert_failed_naming(client, kept: str, code: int, message: str, what: str, *needles: str) -> None:
    """The build exited 1 with a last line naming the misfit (`needles`), and the tag kept its image."""
    assert code == 1, f"build.py accepted {what}: {message!r}"
    assert "does not fit" in message and all(needle in message for needle in needles), \
        f"{what} failed the build without naming the launch; last line: {message!r}"
    assert client.images.get(KEEP_TAG).id == kept, "the failed build moved the tag"


def test_a_clamp_that_picks_too_large_a_tile_fails_the_build_naming_the_launch(docker_client, image_base,
                                                                                 kept_tag, tree_copy):
    # A clamp that keeps vLLM's own head-512 prefill tile (32, 98,304 bytes on sm_75) and has lost
    # its OutOfResources guard: the build's proof is what must catch it. Every launch it makes is
    # one the good build compiled (its unpatched comparison included), so nothing compiles anew.
    code, message = sabotaged_build(
        tree_copy, image_base,
        "    if decision[3]:\n        _vllm_turing_guard(globals())\n    return decision[:3]\n",
        "    return ((tile_prefill,) if q.shape[2] >= 512 else decision[:1]) + tuple(decision[1:3])\n")
    assert_failed_naming(docker_client, kept_tag, code, message, "a clamp that launches TILE_SIZE 32 at head 512",
                         "TILE_SIZE 32", "98304")


def test_an_unclamped_encoder_kernel_fails_the_build_naming_the_launch(docker_client, image_base, kept_tag,
                                                                       tree_copy):
    # An encoder clamp that keeps vLLM's BLOCK (64 at head 256 on sm_75: 131,072 bytes) and never
    # guards: the build's proof must catch it. Its launches are the good build's unpatched ones (the
    # sm_75 pass compares), so the build's Triton cache already holds them.
    code, message = sabotaged_build(
        tree_copy, image_base,
        "    if decision[1]:\n        _vllm_turing_guard(globals(), (_VLLM_TURING_ENCODER_KERNEL,))\n"
        "    return decision[0]\n# <<< vllm-turing clamp",
        "    return block\n# <<< vllm-turing clamp")
    assert_failed_naming(docker_client, kept_tag, code, message, "an unclamped encoder kernel",
                         "_fwd_kernel encoder", "131072")
