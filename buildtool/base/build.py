"""`build.py base`: a vLLM OpenAI base image from PyPI wheels."""
from pathlib import Path

import docker
from docker.errors import APIError

from buildtool.docker import buildkit
from buildtool.base.bootstrap import BOOTSTRAP_IMAGE, bootstrap_os_image
from buildtool.docker.engine import connect, image_or_none
from buildtool.errors import BuildError
from buildtool.hostconfig import pip_mirror_args

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OS_IMAGE = "debian:bookworm-slim"
PINNED_VLLM = "0.33.0"


def base_tag(vllm_version: str) -> str:
    return f"vllm-turing-base:{vllm_version}"


def add_arguments(parser) -> None:
    add_base_options(parser)
    add_common_build_options(parser)


def add_base_options(parser, when: str = "") -> None:
    """The options of a PyPI base build; `when` prefixes their help where they are conditional."""
    parser.add_argument("--vllm-version", default=PINNED_VLLM, help="vLLM release (default %(default)s)")
    parser.add_argument("--os-image", default=None,
                        help=f"{when}Debian/Ubuntu image with Python >= 3.10 to install vLLM on (default {DEFAULT_OS_IMAGE})")
    parser.add_argument("--bootstrap", action="store_true",
                        help=f"{when}make the OS image with debootstrap + docker import (root, Debian host), "
                             "for hosts that can pull nothing")
    parser.add_argument("--base-tag", default=None, help=f"{when}tag of the base (default vllm-turing-base:<vllm-version>)")


def add_common_build_options(parser) -> None:
    parser.add_argument("--ca-cert", type=Path, default=None,
                        help="CA bundle for a TLS-intercepting proxy; reaches pip as a BuildKit secret, never a layer")
    parser.add_argument("--no-cache", action="store_true", help="build every layer anew")
    parser.add_argument("--pull", action="store_true", help="pull a newer base before building")


def run(args) -> int:
    check_ca_cert(args.ca_cert)
    client = connect()
    build_base(client, args)
    return 0


def build_base(client: docker.DockerClient, args) -> str:
    tag = args.base_tag or base_tag(args.vllm_version)
    os_image = _os_image(client, args)
    print(f"building {tag}: vLLM {args.vllm_version} from PyPI on {os_image} (about 4 GB of downloads)", flush=True)
    req = buildkit.BuildRequest(
        context=REPO / "base", dockerfile=REPO / "base" / "Dockerfile", tag=tag,
        build_args={"OS_IMAGE": os_image, "VLLM_VERSION": args.vllm_version, **pip_mirror_args()},
        ca_cert=check_ca_cert(args.ca_cert), no_cache=args.no_cache, pull=args.pull)
    buildkit.build(req)
    return tag


def check_ca_cert(path: Path | None) -> Path | None:
    if path is not None and not path.is_file():
        raise BuildError(f"--ca-cert {path}: no such file; give the PEM bundle your proxy's CA is in", 2)
    return path


def _os_image(client: docker.DockerClient, args) -> str:
    if args.bootstrap:
        if image_or_none(client, BOOTSTRAP_IMAGE) is not None and not args.no_cache:
            print(f"using {BOOTSTRAP_IMAGE} bootstrapped earlier", flush=True)
            return BOOTSTRAP_IMAGE
        return bootstrap_os_image(client)
    os_image = args.os_image or DEFAULT_OS_IMAGE
    if image_or_none(client, os_image) is not None:
        return os_image
    if args.os_image is None and image_or_none(client, BOOTSTRAP_IMAGE) is not None:
        print(f"{DEFAULT_OS_IMAGE} is not here; using {BOOTSTRAP_IMAGE} made earlier by --bootstrap", flush=True)
        return BOOTSTRAP_IMAGE
    try:
        client.images.pull(os_image)
    except APIError as exc:
        raise BuildError(f"cannot pull {os_image} ({exc.explanation or exc}): pass --bootstrap to make an OS image "
                         "with debootstrap, or --os-image of one you have") from None
    return os_image
