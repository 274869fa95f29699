"""`python3 build.py units`: write compose.yaml, compose.toolkit.yaml and the Quadlet unit for a host.

By default for this host: its GPUs (/dev/nvidia[0-9]*) and its driver library directory
(NVIDIA_LIB_DIR, default Debian/Ubuntu's). `--defaults` reads nothing from this host; with no
other option it writes what the repository commits.
The env file (quadlet/vllm-turing.env) holds the user's settings: written only where none exists.
Several `--env-file`s give several servers on this host (buildtool/units/servers.py plans them):
one service per env file in compose, a Quadlet unit and a Deployment each, with a copy of the file.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from buildtool import flags
from buildtool.units import envfile, idle, kubernetes, monitoring, namespace
from door import replace
from door.problem import Problem
from buildtool.units.compose import render_compose, render_toolkit_override
from buildtool.units.quadlet import render_env_file, render_fetch_quadlet, render_quadlet
from buildtool.units.servers import ModelSize, PlanError, ServerInput, plan_servers
from buildtool.units.spec import (CONTAINER_PORT, DEFAULT_IMAGE, DEFAULT_LIB_DIR, DEFAULT_MODEL_DIR, ENV_FILE_NAME,
                                  MODEL_MOUNT, STOP_GRACE_S, UNIT_NAME, HostValues, ServerValues, UnitSpec,
                                  gpu_indices_from_names,
                                  missing_libraries, resolve_gpus)
from contract.model_config import ConfigProblem, derived_max_len
from entrypoint.checks.memory import kv_bytes_per_token
from entrypoint.checks.model import read_model_dir
from entrypoint.settings import Settings, SettingsError, idle_after_setting, parse_settings, stop_grace_setting

QUADLET_UNIT = f"quadlet/{UNIT_NAME}.container"
ENV_FILE = f"quadlet/{ENV_FILE_NAME}"


@dataclass(frozen=True)
class Rendered:
    path: str  # relative to the output directory
    text: str
    keep_existing: bool = False  # user-edited files are never overwritten


def render_all(host: HostValues, cdi: bool = False, with_monitoring: bool = False,
               stop_grace_s: int = STOP_GRACE_S, idle_after_s: int | None = None, out: Path = Path(".")) -> list[Rendered]:
    spec = UnitSpec(host, server=ServerValues(stop_grace_s=stop_grace_s, idle_after_s=idle_after_s))
    return [Rendered("compose.yaml", render_compose(spec, with_monitoring=with_monitoring)),
            *idle_rendered(spec, out),
            Rendered("compose.toolkit.yaml", render_toolkit_override(spec)),
            Rendered(QUADLET_UNIT, render_quadlet(dataclasses.replace(spec, toolkit=cdi))),
            Rendered(f"quadlet/{spec.fetch_name}.container", render_fetch_quadlet(spec)),
            Rendered(ENV_FILE, render_env_file(), keep_existing=True),
            *(monitoring_files((spec,)) if with_monitoring else [])]


def idle_rendered(spec: UnitSpec, out: Path) -> list[Rendered]:
    """An IDLE_AFTER server's socket, proxy and compose units (none without IDLE_AFTER)."""
    if spec.server.idle_after_s is None:
        return []
    return [Rendered(path, text) for path, text in idle.idle_files(spec, str(out.resolve()))]


def monitoring_files(specs: tuple[UnitSpec, ...]) -> list[Rendered]:
    """Prometheus's config (every server of compose.yaml) and the rules, for the monitoring profile."""
    return [Rendered(monitoring.CONFIG_PATH, monitoring.compose_config(specs)),
            Rendered(monitoring.RULES_PATH, monitoring.rules_text())]


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
    kubernetes.add_arguments(parser)


