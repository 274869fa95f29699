"""`build.py model fetch REPO[@REVISION]`: the image's own `fetch` run with the host's models folder
mounted where the units mount it, so the model is judged on the target GPU before its weights come
down and lands verified, with its manifest, where the server will read it. The token reaches the
container by name (`-e HF_TOKEN`, docker copies the value from this process's environment) or as a
mounted file, never in argv."""
from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from buildtool import flags
from buildtool.docker import engine
from door import children, output
from door.problem import UsageError
from buildtool.units.spec import DEFAULT_IMAGE, DEFAULT_MODEL_DIR, MODEL_MOUNT
from entrypoint.fetch import request

TOKEN_MOUNT = "/run/secrets/hf-token"
# huggingface_hub's settings the fetch honours, passed by name only (values stay out of argv)
PASSED_BY_NAME = ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")
CONTAINER_HF_HOME = "/tmp/hf-home"
# compose.yaml's image variable: where it is set, the fetch runs the image the server will run
ENV_IMAGE = "VLLM_TURING_IMAGE"


def _typed(parse):
    """The fetch's own parser of a word as an argparse type (one home for what a word may be)."""
    def typed(text: str):
        try:
            return parse(text)
        except UsageError as usage:
            raise argparse.ArgumentTypeError(str(usage).split(". usage:")[0]) from None
    return typed


model_reference = _typed(lambda text: "@".join(request.parse_model_ref(text)))
gpu_name = _typed(request.parse_gpu)
folder_name = _typed(request.parse_name)


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    fetch = sub.add_parser("fetch", help="fetch a Hub model into the models folder, judged and verified",
                           description=__doc__.split("\n\n")[0])
    fetch.add_argument("model", type=model_reference, metavar="REPO[@REVISION]")
    fetch.add_argument("--image", type=flags.image_reference, default=os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE,
                       help=f"image whose fetch runs (default: ${ENV_IMAGE}, the image compose.yaml runs, else "
                            f"{DEFAULT_IMAGE})")
    fetch.add_argument("--model-dir", type=flags.host_directory, default=DEFAULT_MODEL_DIR,
                       help="host models folder, mounted at /models as the units mount it (default: %(default)s)")
    fetch.add_argument("--name", type=folder_name, help="folder under --model-dir (default: the repository's name)")
    fetch.add_argument("--gpu", type=gpu_name, help="judge for this card (t4, rtx2080ti, a10, ...: its memory too) or device (sm75, sm86, ...) instead of this host's")
    fetch.add_argument("--drafter", action="store_true",
                       help="a speculative drafter: judged also as the preflight judges DRAFTER")
    fetch.add_argument("--token-file", type=flags.secret_file,
                       help="a file holding the Hub token, mounted read-only (else HF_TOKEN from the environment)")
    fetch.add_argument("--host-network", action="store_true",
                       help="share the host's network (an HF_ENDPOINT on this host's loopback)")


@dataclass(frozen=True)
class FetchRun:
    model: str
    image: str
    model_dir: Path
    name: str | None = None
    gpu: str | None = None
    token_file: Path | None = None
    host_network: bool = False
    drafter: bool = False
    terminal: bool = False  # stderr is a terminal: huggingface_hub draws its progress bars there
    uid: int = 0
    gid: int = 0


def fetch_run(args, uid: int | None = None, gid: int | None = None) -> FetchRun:
    return FetchRun(args.model, args.image, Path(os.path.expanduser(args.model_dir)), args.name, args.gpu,
                    args.token_file, args.host_network, args.drafter, sys.stderr.isatty(),
                    os.getuid() if uid is None else uid, os.getgid() if gid is None else gid)


def docker_argv(run: FetchRun, env_names: set[str], container: str | None = None) -> list[str]:
    """`docker run` of the image's fetch; `env_names` are the settings set here, passed by name; `container`
    names the container (what `docker stop` is given when build.py is stopped)."""
    argv = ["docker", "run", "--rm", *(["--name", container] if container else []), "--user", f"{run.uid}:{run.gid}",
            "-e", f"HF_HOME={CONTAINER_HF_HOME}", "-v", f"{run.model_dir}:{MODEL_MOUNT}"]
    argv += [word for name in PASSED_BY_NAME if name in env_names for word in ("-e", name)]
    if run.token_file is not None:
        argv += ["-v", f"{run.token_file.resolve()}:{TOKEN_MOUNT}:ro", "-e", f"HF_TOKEN_PATH={TOKEN_MOUNT}"]
    if run.terminal:
        argv += ["-t"]
    if run.host_network:
        argv += ["--network", "host"]
    if run.gpu is None:
        argv += ["--gpus", "all"]
    argv += [run.image, "fetch", run.model, "--models-dir", MODEL_MOUNT]
    if run.name:
        argv += ["--name", run.name]
    if run.gpu:
        argv += ["--gpu", run.gpu]
    if run.drafter:
        argv += ["--drafter"]
    return argv


CONTAINER_PREFIX = "vllm-turing-fetch-"
DOCKER_STOP_S = 10  # the fetch ends at once on SIGTERM (entrypoint/stop_signals.py); this is docker's grace


def container_name() -> str:
    return f"{CONTAINER_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


def stop_container(name: str) -> None:
    """The container stopped and removed, whatever the docker CLI that started it did (killed, its
    signal lost): `docker stop`, then `docker rm -f` for one that outlived it."""
    for argv in (["docker", "stop", "--time", str(DOCKER_STOP_S), name], ["docker", "rm", "--force", name]):
        with contextlib.suppress(OSError):
            children.run(argv)


def absent_image(image: str, present: bool) -> UsageError | None:
    """The one line for an image this host lacks that docker would look for on Docker Hub's library (a
    name with no '/', as `python3 build.py` tags it), where no image of ours lives; None when it is here,
    or names a registry docker may pull from."""
    if present or "/" in image:
        return None
    return UsageError(f"--image {image} is not on this host, and the fetch runs inside it: build it with "
                      f"`python3 build.py`, or name a built one with --image or ${ENV_IMAGE}")


def run(args) -> int:
    output.install(output.secrets_in(os.environ))
    fetch = fetch_run(args)
    if refusal := absent_image(fetch.image, engine.image_or_none(engine.connect(), fetch.image) is not None):
        raise refusal
    fetch.model_dir.mkdir(parents=True, exist_ok=True)
    name = container_name()
    proc = children.start(docker_argv(fetch, set(os.environ), name))
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:  # build.py is stopped (SIGTERM, Ctrl-C): the container with it
            stop_container(name)
            children.stop(proc)
