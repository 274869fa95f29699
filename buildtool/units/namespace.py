"""One namespace for a host's units: every name and port a rendering claims, and the refusal, before
anything is written, when two of its owners (the servers' env files, Prometheus) claim one.

Compose services, Quadlet units and their files, container names, volumes, published ports and the
port variables compose reads are all made from the env files' names (buildtool/units/servers.py) and
the sidecars' fixed names (each server's fetch step, Prometheus). Two env files can still meet:
`a/chat.env`, `chat-1.env` and `b/chat.env` all become `chat-1` once the duplicates are numbered,
and the fetch step of `chat.env` is named as the server of `chat-fetch.env`. A YAML mapping or a
dict would keep the last of two equal keys without a word, so the claims are checked as a list.
Kubernetes objects are claimed by kind and name (`cluster_claims`), from the documents themselves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from buildtool.units import idle, monitoring
from buildtool.units.spec import IDLE_BACKEND_OFFSET, UnitSpec
from door.problem import UsageError

MONITORING_OWNER = "--monitoring"
COMPONENT = "app.kubernetes.io/component"  # the label that tells a server's objects from its fetch step's
RENAME = "rename one of the env files (the units are named after them)"
PORT_FIX = (f"give --port values nothing else publishes (once per --env-file for several servers; Prometheus "
            f"publishes {monitoring.PROMETHEUS_PORT} with --monitoring)")


@dataclass(frozen=True)
class Claim:
    kind: str  # "compose service", "container", "port", ...
    name: str
    owner: str  # the env file that makes it, or MONITORING_OWNER
    role: str  # what it is to its owner: "its server", "its fetch step", "Prometheus"


def server_claims(owner: str, spec: UnitSpec) -> list[Claim]:
    """What one server and its fetch step claim on the host (compose and Quadlet)."""
    server, fetch = "server", "fetch step"
    return [
        Claim("compose service", spec.server.service, owner, server),
        Claim("compose service", spec.fetch_service, owner, fetch),
        Claim("container", spec.server.name, owner, server),
        Claim("container", spec.fetch_name, owner, fetch),
        Claim("file", f"quadlet/{spec.server.name}.container", owner, server),
        Claim("file", f"quadlet/{spec.fetch_name}.container", owner, fetch),
        Claim("file", f"quadlet/{spec.server.env_file}", owner, "env file's copy"),
        *[Claim("volume", name, owner, server) for name in spec.cache_volumes],
        Claim("port", str(spec.host.port), owner, server),
        Claim("port variable", f"{spec.server.variable_prefix}_PORT", owner, server),
        *([Claim("port", str(spec.backend_port), owner, f"its loopback backend, port + {IDLE_BACKEND_OFFSET} (IDLE_AFTER)")]
          + [Claim("file", path, owner, server) for path in idle.idle_paths(spec)]
          if spec.server.idle_after_s is not None else []),
    ]


def monitoring_claims(spec: UnitSpec) -> list[Claim]:
    """Prometheus's claims beside the servers of compose.yaml (the first server's bind address)."""
    role = "Prometheus"
    return [Claim("compose service", "prometheus", MONITORING_OWNER, role),
            Claim("volume", monitoring.DATA_VOLUME, MONITORING_OWNER, role),
            Claim("port", str(monitoring.PROMETHEUS_PORT), MONITORING_OWNER, role),
            Claim("port variable", "VLLM_TURING_PROMETHEUS_PORT", MONITORING_OWNER, role)]


def host_claims(servers: Sequence[tuple[str, UnitSpec]], with_monitoring: bool) -> list[Claim]:
    claims = [claim for owner, spec in servers for claim in server_claims(owner, spec)]
    return claims + (monitoring_claims(servers[0][1]) if with_monitoring else [])


def cluster_claims(documents: Iterable[tuple[str, dict]]) -> list[Claim]:
    """(owner, Kubernetes object) -> a claim on its kind and name."""
    return [Claim(f"Kubernetes {doc['kind']} name", doc["metadata"]["name"], owner,
                  "Prometheus" if owner == MONITORING_OWNER else
                  "fetch step" if doc["metadata"].get("labels", {}).get(COMPONENT) == "fetch" else "server")
            for owner, doc in documents]


def refuse_clashes(claims: Sequence[Claim]) -> None:
    """UsageError (exit 2) in one line naming the first two owners that claim one name of one kind, the
    clash and the fix."""
    first: dict[tuple[str, str], Claim] = {}
    for claim in claims:
        seen = first.setdefault((claim.kind, claim.name), claim)
        if seen is claim or seen.owner == claim.owner:
            continue  # a server and its own fetch step share its download cache on purpose
        fix = PORT_FIX if claim.kind == "port" else RENAME
        raise UsageError(f"{seen.owner} ({seen.role}) and {claim.owner} ({claim.role}) both use the {claim.kind} "
                             f"{claim.name}; {fix}")
