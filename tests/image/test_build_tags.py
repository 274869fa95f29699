"""How build.py moves tags: a new build keeps the old image as <tag>-previous; a no-op
rebuild changes nothing."""
import subprocess

import docker
import pytest

from tests.image.conftest import build_command

TAG = "vllm-turing-test-tags:latest"
PREVIOUS = "vllm-turing-test-tags:latest-previous"


@pytest.fixture
def tag_on_image(docker_client, image):
    docker_client.images.get(image).tag(*TAG.split(":"))
    yield docker_client.images.get(TAG).id
    for ref in (TAG, PREVIOUS):
        try:
            docker_client.images.remove(ref, noprune=True)
        except docker.errors.ImageNotFound:
            pass


def build(tree, tag, base) -> str:
    run = subprocess.run(build_command(tag, base=base, tree=tree), cwd=tree, capture_output=True, text=True)
    assert run.returncode == 0, f"build.py failed: {run.stderr.strip()[-800:]}"
    return run.stdout


def test_a_new_build_keeps_the_old_image_as_previous_and_a_no_op_rebuild_moves_nothing(
        docker_client, tag_on_image, tree_copy, image_base):
    old = tag_on_image
    (tree_copy / "entrypoint" / "__init__.py").write_text('"""changed by test_build_tags"""\n')
    build(tree_copy, TAG, image_base)
    new = docker_client.images.get(TAG)
    assert new.id != old, "the changed build did not move the tag"
    assert docker_client.images.get(PREVIOUS).id == old, "the image that held the tag is not kept as <tag>-previous"
    assert new.labels.get("io.vllm-turing.clamp.sha256"), "the new image carries no labels"

    out = build(tree_copy, TAG, image_base)
    assert "already holds this build" in out, f"the no-op rebuild did not notice it was one: {out[-300:]}"
    assert docker_client.images.get(TAG).id == new.id, "a no-op rebuild moved the tag"
    assert docker_client.images.get(PREVIOUS).id == old, "a no-op rebuild moved <tag>-previous"
