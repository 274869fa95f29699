"""`python3 build.py units`: write compose.yaml, compose.toolkit.yaml and the Quadlet unit for a host.

By default for this host: its GPUs (/dev/nvidia[0-9]*) and its driver library directory
(NVIDIA_LIB_DIR, default Debian/Ubuntu's). `--defaults` reads nothing from this host; with no
other option it writes what the repository commits.
The env file (quadlet/vllm-turing.env) holds the user's settings: written only where none exists.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from buildtool import flags
from buildtool.errors import BuildError
from buildtool.units import kubernetes
from buildtool.units.compose import render_compose, render_toolkit_override
from buildtool.units.quadlet import render_env_file, render_quadlet
from buildtool.units.spec import (DEFAULT_IMAGE, DEFAULT_LIB_DIR, DEFAULT_MODEL_DIR, ENV_FILE_NAME,
                                  UNIT_NAME, HostValues, UnitSpec, gpu_indices_from_names, missing_libraries,
                                  resolve_gpus)

QUADLET_UNIT = f"quadlet/{UNIT_NAME}.container"
ENV_FILE = f"quadlet/{ENV_FILE_NAME}"


@dataclass(frozen=True)
class Rendered:
    path: str  # relative to the output directory
    text: str
    keep_existing: bool = False  # user-edited files are never overwritten


def render_all(host: HostValues, cdi: bool = False) -> list[Rendered]:
    spec = UnitSpec(host)
    return [Rendered("compose.yaml", render_compose(spec)),
            Rendered("compose.toolkit.yaml", render_toolkit_override(spec)),
            Rendered(QUADLET_UNIT, render_quadlet(UnitSpec(host, toolkit=cdi))),
            Rendered(ENV_FILE, render_env_file(), keep_existing=True)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=flags.output_directory, default=Path("."),
                        help="directory to write into (default: the current one)")
    parser.add_argument("--defaults", action="store_true",
                        help="read nothing from this host: 1 GPU and Debian/Ubuntu's library directory unless "
                             "--gpus / --lib-dir say otherwise (with no other option: the committed files)")
    parser.add_argument("--cdi", action="store_true",
                        help="Quadlet unit for a host with nvidia-container-toolkit's CDI spec "
                             "(AddDevice=nvidia.com/gpu=all, no hand-wired devices or libraries)")
    parser.add_argument("--gpus", type=flags.gpus, help="all (every /dev/nvidiaN here), GPU indices such as 0,1, or a number N "
                                       f"(the first N, at most {flags.MAX_GPUS}); default: every GPU of this host")
    parser.add_argument("--ipc-host", action="store_true",
                        help="share the host's IPC namespace (/dev/shm) instead of a sized shm (podman-compose "
                             "ignores ipc; compose and Quadlet honour it)")
    parser.add_argument("--lib-dir", type=flags.absolute_directory, help=f"host directory of libcuda.so.1 & co. "
                                          f"(default: $NVIDIA_LIB_DIR or {DEFAULT_LIB_DIR})")
    parser.add_argument("--model-dir", type=flags.host_directory, default=DEFAULT_MODEL_DIR,
                        help=f"host directory mounted read-only at /models (default: {DEFAULT_MODEL_DIR})")
    parser.add_argument("--image", type=flags.image_reference, default=DEFAULT_IMAGE, help=f"image to run (default: {DEFAULT_IMAGE})")
    parser.add_argument("--bind", type=flags.bind_address, default="127.0.0.1",
                        help="host IP address to publish on (default: 127.0.0.1)")
    parser.add_argument("--port", type=flags.port, default=8000, help="host port (default: 8000)")
    parser.add_argument("--api-key-file", type=flags.unit_file_path, metavar="FILE",
                        help="require an API key: compose mounts FILE as the secret vllm-api-key, Quadlet the podman "
                             "secret vllm-api-key (podman secret create vllm-api-key FILE), Kubernetes the Secret of "
                             "that name; API_KEY_FILE names it in the container. FILE is never read: the key is in "
                             "no unit (default: the wiring is written commented out)")
    parser.add_argument("--dev-root", type=Path, default=Path("/dev"), help=argparse.SUPPRESS)
    kubernetes.add_arguments(parser)


def _probe_gpus(dev_root: Path) -> tuple[int, ...]:
    indices = gpu_indices_from_names(os.listdir(dev_root)) if dev_root.is_dir() else ()
    if not indices:
        raise BuildError(f"found no {dev_root}/nvidia[0-9]* on this host, expected one per GPU; "
                         "pass --gpus N to write units for another host, or --defaults", exit_code=2)
    return indices


def _lib_dir_from_environment() -> str | None:
    """NVIDIA_LIB_DIR, typed as --lib-dir is (it is written into the units the same way)."""
    value = os.environ.get("NVIDIA_LIB_DIR")
    if not value:
        return None
    try:
        return flags.absolute_directory(value)
    except argparse.ArgumentTypeError as exc:
        raise BuildError(f"NVIDIA_LIB_DIR: {exc}", exit_code=2) from None


def _checked_lib_dir(lib_dir: str) -> str:
    path = Path(lib_dir)
    present = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if missing := missing_libraries(present):
        raise BuildError(f"{lib_dir} lacks {', '.join(missing)}, the driver libraries the container "
                         "needs; pass --lib-dir (or NVIDIA_LIB_DIR) with the directory holding "
                         "libcuda.so.1 (`ldconfig -p | grep libcuda`)", exit_code=2)
    return lib_dir


def host_values(args: argparse.Namespace) -> HostValues:
    """Every option given counts; this host is read only for what they leave open, and with
    --defaults not at all (the library directory is then not checked: it is another host's)."""
    try:
        if args.gpus is not None:
            present = None if args.defaults or not args.gpus.every else _probe_gpus(args.dev_root)
            gpus, every_gpu = resolve_gpus(args.gpus, present)
        else:
            gpus, every_gpu = (HostValues.gpu_indices if args.defaults else _probe_gpus(args.dev_root)), True
    except ValueError as exc:
        raise BuildError(f"{exc}", exit_code=2) from None
    if args.defaults or args.cdi:
        # --cdi: the Quadlet unit mounts no library (the CDI spec does), and compose's library
        # directory is read at `up` (NVIDIA_LIB_DIR), not now; nothing to check on this host.
        lib_dir = args.lib_dir or DEFAULT_LIB_DIR
    else:
        lib_dir = _checked_lib_dir(args.lib_dir or _lib_dir_from_environment() or DEFAULT_LIB_DIR)
    return HostValues(gpu_indices=gpus, every_gpu=every_gpu, host_ipc=args.ipc_host, lib_dir=lib_dir, model_dir=args.model_dir,
                      image=args.image, bind_address=args.bind, port=args.port,
                      api_key_file=args.api_key_file)


def write(out: Path, files: list[Rendered]) -> list[str]:
    """Writes every file (all rendered before the first write); returns one line per file."""
    report = []
    for item in files:
        target = out / item.path
        if item.keep_existing and target.exists():
            report.append(f"kept    {target} (yours; delete it to get the template)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(item.text)
        report.append(f"wrote   {target}")
    return report


def kubernetes_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """The manifests, their ConfigMap made from the env file in --out (the template where none is)."""
    spec = kubernetes.spec_from_args(args)
    env_path = args.out / ENV_FILE
    try:
        env_text, env_name = (env_path.read_text(), str(env_path)) if env_path.exists() else (render_env_file(), ENV_FILE)
        text = kubernetes.render_kubernetes(spec, kubernetes.parse_env_file(env_text, env_name))
    except OSError as exc:
        raise BuildError(f"cannot read {env_path}: {exc.strerror}; fix its permissions", exit_code=2) from None
    except ValueError as exc:
        secrets = ", ".join(f"{name} in the Secret {secret}" for name, (secret, _) in kubernetes.SECRET_REFERENCES.items())
        raise BuildError(f"{env_name}: {exc}; a secret goes in a Secret ({secrets}; docs/fleet.md), "
                         "never in the env file's ConfigMap", exit_code=2) from None
    summary = (f"kubernetes: {spec.cluster.replicas} replica(s) of {len(spec.host.gpu_indices)} GPU(s), "
               f"{kubernetes.memory_gib(spec)} GiB of memory each, settings from {env_name}")
    return [Rendered(kubernetes.MANIFEST_PATH, text),
            Rendered(kubernetes.KUSTOMIZATION_PATH, kubernetes.KUSTOMIZATION_TEXT)], summary


def run(args: argparse.Namespace) -> int:
    if args.kubernetes:
        files, summary = kubernetes_files(args)
    else:
        host = host_values(args)
        try:
            files = render_all(host, cdi=args.cdi)
        except ValueError as exc:  # a value the serializers cannot write as itself
            raise BuildError(f"{exc}", exit_code=2) from None
        gpus = ",".join("/dev/nvidia" + str(i) for i in host.gpu_indices)
        summary = f"units for {len(host.gpu_indices)} GPU(s) ({gpus}), driver libraries from {host.lib_dir}"
    try:
        report = write(args.out, files)
    except OSError as exc:
        raise BuildError(f"cannot write into {args.out}: {exc.strerror}; pass --out with a writable "
                         "directory", exit_code=2) from None
    print(summary)
    print("\n".join(report))
    return 0

