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
from tests import REPO

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


def image_given(config) -> str | None:
    return config.getoption("--image", default=None) or os.environ.get("VLLM_TURING_TEST_IMAGE")


class ImageBuild:
    """The session's build of TEST_TAG, started in the background as soon as the tests are collected
    (the unit tier, which tests/conftest.py runs first, then runs while it builds), and with it, when the
    serving tier runs and builds its vehicle, that build too (tooling/serving_stack.VehicleAhead)."""

    LOG = REPO / "reports" / "image-build.log"

    def __init__(self, with_vehicle: bool):
        # build.py's output goes to a file, not a pipe nobody reads while the tests run, and stays
        # there for the reader of a slow or failed run (reports/ is git-ignored, like junit.xml)
        self.LOG.parent.mkdir(exist_ok=True)
        self.log = self.LOG.open("w+")
        self.process = subprocess.Popen(build_command(TEST_TAG), cwd=REPO, stdout=self.log,
                                        stderr=subprocess.STDOUT, text=True)
        if with_vehicle:
            from buildtool.base.bootstrap import BOOTSTRAP_IMAGE
            from tooling import serving_stack

            poller = docker.from_env()  # the background thread's own client
            serving_stack.start_vehicle_ahead(lambda: image_here(poller, BOOTSTRAP_IMAGE), self.process)

    def stop(self) -> None:
        """Ends the builds still running when the session ends (a run cut short, -x)."""
        from tooling import serving_stack

        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        self.log.close()
        if serving_stack.vehicle_ahead():
            serving_stack.vehicle_ahead().stop()

    def wait(self) -> str | None:
        """None when the build succeeded, else the end of its stderr."""
        if self.process.wait() == 0:
            return None
        return self.LOG.read_text(errors="replace").strip()[-2000:]


_build: ImageBuild | None = None


def pytest_collection_finish(session):
    """Start the image build (and the vehicle's) when this session tests an image it must build."""
    global _build
    paths = [Path(str(item.fspath)) for item in session.items]
    needs_image = any(path.is_relative_to(REPO / "tests" / "image") and "image" in getattr(item, "fixturenames", ())
                      for path, item in zip(paths, session.items))
    if session.config.option.collectonly or image_given(session.config) or not needs_image:
        return
    from tooling.serving_stack import vehicle_given

    serving = any(p.is_relative_to(REPO / "tests" / "serving") for p in paths)
    try:
        docker.from_env().ping()
    except docker.errors.DockerException:
        return  # no engine: the docker_client fixture fails the tests that need one, naming it
    _build = ImageBuild(with_vehicle=serving and not vehicle_given(session.config))


def pytest_sessionfinish(session):
    if _build is not None:
        _build.stop()


@pytest.fixture(scope="session")
def image(request, docker_client) -> str:
    ref = image_given(request.config)
    if ref:
        return require_image(docker_client, ref, "--image", "build it with build.py or pull it")
    build = _build or ImageBuild(with_vehicle=False)
    failure = build.wait()
    if failure is not None:
        pytest.fail(f"build.py could not build {TEST_TAG}: {failure}", pytrace=False)
    return TEST_TAG


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
