"""`python3 build.py units`: renders compose.yaml, compose.toolkit.yaml, the Quadlet units and the env
file for a host, or the Kubernetes manifests (--kubernetes), and writes them as one step.

The flags and the UnitSpecs come from buildtool/units/options.py, for every format alike; the
renderers (compose.py, quadlet.py, kubernetes.py, idle.py, monitoring.py) only render. Before
anything is written the names and ports are judged (namespace.py) and the Kubernetes objects by the
policy (policy.py). The env file (quadlet/vllm-turing.env) holds the user's settings: written only
where none exists. Several `--env-file`s give several servers on this host (buildtool/units/servers.py
plans them): one service per env file in compose, a Quadlet unit and a Deployment each, with a copy
of the file.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from buildtool.units import idle, kubernetes, monitoring, namespace, options, policy
from buildtool.units.compose import render_compose, render_toolkit_override
from buildtool.units.options import ENV_FILE
from buildtool.units.quadlet import render_env_file, render_fetch_quadlet, render_quadlet
from buildtool.units.spec import STOP_GRACE_S, UNIT_NAME, HostValues, ServerValues, UnitSpec
from door import replace
from door.problem import UsageError

QUADLET_UNIT = f"quadlet/{UNIT_NAME}.container"
add_arguments = options.add_arguments  # build.py's subcommand module: its flags, then `run`


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
    host = options.host_values(args)
    env_name, env, env_text = options.single_env(args)
    grace, idle_after = options.stop_grace_of(env, env_name), options.idle_after_of(env, env_name)
    server = ServerValues(stop_grace_s=grace, idle_after_s=idle_after)
    namespace.refuse_clashes(namespace.host_claims([(env_name, UnitSpec(host, server=server))], args.monitoring))
    files = render_checked(lambda: render_all(host, cdi=args.cdi, with_monitoring=args.monitoring, stop_grace_s=grace,
                                              idle_after_s=idle_after, out=args.out))
    if env_text is not None:  # the --env-file's copy, the very bytes judged above
        files = [Rendered(ENV_FILE, env_text) if item.path == ENV_FILE else item for item in files]
    gpus = ",".join("/dev/nvidia" + str(i) for i in host.gpu_indices)
    return files, f"units for {len(host.gpu_indices)} GPU(s) ({gpus}), driver libraries from {host.lib_dir}"


def kubernetes_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """The manifests, their ConfigMap made from --env-file, else the env file in --out (the template
    where none is)."""
    spec = options.unit_spec(args)
    env_name, env, _ = options.single_env(args)
    spec = options.with_env(spec, env, env_name)
    text = checked_manifests(((spec, env),), options.pod_monitor(args), (), env_name)
    summary = (f"kubernetes: {spec.cluster.replicas} replica(s) of {len(spec.host.gpu_indices)} GPU(s), "
               f"{kubernetes.memory_gib(spec)} GiB of memory each, settings from {env_name}")
    return [Rendered(kubernetes.MANIFEST_PATH, text),
            Rendered(kubernetes.KUSTOMIZATION_PATH, kubernetes.KUSTOMIZATION_TEXT)], summary


def shared_host_files(args: argparse.Namespace) -> tuple[list[Rendered], str]:
    """Several servers: their units (or manifests) and a copy of each env file beside them."""
    specs, envs, texts = options.server_specs(args)
    servers = ", ".join(f"{s.server.name} (port {s.host.port}, GPU {','.join(map(str, s.host.gpu_indices))}, "
                        f"GPU_MEMORY_UTILIZATION {dict(s.server.settings)['GPU_MEMORY_UTILIZATION']})" for s in specs)
    if args.kubernetes:
        text = checked_manifests(tuple(zip(specs, envs)), options.pod_monitor(args), tuple(map(str, args.env_file)),
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


def checked_manifests(servers: tuple[tuple[UnitSpec, dict[str, str]], ...], pod_monitor: bool | None,
                      owners: tuple[str, ...], env_names: str) -> str:
    """The manifests, judged first: two objects of one kind and name (one line naming both owners, the
    servers' env files), or the policy's refusal (a secret in an env file's ConfigMap), in one line."""
    (spec, env), *others = servers
    try:
        owned = kubernetes.owned_objects(servers, pod_monitor, owners)
        namespace.refuse_clashes(namespace.cluster_claims(owned))
        policy.refuse_manifests([doc for _, doc in owned], env_names)
        return kubernetes.render_kubernetes(spec, env, *others, pod_monitor=pod_monitor)
    except ValueError as exc:  # a value the serializers cannot write as itself
        raise policy.refusal(env_names, str(exc)) from None


def render_checked(render):
    try:
        return render()
    except ValueError as exc:  # a value the serializers cannot write as itself
        raise UsageError(f"{exc}") from None


def run(args: argparse.Namespace) -> int:
    options.refuse_lone_pod_monitor(args)
    if len(args.env_file) > 1:
        files, summary = shared_host_files(args)
    else:
        args = options.one_server(args, options.per_server(args.gpus, 1, "--gpus")[0],
                                  options.per_server(args.port, 1, "--port")[0])
        files, summary = kubernetes_files(args) if args.kubernetes else host_files(args)
    try:
        report = write(args.out, files)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise UsageError(f"cannot write into {args.out}: {exc.strerror}{where}; nothing was replaced; pass --out "
                         "with a writable directory") from None
    print(summary)
    print("\n".join(report))
    return 0

