"""`build.py base`: a vLLM OpenAI base image from PyPI wheels."""
from pathlib import Path

import docker
from docker.errors import APIError

from buildtool.base.bootstrap import BOOTSTRAP_IMAGE, bootstrap_os_image
from buildtool.docker import buildkit
from buildtool.docker.engine import connect, image_or_none
from buildtool.errors import BuildError
from buildtool.hostconfig import host_ca_bundle, pip_index_secrets
from buildtool.plan import BasePlan, BuildOptions, add_base_arguments, base_plan
from contract.pins import OS_IMAGE

REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser) -> None:
    add_base_arguments(parser)


def run(args) -> int:
    plan = base_plan(args, host_ca_bundle())
    build_base(connect(), plan)
    return 0


def build_base(client: docker.DockerClient, plan: BasePlan) -> str:
    os_image = os_image_for(client, plan)
    print(f"building {plan.tag}: vLLM {plan.vllm_version} from PyPI on {os_image} (about 4 GB of downloads)", flush=True)
    say_ca(plan.options)
    buildkit.build(buildkit.BuildRequest(
        context=REPO / "base", dockerfile=REPO / "base" / "Dockerfile", tag=plan.tag,
        build_args={"OS_IMAGE": os_image, "VLLM_VERSION": plan.vllm_version}, secrets=pip_index_secrets(),
        ca_cert=plan.options.ca_cert, no_cache=plan.options.no_cache, pull=plan.options.pull))
    return plan.tag


def say_ca(options: BuildOptions) -> None:
    if options.ca_cert is not None and options.ca_source != "--ca-cert":
        print(f"pip in the build trusts {options.ca_cert} (from {options.ca_source}; --ca-cert overrides)", flush=True)


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
        raise BuildError(f"cannot pull --os-image {os_image} ({reason}): give one this engine has, "
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
