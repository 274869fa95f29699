"""`build.py base`: a vLLM OpenAI base image from PyPI wheels."""
import contextlib
import shutil
import tempfile
import uuid
from pathlib import Path

import docker
from docker.errors import APIError

from buildtool.base.bootstrap import BOOTSTRAP_IMAGE, bootstrap_os_image
from buildtool.docker import buildkit
from buildtool.docker.engine import connect, image_or_none
from buildtool.hostconfig import host_ca_bundle, pip_index_secrets
from buildtool.lock import PYTHON_VERSION, base_target, lock_for, stage_pins
from buildtool.build_plans import BasePlan, BuildOptions, add_base_arguments, base_plan
from buildtool.sbom import add_sbom
from contract.pins import OS_IMAGE
from door.problem import Problem

REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser) -> None:
    add_base_arguments(parser)


def run(args) -> int:
    plan = base_plan(args, host_ca_bundle())
    lock_for(base_target(plan.vllm_version))  # a release without a lock is refused before the engine is asked
    build_base(connect(), plan)
    return 0


def build_base(client: docker.DockerClient, plan: BasePlan) -> str:
    """Installs the release's lock (contract/locks/) on the OS image, then adds the SBOM: the tag
    moves only once the image's packages are found equal to the lock's."""
    lock = lock_for(base_target(plan.vllm_version))  # refused before any work when the release has none
    os_image = os_image_for(client, plan)
    print(f"building {plan.tag}: vLLM {plan.vllm_version} from PyPI on {os_image}, locked by "
          f"{lock.relative_to(REPO)} (about 4 GB of downloads)", flush=True)
    say_ca(plan.options)
    with built_scratch(client) as scratch, tempfile.TemporaryDirectory(prefix="vllm-turing-base-ctx-") as ctx:
        shutil.copy2(REPO / "base" / "Dockerfile", Path(ctx) / "Dockerfile")
        stage_pins(Path(ctx) / "pins", lock)
        buildkit.build(buildkit.BuildRequest(
            context=Path(ctx), dockerfile=Path(ctx) / "Dockerfile", tag=scratch,
            build_args={"OS_IMAGE": os_image, "VLLM_VERSION": plan.vllm_version, "LOCK_PYTHON": PYTHON_VERSION},
            secrets=pip_index_secrets(), ca_cert=plan.options.ca_cert, no_cache=plan.options.no_cache,
            pull=plan.options.pull))
        add_sbom(client, scratch, plan.tag, lock, title="vllm-turing-base", version=plan.vllm_version)
    return plan.tag


@contextlib.contextmanager
def built_scratch(client: docker.DockerClient):
    """A temporary reference for an image before its SBOM; removed however the block is left."""
    scratch = f"vllm-turing-build:{uuid.uuid4().hex[:12]}"
    try:
        yield scratch
    finally:
        if image_or_none(client, scratch) is not None:
            client.images.remove(scratch, noprune=True)


def say_ca(options: BuildOptions) -> None:
    if options.ca_cert is not None and options.ca_source != "--ca-cert":
        print(f"pip and uv in the build trust {options.ca_cert} (from {options.ca_source}; --ca-cert overrides)", flush=True)


# How a base gets its OS image: ("use", ref) one here, ("pull", ref), ("bootstrap", ref) with debootstrap
def os_image_step(plan: BasePlan, here) -> tuple[str, str]:
    """The first step towards the OS image, given `here(ref)`: whether the engine has it."""
    if plan.bootstrap:
        fresh = plan.options.no_cache or not here(BOOTSTRAP_IMAGE)
        return ("bootstrap" if fresh else "use", BOOTSTRAP_IMAGE)
    os_image = plan.os_image or OS_IMAGE
    if here(os_image):
        return "use", os_image
    if plan.os_image is None and here(BOOTSTRAP_IMAGE):
        return "use", BOOTSTRAP_IMAGE
    return "pull", os_image


def after_failed_pull(plan: BasePlan, os_image: str, reason: str) -> str:
    """A pull of the default OS image that failed becomes a bootstrap (the line to print); a named
    --os-image that cannot be pulled is refused."""
    if plan.os_image is not None:
        raise Problem(f"cannot pull --os-image {os_image} ({reason}): give one this engine has, "
                         "or leave --os-image out to bootstrap one with debootstrap")
    return f"cannot pull {os_image} ({reason}): bootstrapping an OS image with debootstrap instead"


def os_image_for(client: docker.DockerClient, plan: BasePlan) -> str:
    step, ref = os_image_step(plan, lambda name: image_or_none(client, name) is not None)
    if step == "use":
        if ref == BOOTSTRAP_IMAGE:
            print(f"using {BOOTSTRAP_IMAGE}, bootstrapped earlier", flush=True)
        return ref
    if step == "bootstrap":
        return bootstrap_os_image(client)
    try:
        client.images.pull(ref)
    except APIError as exc:
        print(after_failed_pull(plan, ref, first_line(exc.explanation or exc)), flush=True)
        return bootstrap_os_image(client)
    return ref


def first_line(value) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else "no reason given"
