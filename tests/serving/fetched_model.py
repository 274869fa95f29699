"""The serving tier's model, fetched as a user fetches one: the tiny Gemma 4 (tiny_gemma4.py, made in the
vehicle) committed to a repository of a real Hub mirror (olah, tooling/hub_mirror.py), then got by
the vehicle's own `fetch`, through the `docker run` that `build.py model fetch` runs (buildtool/model_fetch.py:
the target card named, `--gpu t4`, as on a host without a GPU; the Hub token as a mounted file that
HF_TOKEN_PATH names; HF_ENDPOINT passed by name). So every server of the tier serves a folder that
carries the fetch manifest, and the preflight's `model` check names its repository and commit.

The mirror listens on the host's address on Docker's default bridge: the fetch's container, on that
bridge as `build.py model fetch` starts it (no --network), reaches it there and nowhere else does.
The one change to the argv `build.py model fetch` builds: a container name instead of --rm, so the
container is inspected (argv, environment) and its log read after it exits, then removed.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from buildtool import model_fetch
from contract import layout
from entrypoint.fetch import manifest
from tests.support.docker_bridge import bridge_gateway
from tooling.hub_mirror import HubMirror
from tooling import serving_stack

REPO_ID = f"vllm-turing-test/{serving_stack.MODEL_NAME}"  # fetched into MODEL_NAME, the repository's name
CARD = "t4"


@dataclass(frozen=True)
class Fetched:
    models_dir: Path  # holds MODEL_NAME, the fetched folder
    repo: str
    commit: str
    token: str  # the Hub token the fetch was given in a file
    token_file: Path
    argv: list[str]  # the docker CLI's argv (the token is not in it either)
    inspect: str  # `docker inspect` of the fetch's container, after it exited
    logs: str  # its output
    manifest: str  # the manifest it wrote, as text
    seconds: float  # mirror start, commit and fetch (not the model's generation)


def sbom(image: str) -> str:
    """The image's SBOM, as it ships it."""
    return serving_stack.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", image,
                              layout.SBOM]).stdout


def fetch_tiny_model(image: str, docker_client, models_dir: Path, work: Path) -> Fetched:
    """The tiny model made in `work`, served by a mirror, fetched with `image`'s fetch into models_dir."""
    serving_stack.make_tiny_model(image, work / "made")
    started = time.monotonic()
    mirror = HubMirror(work / "hub", host=bridge_gateway(docker_client)).start()
    container = f"vllm-turing-serving-fetch-{os.getpid()}"
    try:
        repo = mirror.repo(REPO_ID)
        repo.put_folder(work / "made" / serving_stack.MODEL_NAME)
        commit = repo.commit("the tiny Gemma 4")
        token = "hf_servingtier" + secrets.token_hex(16)
        token_file = work / "hf-token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        models_dir.mkdir(parents=True, exist_ok=True)
        run = model_fetch.FetchRun(f"{REPO_ID}@main", image, models_dir, gpu=CARD, token_file=token_file,
                             uid=os.getuid(), gid=os.getgid())
        argv = model_fetch.docker_argv(run, {"HF_ENDPOINT"})
        at = argv.index("--rm")
        argv[at:at + 1] = ["--name", container]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=mirror.env())
        inspect = serving_stack.run(["docker", "inspect", container]).stdout
        logged = serving_stack.run(["docker", "logs", container])
        logs = logged.stdout + logged.stderr + done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"the fetch exited {done.returncode}: {done.stderr[-2000:]}\n"
                               f"olah: {mirror.log.read_text()[-1500:]}")
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        mirror.stop()
    serving_stack.readable_by_all(models_dir)
    written = (models_dir / serving_stack.MODEL_NAME / manifest.NAME).read_text()
    json.loads(written)
    return Fetched(models_dir, REPO_ID, commit, token, token_file, argv, inspect, logs, written, time.monotonic() - started)
