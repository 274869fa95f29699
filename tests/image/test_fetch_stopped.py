"""SIGTERM to `build.py model fetch` ends build.py AND the fetch's container: build.py names the
container and `docker stop`s it on its way out (the docker CLI's own end does not stop a container).
The image's fetch is held by the hostile peer (its Hub answer stalls after the headers), so it is
still running when build.py is told to stop."""
import os
import signal
import subprocess
import sys
import time

from tests.support.hostile import peer as hostile
from tests.support.hostile.peer import HubPeer
from tests.support.slack import SCHEDULING_SLACK_S

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_S = 120


def containers(docker_client, prefix: str) -> list[str]:
    return [found.name for found in docker_client.containers.list(all=True, filters={"name": prefix})]


def test_sigterm_to_build_py_model_fetch_stops_its_container(image, docker_client, tmp_path):
    with HubPeer().route("/", hostile.stall_after_headers()) as peer:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("HF_")}, "HF_ENDPOINT": peer.url}
        build = subprocess.Popen([sys.executable, "build.py", "model", "fetch", "org/held", "--image", image,
                                  "--gpu", "sm75", "--host-network", "--model-dir", str(tmp_path / "models")],
                                 cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        prefix = f"vllm-turing-fetch-{build.pid}-"
        try:
            deadline = time.monotonic() + START_S
            while not peer.requests:  # the container's fetch is asking the peer: it runs
                assert build.poll() is None, build.communicate()
                assert time.monotonic() < deadline, "the fetch's container never asked the Hub"
                time.sleep(0.2)
            assert containers(docker_client, prefix), "the fetch's container is not named after build.py"
            build.send_signal(signal.SIGTERM)
            _, err = build.communicate(timeout=30 + SCHEDULING_SLACK_S)
            left = containers(docker_client, prefix)  # build.py returns once `docker stop` and `rm` have
        finally:
            if build.poll() is None:
                build.kill()
            for name in containers(docker_client, prefix):  # cleaned up after the test, whatever it found
                docker_client.containers.get(name).remove(force=True)
    assert build.returncode == 143 and "terminated" in err.strip().splitlines()[-1], err
    assert left == [], f"build.py ended and left its fetch container running: {left}"


def test_model_fetch_with_an_image_this_host_lacks_is_one_line_and_makes_no_folder(tmp_path):
    models = tmp_path / "models"
    done = subprocess.run([sys.executable, "build.py", "model", "fetch", "org/repo", "--image", "vllm-turing-absent:0",
                           "--gpu", "t4", "--model-dir", str(models)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert "--image vllm-turing-absent:0 is not on this host" in line and "python3 build.py" in line, line
    assert not models.exists()
