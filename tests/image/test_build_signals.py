"""build.py under SIGTERM and SIGINT, with a real `docker buildx build` child (image tier: a Docker engine,
and the OS image `build.py base` makes or debian:bookworm-slim): the child's process group stops, the
old tag stays, and a signal during the tag move waits until both tags are written."""
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from buildtool.base.bootstrap import BOOTSTRAP_IMAGE
from tests.support.build_py import build_py as build_module
from tests import REPO



# A build that stays in its RUN step until stopped, run through buildkit.build under build.py's guard:
# the path `build.py build`, `base` and `vehicle` start `docker buildx build` by.
SIGNAL_BUILD = """\
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from buildtool.docker import buildkit
from tests.support.build_py import build_py
request = buildkit.BuildRequest(context=Path({context!r}), dockerfile=Path({context!r}) / "Dockerfile", tag={tag!r})
sys.exit(build_py().guarded("build", lambda: buildkit.build(request)))
"""


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)


def _small_local_image() -> str:
    """An image with /bin/sh this engine has (nothing is pulled)."""
    for ref in (BOOTSTRAP_IMAGE, "debian:bookworm-slim"):
        if _docker("image", "inspect", ref).returncode == 0:
            return ref
    pytest.fail(f"the signal tests build FROM a local image with a shell: `python3 build.py base --bootstrap` "
                f"makes {BOOTSTRAP_IMAGE}, or `docker pull debian:bookworm-slim`")


def _processes_with(marker: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _image_id(ref: str) -> str | None:
    inspected = _docker("image", "inspect", "--format", "{{.Id}}", ref)
    return inspected.stdout.strip() if inspected.returncode == 0 else None


@pytest.mark.parametrize("signum, exit_code, word", [(signal.SIGTERM, 143, "terminated"),
                                                     (signal.SIGINT, 130, "interrupted")])
def test_a_signal_stops_the_buildx_child_and_leaves_the_tag_as_it_was(tmp_path, signum, exit_code, word):
    assert _docker("info").returncode == 0, "the signal tests need a Docker engine with buildx"
    base = _small_local_image()
    marker = f"vllm-turing-signal-{uuid.uuid4().hex[:12]}"
    tag = f"vllm-turing-signal-test:{marker[-12:]}"
    assert _docker("tag", base, tag).returncode == 0  # the "old" image under the tag
    old_id = _image_id(tag)
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN echo {marker}-started && sleep 300 && echo {marker}\n")
    script = SIGNAL_BUILD.format(repo=str(REPO), context=str(tmp_path), tag=tag)
    # As from a terminal: a CI job started in the background inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler, so the child starts with SIGINT's default disposition.
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # the RUN step's shell (its command line holds the marker) appears once the step is under way;
        # the build's log shows no step output, so the process table is the witness
        while not _processes_with(f"{marker}-started") and child.poll() is None:
            time.sleep(0.2)
        if child.poll() is not None:
            pytest.fail(f"the build ended before its RUN step: {child.stderr.read()[-500:]}")
        child.send_signal(signum)
        assert child.wait(timeout=60) == exit_code
        err = child.stderr.read()
        assert f"build.py build: {word};" in err and len(err.strip().splitlines()) == 1, err
        deadline = time.monotonic() + 60
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _processes_with(marker), "the build's RUN step outlived build.py"
        assert _image_id(tag) == old_id, "the tag moved"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        _docker("rmi", "--no-prune", tag)


def test_a_signal_during_the_tag_move_waits_until_the_tag_is_moved_whole(tmp_path, monkeypatch, capsys):
    """SIGTERM arriving between the two tag writes of move_tag: the tag ends on the new image and
    -previous on the old one (never the old tag half moved), then build.py exits 143."""
    import docker
    from docker.models.images import Image

    from buildtool.docker import buildkit
    from buildtool.image.build import move_tag

    assert _docker("info").returncode == 0, "the signal tests need a Docker engine with buildx"
    base = _small_local_image()
    name = f"vllm-turing-signal-test:{uuid.uuid4().hex[:12]}"
    client = docker.from_env()
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nLABEL io.vllm-turing.test={name}\n")
    new_id = buildkit.build(buildkit.BuildRequest(context=tmp_path, dockerfile=tmp_path / "Dockerfile"))
    assert _docker("tag", base, name).returncode == 0
    old_id = _image_id(name)
    real_tag = Image.tag

    def signalled_tag(image, *args, **kwargs):  # the real tag write, with SIGTERM sent just before it
        os.kill(os.getpid(), signal.SIGTERM)
        return real_tag(image, *args, **kwargs)

    monkeypatch.setattr(Image, "tag", signalled_tag)
    # Another thread, as a test session (or an SDK) has: a signal mask is per thread, so the kernel hands
    # the process's SIGTERM to this one whatever the main thread blocks.
    stop_idling = threading.Event()
    idler = threading.Thread(target=stop_idling.wait, daemon=True)
    idler.start()
    try:
        assert build_module().guarded("build", lambda: move_tag(client, new_id, name)) == 143
        assert "build.py build: terminated" in capsys.readouterr().err
        assert (_image_id(name), _image_id(name + "-previous")) == (new_id, old_id)
    finally:
        stop_idling.set()
        _docker("rmi", "--no-prune", name, name + "-previous")
        _docker("rmi", "--no-prune", new_id)
