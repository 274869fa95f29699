"""BuildKit builds through `docker buildx build --load`.

The SDK's images.build uses the legacy builder (no secrets, no cache mounts), so
builds go through the CLI; everything else goes through the SDK.
"""
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from door import children
from buildtool.docker.progress import ProgressView, failure_line
from door import files
from door.problem import Problem


@dataclass
class BuildRequest:
    context: Path
    dockerfile: Path
    tag: str | None = None
    build_args: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    ca_cert: Path | None = None
    no_cache: bool = False
    pull: bool = False
    stdin_dockerfile: str | None = None
    target: str | None = None  # the Dockerfile's stage to build (its last without)
    # The stage's files written into this folder (BuildKit's local exporter) instead of an image loaded
    output_dir: Path | None = None
    # secret id -> value: each reaches the build as a BuildKit secret read from the CLI's
    # environment, so the value is in no argv, build argument, layer or `docker history`
    secrets: dict = field(default_factory=dict)


def secret_variable(secret_id: str) -> str:
    """The environment variable the docker CLI reads a secret's value from."""
    return "VLLM_TURING_SECRET_" + secret_id.upper().replace("-", "_")


def buildx_argv(req: BuildRequest, iidfile: Path) -> list[str]:
    argv = ["docker", "buildx", "build", "--progress=plain"]
    # (BuildKit writes no image ID for a local export)
    argv += ["--output", f"type=local,dest={req.output_dir}"] if req.output_dir else ["--load", "--iidfile", str(iidfile)]
    if req.target:
        argv += ["--target", req.target]
    argv += ["-f", "-" if req.stdin_dockerfile is not None else str(req.dockerfile)]
    if req.tag:
        argv += ["-t", req.tag]
    for key, value in sorted(req.build_args.items()):
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in sorted(req.labels.items()):
        argv += ["--label", f"{key}={value}"]
    if req.ca_cert:
        argv += ["--secret", f"id=ca,src={req.ca_cert}"]
    for secret_id in sorted(req.secrets):
        argv += ["--secret", f"id={secret_id},env={secret_variable(secret_id)}"]
    if req.no_cache:
        argv.append("--no-cache")
    if req.pull:
        argv.append("--pull")
    argv.append(str(req.context))
    return argv


def build_environment(req: BuildRequest, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base, DOCKER_BUILDKIT="1")
    env.update({secret_variable(k): v for k, v in req.secrets.items()})
    return env


# BuildKit loses the session with its client now and then after a long step (a known BuildKit fault,
# open upstream): a later step that reads a secret or the context then fails with this. Seen here after
# a 29-minute fit step on a host at load 12. The steps that finished are in the build cache.
SESSION_LOST = "no active session for"


def build(req: BuildRequest, view: ProgressView | None = None) -> str:
    """Runs the build and returns the image ID ("" for a local export); a failure raises with the step's last line. A build
    whose session BuildKit lost is run once more: its finished steps come from the cache."""
    view = view or ProgressView()
    try:
        return _build_once(req, view)
    except Problem as error:
        if SESSION_LOST not in str(error):
            raise
        print(f"BuildKit lost its session with the client ({error}): building again, the finished steps "
              "come from the cache", file=view.status.stream, flush=True)
        return _build_once(req, ProgressView(view.status.stream, view.status.live))


def _build_once(req: BuildRequest, view: ProgressView) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        iidfile = Path(tmp) / "iid"
        argv = buildx_argv(req, iidfile)
        try:
            proc = children.start(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=build_environment(req))
        except FileNotFoundError:
            raise Problem("the docker CLI is not on PATH: install it (Debian: apt-get install docker.io)") from None
        with children.stopped_on_exit(proc):  # however this block is left, the build is stopped
            proc.stdin.write(req.stdin_dockerfile or "")
            proc.stdin.close()
            for line in proc.stdout:
                view.feed(line)
            rc = proc.wait()
            view.close()
        if rc != 0:
            if any("unknown command" in l and "buildx" in l for l in view.lines) or \
                    any("'buildx' is not a docker command" in l for l in view.lines):
                raise Problem("docker buildx is missing: install the buildx plugin "
                                 "(scripts/install-test-host.sh on Debian)")
            raise Problem("build failed: " + failure_line(view.lines))
        return "" if req.output_dir else files.read_own(iidfile).strip()