def _probe_gpus(dev_root: Path) -> tuple[int, ...]:
    indices = gpu_indices_from_names(os.listdir(dev_root)) if dev_root.is_dir() else ()
    if not indices:
        raise Problem(f"found no {dev_root}/nvidia[0-9]* on this host, expected one per GPU; "
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
        raise Problem(f"NVIDIA_LIB_DIR: {exc}", exit_code=2) from None


def _checked_lib_dir(lib_dir: str) -> str:
    path = Path(lib_dir)
    present = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if missing := missing_libraries(present):
        raise Problem(f"{lib_dir} lacks {', '.join(missing)}, the driver libraries the container "
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
        raise Problem(f"{exc}", exit_code=2) from None
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
    """Writes every file (all rendered before the first write) as one step (door/replace.py): a failure
    leaves every unit already in `out` byte-identical. Returns one line per file."""
    kept = [out / item.path for item in files if item.keep_existing and (out / item.path).exists()]
    written = [(out / item.path, item.text.encode("utf-8")) for item in files if out / item.path not in kept]
    for target, _ in written:
        target.parent.mkdir(parents=True, exist_ok=True)
    replace.replace_files(written)
    return [f"kept    {out / item.path} (yours; delete it to get the template)" if out / item.path in kept
            else f"wrote   {out / item.path}" for item in files]


def host_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """One server: compose, the toolkit override, the Quadlet unit and the env file (the template
    where none is in --out, a copy of --env-file where one is given)."""
    host = host_values(args)
    env_name, env, env_text = single_env(args)
    grace, idle_after = stop_grace_of(env, env_name), idle_after_of(env, env_name)
    server = ServerValues(stop_grace_s=grace, idle_after_s=idle_after)
    refuse_clashes(namespace.host_claims([(env_name, UnitSpec(host, server=server))], args.monitoring))
    files = render_checked(lambda: render_all(host, cdi=args.cdi, with_monitoring=args.monitoring, stop_grace_s=grace,
                                              idle_after_s=idle_after, out=args.out))
    if env_text is not None:  # the --env-file's copy, the very bytes judged above
        files = [Rendered(ENV_FILE, env_text) if item.path == ENV_FILE else item for item in files]
    gpus = ",".join("/dev/nvidia" + str(i) for i in host.gpu_indices)
    return files, f"units for {len(host.gpu_indices)} GPU(s) ({gpus}), driver libraries from {host.lib_dir}"


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
    try:
        return str(env_path), envfile.read(env_path, str(env_path)).values, None
    except envfile.EnvFileProblem as exc:
        raise Problem(f"{exc}", exit_code=2) from None


def stop_grace_of(env: dict[str, str], env_name: str) -> int:
    """The units' stop grace: the server's own STOP_GRACE_SECONDS, so the grace and vLLM's drain agree."""
    try:
        return stop_grace_setting(env)
    except SettingsError as exc:
        raise Problem(f"{env_name}: {exc}", exit_code=2) from None


def idle_after_of(env: dict[str, str], env_name: str) -> int | None:
    """The server's IDLE_AFTER: None renders it always on; else socket-activated (buildtool/units/idle.py)."""
    try:
        return idle_after_setting(env)
    except SettingsError as exc:
        raise Problem(f"{env_name}: {exc}", exit_code=2) from None


def kubernetes_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """The manifests, their ConfigMap made from --env-file, else the env file in --out (the template
    where none is)."""
    spec = kubernetes.spec_from_args(args)
    env_name, env, _ = single_env(args)
    spec = dataclasses.replace(spec, server=dataclasses.replace(spec.server, stop_grace_s=stop_grace_of(env, env_name),
                                                                idle_after_s=idle_after_of(env, env_name)))
    text = checked_manifests(lambda: kubernetes.render_kubernetes(spec, env, pod_monitor=pod_monitor(args)), env_name)
    summary = (f"kubernetes: {spec.cluster.replicas} replica(s) of {len(spec.host.gpu_indices)} GPU(s), "
               f"{kubernetes.memory_gib(spec)} GiB of memory each, settings from {env_name}")
    return [Rendered(kubernetes.MANIFEST_PATH, text),
            Rendered(kubernetes.KUSTOMIZATION_PATH, kubernetes.KUSTOMIZATION_TEXT)], summary


def per_server(given: list | None, count: int, flag: str) -> list:
    """A per-server flag's value for each of `count` servers: given once (for all) or once per
    --env-file; [None] * count when not given."""
    if not given:
        return [None] * count
    if len(given) not in (1, count):
        raise Problem(f"{flag} given {len(given)} times for {count} server(s) (--env-file); give it once, or once "
                         "per --env-file in the same order", exit_code=2)
    return given * count if len(given) == 1 else list(given)


def server_ports(given: list[int] | None, count: int) -> list[int]:
    """Host ports: once per --env-file as given, or one base for all (the first server's; the next
    servers the next ports)."""
    if given and len(given) == count:
        return list(given)
    base = per_server(given, 1, "--port")[0] or CONTAINER_PORT
    if base + count - 1 > 65535:
        raise Problem(f"--port {base}: {count} servers need ports {base}..{base + count - 1}, past 65535; "
                         "give a lower --port", exit_code=2)
    return [base + i for i in range(count)]


def one_server(args: argparse.Namespace, gpus, port: int | None) -> argparse.Namespace:
    """The options as one server's renderers read them (one --gpus, one --port)."""
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
    the entrypoint's typed settings; Problem naming it."""
    try:
        found = envfile.read(path, str(path))
        return found.text, found.values, parse_settings(found.values)
    except envfile.EnvFileProblem as exc:
        raise Problem(f"--env-file {exc}", exit_code=2) from None
    except SettingsError as exc:
        raise Problem(f"--env-file {path}: {exc}", exit_code=2) from None


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
                raise Problem(f"--env-file {path}: its model cannot be sized here ({unsized}), and the pod's memory "
                                 "request needs its weights; pass --weights-gib N or --weights-from DIR", exit_code=2)
        specs = [kubernetes.spec_from_args(o, weight_bytes=size.weight_bytes if size else None)
                 for o, (size, _) in zip(options, sizes)]
    else:
        specs = [UnitSpec(host_values(o)) for o in options]
    inputs = [ServerInput(str(path), settings, spec.host.gpu_indices, spec.host.port, size, unsized)
              for path, (_, _, settings), spec, (size, unsized) in zip(args.env_file, read, specs, sizes)]
    try:
        planned = plan_servers(inputs)
    except PlanError as exc:
        raise Problem(str(exc), exit_code=2) from None
    specs = [dataclasses.replace(spec, server=p.values) for spec, p in zip(specs, planned)]
    if not args.kubernetes:  # Kubernetes objects are judged by kind and name as they are made
        refuse_clashes(namespace.host_claims(list(zip(map(str, args.env_file), specs)), args.monitoring))
    return specs, [env for _, env, _ in read], [text for text, _, _ in read]


def shared_host_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """Several servers: their units (or manifests) and a copy of each env file beside them."""
    specs, envs, texts = server_specs(args)
    servers = ", ".join(f"{s.server.name} (port {s.host.port}, GPU {','.join(map(str, s.host.gpu_indices))}, "
                        f"GPU_MEMORY_UTILIZATION {dict(s.server.settings)['GPU_MEMORY_UTILIZATION']})" for s in specs)
    if args.kubernetes:
        text = checked_manifests(lambda: kubernetes.render_kubernetes(specs[0], envs[0], *zip(specs[1:], envs[1:]),
                                                                      pod_monitor=pod_monitor(args),
                                                                      owners=tuple(map(str, args.env_file))),
                                 ", ".join(map(str, args.env_file)))
        return [Rendered(kubernetes.MANIFEST_PATH, text),
                Rendered(kubernetes.KUSTOMIZATION_PATH, kubernetes.KUSTOMIZATION_TEXT)], f"kubernetes: {servers}"
    units = [dataclasses.replace(spec, toolkit=args.cdi) for spec in specs]
    files = render_checked(lambda: [Rendered("compose.yaml", render_compose(*specs, with_monitoring=args.monitoring)),
                                    Rendered("compose.toolkit.yaml", render_toolkit_override(*specs)),
                                    *[Rendered(f"quadlet/{unit.server.name}.container", render_quadlet(unit))
                                      for unit in units],
                                    *[Rendered(f"quadlet/{unit.fetch_name}.container", render_fetch_quadlet(unit))
                                      for unit in units],
                                    *[item for spec in specs for item in idle_rendered(spec, args.out)]])
    copies = [Rendered(f"quadlet/{spec.server.env_file}", text) for spec, text in zip(specs, texts)]
    return files + copies + (monitoring_files(tuple(specs)) if args.monitoring else []), f"units for {len(specs)} servers: {servers}"


def checked_manifests(render, env_names: str) -> str:
    """The manifests, or the policy's refusal (a secret in an env file's ConfigMap) in one line."""
    try:
        return render()
    except namespace.NamespaceClash as exc:
        raise Problem(f"{exc}", exit_code=2) from None
    except ValueError as exc:
        secrets = ", ".join(f"{name} in the Secret {secret}" for name, (secret, _) in kubernetes.SECRET_REFERENCES.items())
        raise Problem(f"{env_names}: {exc}; a secret goes in a Secret ({secrets}; docs/fleet.md), "
                         "never in the env file's ConfigMap", exit_code=2) from None


def refuse_clashes(claims: list[namespace.Claim]) -> None:
    """The host's names and ports, judged before anything is rendered or written."""
    try:
        namespace.refuse_clashes(claims)
    except namespace.NamespaceClash as exc:
        raise Problem(f"{exc}", exit_code=2) from None


def render_checked(render):
    try:
        return render()
    except ValueError as exc:  # a value the serializers cannot write as itself
        raise Problem(f"{exc}", exit_code=2) from None


def pod_monitor(args: argparse.Namespace) -> bool | None:
    """Kubernetes monitoring: None (none), False (a plain scrape config) or True (the operator's objects)."""
    return args.pod_monitor if args.monitoring else None


def run(args: argparse.Namespace) -> int:
    if args.pod_monitor and not (args.kubernetes and args.monitoring):
        raise Problem("--pod-monitor: the operator's objects are Kubernetes monitoring; pass it with "
                         "--kubernetes --monitoring", exit_code=2)
    if len(args.env_file) > 1:
        files, summary = shared_host_files(args)
    else:
        args = one_server(args, per_server(args.gpus, 1, "--gpus")[0], per_server(args.port, 1, "--port")[0])
        files, summary = kubernetes_files(args) if args.kubernetes else host_files(args)
    try:
        report = write(args.out, files)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise Problem(f"cannot write into {args.out}: {exc.strerror}{where}; nothing was replaced; pass --out "
                         "with a writable directory", exit_code=2) from None
    print(summary)
    print("\n".join(report))
    return 0

