"""The flags of `python3 build.py units` and the UnitSpecs made from them, for every format alike.

compose, Quadlet and Kubernetes read one set of flags (`add_arguments`) and get their spec from one
place (`host_values`, `cluster_values`, `server_specs`): for compose and Quadlet this host's GPUs
(/dev/nvidia[0-9]*) and its driver library directory (NVIDIA_LIB_DIR, default Debian/Ubuntu's), unless
`--defaults`, which reads nothing from this host; for `--kubernetes` nothing of this host but the
--weights-from directory. The env files (quadlet/vllm-turing.env, each `--env-file`) are read here
too, and several are planned into one server each (buildtool/units/servers.py). Everything is judged
before anything is rendered: bad input is a UsageError (exit 2) in one line naming the flag or file.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from buildtool import flags
from buildtool.units import envfile, keda
from buildtool.units.kubernetes import CPUS_PER_GPU, MANIFEST_PATH, SERVER_CPUS
from buildtool.units.namespace import host_claims, refuse_clashes
from buildtool.units.quadlet import render_env_file
from buildtool.units.servers import ModelSize, ServerInput, plan_servers
from buildtool.units.spec import (CONTAINER_PORT, DEFAULT_IMAGE, DEFAULT_LIB_DIR, DEFAULT_MODEL_DIR, ENV_FILE_NAME,
                                  MODEL_MOUNT, ClusterValues, HostValues, UnitSpec, gpu_indices_from_names,
                                  missing_libraries, resolve_gpus)
from contract.model_config import ConfigProblem, derived_max_len
from door.problem import Problem, UsageError
from entrypoint.checks.memory import kv_bytes_per_token
from entrypoint.checks.model import read_model_dir
from entrypoint.settings import Settings, SettingsError, idle_after_setting, parse_settings, stop_grace_setting

ENV_FILE = f"quadlet/{ENV_FILE_NAME}"
MODEL_VOLUMES = ("pvc", "hostPath")
MAX_CPUS = 512
MAX_REPLICAS = 1000  # a typo guard: more replicas than any GPU pool here has


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=flags.output_directory, default=Path("."),
                        help="directory to write into (default: the current one)")
    parser.add_argument("--defaults", action="store_true",
                        help="read nothing from this host: 1 GPU and Debian/Ubuntu's library directory unless "
                             "--gpus / --lib-dir say otherwise (with no other option: the committed files)")
    parser.add_argument("--cdi", action="store_true",
                        help="Quadlet unit for a host with nvidia-container-toolkit's CDI spec "
                             "(AddDevice=nvidia.com/gpu=all, no hand-wired devices or libraries)")
    parser.add_argument("--env-file", type=flags.file_to_read, action="append", default=[], metavar="FILE",
                        help="a server's settings (KEY=value, as quadlet/vllm-turing.env); give it once per server "
                             "to run several on this host (docs/deploy.md, \"Two models on one card\"); each is "
                             "copied beside the units (default: the template, one server)")
    parser.add_argument("--gpus", type=flags.gpus, action="append", help="all (every /dev/nvidiaN here), GPU indices such as 0,1, or a number N "
                                       f"(the first N, at most {flags.MAX_GPUS}); default: every GPU of this host. "
                                       "Several servers: once for all, or once per --env-file in order")
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
    parser.add_argument("--port", type=flags.port, action="append",
                        help="host port (default: 8000). Several servers: once (the first's; the others the next "
                             "ports), or once per --env-file in order")
    parser.add_argument("--api-key-file", type=flags.unit_file_path, metavar="FILE",
                        help="require an API key: compose mounts FILE as the secret vllm-api-key, Quadlet the podman "
                             "secret vllm-api-key (podman secret create vllm-api-key FILE), Kubernetes the Secret of "
                             "that name; API_KEY_FILE names it in the container. FILE is never read: the key is in "
                             "no unit (default: the wiring is written commented out)")
    parser.add_argument("--monitoring", action="store_true",
                        help="Prometheus for the servers, with monitoring/rules.yml: compose gets a `prometheus` service "
                             "under the `monitoring` profile and monitoring/prometheus.yml; --kubernetes a ConfigMap "
                             "with a scrape config (docs/deploy.md, \"Watching the box\")")
    parser.add_argument("--pod-monitor", action="store_true",
                        help="with --kubernetes --monitoring: a PodMonitor and a PrometheusRule for the Prometheus "
                             "operator instead of the scrape config")
    parser.add_argument("--dev-root", type=Path, default=Path("/dev"), help=argparse.SUPPRESS)
    add_cluster_arguments(parser)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "Kubernetes", f"--kubernetes writes {MANIFEST_PATH} instead of compose and Quadlet; this host is not "
                      "read, --gpus is the GPUs of one replica (default 1), --image, --port and --model-dir apply")
    group.add_argument("--kubernetes", action="store_true",
                       help="write Kubernetes manifests (ConfigMap from the env file, cache claim, Deployment, PodDisruptionBudget with --replicas > 1, Service, "
                            "NetworkPolicy) and the base's kustomization.yaml")
    group.add_argument("--replicas", type=flags.bounded_int(1, MAX_REPLICAS, "a number of replicas"), default=1, help="pods, each with its own GPU(s) (default: 1)")
    group.add_argument("--cpus", type=flags.bounded_int(1, MAX_CPUS, "a number of CPUs"), metavar="N",
                       help=f"CPUs per replica, request and limit (default: {SERVER_CPUS} + {CPUS_PER_GPU} per GPU)")
    group.add_argument("--weights-gib", type=flags.gib, metavar="GIB",
                       help="size of the model's .safetensors files; sizes the memory request")
    group.add_argument("--weights-from", type=flags.existing_directory, metavar="DIR", help="a local copy of the model to size the memory request from")
    group.add_argument("--model-volume", choices=MODEL_VOLUMES, default="pvc",
                       help="pvc: the claim --model-claim holding the model (default); hostPath: --model-dir on every node")
    group.add_argument("--model-claim", type=flags.kubernetes_name, default=ClusterValues.model_claim,
                       help=f"claim holding the model (default: {ClusterValues.model_claim})")
    group.add_argument("--prometheus-url", type=flags.service_url, default=keda.DEFAULT_PROMETHEUS, metavar="URL",
                       help="with IDLE_AFTER in the env file: the Prometheus KEDA asks whether requests are still in "
                            f"flight (default: {keda.DEFAULT_PROMETHEUS}; docs/fleet.md, \"Idle\")")
    group.add_argument("--runtime-class", type=flags.kubernetes_name, help="runtimeClassName, for nodes whose default runtime does not expose GPUs")
    group.add_argument("--node-selector", type=flags.node_label, action="append", default=[], metavar="KEY=VALUE",
                       help="node label of the GPU pool, e.g. cloud.google.com/gke-accelerator=nvidia-tesla-t4 (repeatable)")


def _probe_gpus(dev_root: Path) -> tuple[int, ...]:
    indices = gpu_indices_from_names(os.listdir(dev_root)) if dev_root.is_dir() else ()
    if not indices:
        raise UsageError(f"found no {dev_root}/nvidia[0-9]* on this host, expected one per GPU; "
                         "pass --gpus N to write units for another host, or --defaults")
    return indices


def _lib_dir_from_environment() -> str | None:
    """NVIDIA_LIB_DIR, typed as --lib-dir is (it is written into the units the same way)."""
    value = os.environ.get("NVIDIA_LIB_DIR")
    if not value:
        return None
    try:
        return flags.absolute_directory(value)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"NVIDIA_LIB_DIR: {exc}") from None


def _checked_lib_dir(lib_dir: str) -> str:
    path = Path(lib_dir)
    present = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if missing := missing_libraries(present):
        raise UsageError(f"{lib_dir} lacks {', '.join(missing)}, the driver libraries the container "
                         "needs; pass --lib-dir (or NVIDIA_LIB_DIR) with the directory holding "
                         "libcuda.so.1 (`ldconfig -p | grep libcuda`)")
    return lib_dir


def host_values(args: argparse.Namespace) -> HostValues:
    """Every option given counts; this host is read only for what they leave open, with --defaults
    not at all (the library directory is then not checked: it is another host's), and with
    --kubernetes never: the GPUs are one replica's, a count the device plugin fills."""
    if args.kubernetes:
        return _cluster_host_values(args)
    try:
        if args.gpus is not None:
            present = None if args.defaults or not args.gpus.every else _probe_gpus(args.dev_root)
            gpus, every_gpu = resolve_gpus(args.gpus, present)
        else:
            gpus, every_gpu = (HostValues.gpu_indices if args.defaults else _probe_gpus(args.dev_root)), True
    except ValueError as exc:
        raise UsageError(f"{exc}") from None
    if args.defaults or args.cdi:
        # --cdi: the Quadlet unit mounts no library (the CDI spec does), and compose's library
        # directory is read at `up` (NVIDIA_LIB_DIR), not now; nothing to check on this host.
        lib_dir = args.lib_dir or DEFAULT_LIB_DIR
    else:
        lib_dir = _checked_lib_dir(args.lib_dir or _lib_dir_from_environment() or DEFAULT_LIB_DIR)
    return HostValues(gpu_indices=gpus, every_gpu=every_gpu, host_ipc=args.ipc_host, lib_dir=lib_dir, model_dir=args.model_dir,
                      image=args.image, bind_address=args.bind, port=args.port,
                      api_key_file=args.api_key_file)


def _cluster_host_values(args: argparse.Namespace) -> HostValues:
    if args.gpus is not None and args.gpus.count is None:
        raise UsageError("--gpus: in a cluster the device plugin picks the GPUs; give the number of GPUs per "
                         "replica, e.g. --gpus 2")
    gpus = tuple(range(args.gpus.count)) if args.gpus is not None else (0,)
    return HostValues(gpu_indices=gpus, model_dir=args.model_dir, image=args.image, port=args.port,
                      api_key_file=args.api_key_file)


def _weight_bytes(args: argparse.Namespace) -> int:
    if (args.weights_gib is None) == (args.weights_from is None):
        raise UsageError("--kubernetes needs the model's size to size the memory request, found "
                         f"{'both' if args.weights_gib is not None else 'neither'} of --weights-gib and --weights-from; "
                         "pass one: --weights-from DIR (a local copy) or --weights-gib N")
    if args.weights_from is not None:
        try:
            return read_model_dir(str(args.weights_from)).weight_bytes
        except Problem as problem:
            raise UsageError(f"--weights-from: {problem}; {problem.fix}") from None
    return int(args.weights_gib * 2**30)


def cluster_values(args: argparse.Namespace, weight_bytes: int | None = None) -> ClusterValues:
    """What only a cluster needs (`weight_bytes`, when the caller sized the model, stands for
    --weights-gib / --weights-from)."""
    if args.model_volume == "hostPath" and not args.model_dir.startswith("/"):
        raise UsageError(f"--model-dir {args.model_dir!r}: a hostPath volume needs an absolute path on the nodes, "
                         "e.g. --model-dir /srv/models")
    return ClusterValues(replicas=args.replicas, weight_bytes=_weight_bytes(args) if weight_bytes is None else weight_bytes,
                         model_volume=args.model_volume, model_claim=args.model_claim,
                         runtime_class=args.runtime_class, node_selector=tuple(args.node_selector),
                         cpus=args.cpus, prometheus_url=args.prometheus_url)


def unit_spec(args: argparse.Namespace, weight_bytes: int | None = None) -> UnitSpec:
    """One server's spec from its options: this host's (compose, Quadlet) or a cluster's (--kubernetes)."""
    host = host_values(args)
    return UnitSpec(host, cluster=cluster_values(args, weight_bytes)) if args.kubernetes else UnitSpec(host)


def single_env(args: argparse.Namespace) -> tuple[str, dict[str, str], str | None]:
    """One server's settings (name, KEY=value pairs, the text to copy beside the units): --env-file,
    else the env file in --out (the user's, kept across renderings), else the template's (no copy:
    the env file in --out is written only where none is)."""
    if args.env_file:
        text, values, _ = read_env_file(args.env_file[0])
        return str(args.env_file[0]), values, text
    env_path = args.out / ENV_FILE
    if not os.path.lexists(env_path):
        return ENV_FILE, envfile.parse(render_env_file(), ENV_FILE), None
    return str(env_path), envfile.read(env_path, str(env_path)).values, None


def stop_grace_of(env: dict[str, str], env_name: str) -> int:
    """The units' stop grace: the server's own STOP_GRACE_SECONDS, so the grace and vLLM's drain agree."""
    try:
        return stop_grace_setting(env)
    except SettingsError as exc:
        raise UsageError(f"{env_name}: {exc}") from None


def idle_after_of(env: dict[str, str], env_name: str) -> int | None:
    """The server's IDLE_AFTER: None renders it always on; else socket-activated (buildtool/units/idle.py)."""
    try:
        return idle_after_setting(env)
    except SettingsError as exc:
        raise UsageError(f"{env_name}: {exc}") from None


def with_env(spec: UnitSpec, env: dict[str, str], env_name: str) -> UnitSpec:
    """The spec with its server's stop grace and IDLE_AFTER, from its env file."""
    return dataclasses.replace(spec, server=dataclasses.replace(spec.server, stop_grace_s=stop_grace_of(env, env_name),
                                                                idle_after_s=idle_after_of(env, env_name)))


def per_server(given: list | None, count: int, flag: str) -> list:
    """A per-server flag's value for each of `count` servers: given once (for all) or once per
    --env-file; [None] * count when not given."""
    if not given:
        return [None] * count
    if len(given) not in (1, count):
        raise UsageError(f"{flag} given {len(given)} times for {count} server(s) (--env-file); give it once, or once "
                         "per --env-file in the same order")
    return given * count if len(given) == 1 else list(given)


def server_ports(given: list[int] | None, count: int) -> list[int]:
    """Host ports: once per --env-file as given, or one base for all (the first server's; the next
    servers the next ports)."""
    if given and len(given) == count:
        return list(given)
    base = per_server(given, 1, "--port")[0] or CONTAINER_PORT
    if base + count - 1 > 65535:
        raise UsageError(f"--port {base}: {count} servers need ports {base}..{base + count - 1}, past 65535; "
                         "give a lower --port")
    return [base + i for i in range(count)]


def one_server(args: argparse.Namespace, gpus, port: int | None) -> argparse.Namespace:
    """The options as one server's spec reads them (one --gpus, one --port)."""
    return argparse.Namespace(**{**vars(args), "gpus": gpus, "port": CONTAINER_PORT if port is None else port})


def model_size(settings: Settings, model_dir: str) -> tuple[ModelSize | None, str]:
    """What MODEL's folder under --model-dir says of its GPU need, or None and why it cannot be read."""
    model = settings.model
    if model != MODEL_MOUNT and not model.startswith(MODEL_MOUNT + "/"):
        return None, f"MODEL {model} is not a folder under {MODEL_MOUNT}"
    folder = os.path.join(os.path.expanduser(model_dir), model[len(MODEL_MOUNT):].lstrip("/"))
    try:
        found = read_model_dir(folder)
        kv = kv_bytes_per_token(found.typed, settings.kv_cache_dtype)
    except (Problem, ConfigProblem) as problem:
        return None, f"{folder}: {problem}"
    max_len = settings.max_model_len or (derived_max_len(found.typed) or (None, None))[1]
    if not max_len or max_len == float("inf"):
        return None, f"{folder} names no context length and MAX_MODEL_LEN is unset"
    return ModelSize(found.weight_bytes, kv, int(max_len)), ""


def read_env_file(path: Path) -> tuple[str, dict[str, str], Settings]:
    """An --env-file's text, its KEY=value pairs (buildtool/units/envfile.py, through the door) and
    the entrypoint's typed settings; UsageError naming it."""
    try:
        found = envfile.read(path, str(path))
    except UsageError as exc:
        raise UsageError(f"--env-file {exc}") from None
    try:
        return found.text, found.values, parse_settings(found.values)
    except SettingsError as exc:
        raise UsageError(f"--env-file {path}: {exc}") from None


def server_specs(args: argparse.Namespace) -> tuple[list[UnitSpec], list[dict[str, str]], list[str]]:
    """One spec per --env-file, planned (or refused, in one line) before anything is written; with
    each file's KEY=value pairs and text."""
    count = len(args.env_file)
    read = [read_env_file(path) for path in args.env_file]
    sizes = [model_size(settings, args.model_dir) for _, _, settings in read]
    options = [one_server(args, gpus, port) for gpus, port in
               zip(per_server(args.gpus, count, "--gpus"), server_ports(args.port, count))]
    if args.kubernetes:
        for path, (size, unsized) in zip(args.env_file, sizes):
            if size is None and args.weights_gib is None and args.weights_from is None:
                raise UsageError(f"--env-file {path}: its model cannot be sized here ({unsized}), and the pod's memory "
                                 "request needs its weights; pass --weights-gib N or --weights-from DIR")
    specs = [unit_spec(o, weight_bytes=size.weight_bytes if size else None) for o, (size, _) in zip(options, sizes)]
    inputs = [ServerInput(str(path), settings, spec.host.gpu_indices, spec.host.port, size, unsized)
              for path, (_, _, settings), spec, (size, unsized) in zip(args.env_file, read, specs, sizes)]
    planned = plan_servers(inputs)
    specs = [dataclasses.replace(spec, server=p.values) for spec, p in zip(specs, planned)]
    if not args.kubernetes:  # Kubernetes objects are judged by kind and name as they are made
        refuse_clashes(host_claims(list(zip(map(str, args.env_file), specs)), args.monitoring))
    return specs, [env for _, env, _ in read], [text for text, _, _ in read]


def pod_monitor(args: argparse.Namespace) -> bool | None:
    """Kubernetes monitoring: None (none), False (a plain scrape config) or True (the operator's objects)."""
    return args.pod_monitor if args.monitoring else None


def refuse_lone_pod_monitor(args: argparse.Namespace) -> None:
    if args.pod_monitor and not (args.kubernetes and args.monitoring):
        raise UsageError("--pod-monitor: the operator's objects are Kubernetes monitoring; pass it with "
                         "--kubernetes --monitoring")
