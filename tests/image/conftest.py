"""The image tier: a real Docker engine and a built image.

`pytest tests/image --image REF` checks an image you built or pulled. Without --image the
session builds one with build.py on the PyPI base (reused between runs by its tag).
No engine is a failure, never a skip: this tier is what proves the product.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_TAG = "vllm-turing-test:0.33.0"


def pytest_addoption(parser):
    parser.addoption("--image", default=None, help="image to test (default: build one with build.py)")


@pytest.fixture(scope="session")
def docker_client():
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"the image tier needs a Docker engine and none answered ({exc}); "
                    "on Debian run scripts/install-test-host.sh", pytrace=False)
    return client


def build_command(tag: str, *extra: str, base: str = "pypi", ca_cert: Path | None = None,
                  tree: Path = REPO) -> list[str]:
    """build.py of `tree` on `base`, as README.md's fallback build runs it: on the PyPI base
    build.py itself finds the host's CA bundle and bootstraps an OS image where none can be pulled,
    so no flag says either (the session's cold build is the proof); `ca_cert` names another bundle."""
    argv = [sys.executable, str(tree / "build.py"), "--base", base, "--tag", tag, *extra]
    if ca_cert is not None:
        argv += ["--ca-cert", str(ca_cert)]
    return argv


def require_image(client, ref: str, option: str, hint: str) -> str:
    """`ref` when the engine has it; otherwise the session fails naming the option and what to do."""
    if not image_here(client, ref):
        pytest.fail(f"{option} {ref}: no such image here; {hint}", pytrace=False)
    return ref


@pytest.fixture(scope="session")
def image(request, docker_client) -> str:
    ref = request.config.getoption("--image") or os.environ.get("VLLM_TURING_TEST_IMAGE")
    if ref:
        return require_image(docker_client, ref, "--image", "build it with build.py or pull it")
    build = subprocess.Popen(build_command(TEST_TAG), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    if builds_the_vehicle(request):
        from buildtool.base.bootstrap import BOOTSTRAP_IMAGE
        from tests.support import serving_stack

        poller = docker.from_env()  # the background thread's own client
        serving_stack.start_vehicle_ahead(lambda: image_here(poller, BOOTSTRAP_IMAGE), build)
    _, stderr = build.communicate()
    if build.returncode != 0:
        pytest.fail(f"build.py could not build {TEST_TAG}: {stderr.strip()[-2000:]}", pytrace=False)
    return TEST_TAG


def builds_the_vehicle(request) -> bool:
    """Whether this session runs the serving tier and will build its vehicle (no --vehicle given)."""
    vehicle_given = (request.config.getoption("--vehicle", default=None)
                     or os.environ.get("VLLM_TURING_VEHICLE"))
    serving = any(Path(str(item.fspath)).is_relative_to(REPO / "tests" / "serving") for item in request.session.items)
    return serving and not vehicle_given


def image_here(client, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.fixture(scope="session")
def image_labels(docker_client, image) -> dict:
    return docker_client.images.get(image).labels or {}


@pytest.fixture(scope="session")
def image_base(image_labels) -> str:
    """The base the image under test was built on: builds made by the tests reuse it."""
    base = image_labels.get("org.opencontainers.image.base.name")
    if not base:
        pytest.fail("the image has no org.opencontainers.image.base.name label: was it built by build.py?",
                    pytrace=False)
    return base


@pytest.fixture
def tree_copy(tmp_path) -> Path:
    """A copy of this checkout to change and build from, leaving the checkout alone."""
    copy = tmp_path / "tree"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports", ".cache"))
    return copy
