"""Idle in a cluster (IDLE_AFTER with `build.py units --kubernetes`): KEDA scales the server's Deployment
to zero replicas when nobody asks, and its HTTP add-on holds a request that arrives at zero until a pod
is ready (docs/fleet.md, "Idle: scale to zero").

- An HTTPScaledObject routes the server's host name through the add-on's interceptor, which holds each
  request while the Deployment has no ready pod (up to the start's timeout) and counts the requests it
  holds. Its annotation stops the add-on from making its own ScaledObject: the one below is ours.
- A ScaledObject with minReplicaCount 0 and two triggers: the interceptor's count (external-push: it wakes
  the Deployment from zero, as nothing else can see a request then) and Prometheus on the server's own
  metrics (requests running or waiting), so a long answer still streaming keeps its pod.
  cooldownPeriod is IDLE_AFTER: that long without either, and KEDA scales to zero.

The objects follow the CRDs of KEDA 2.20.2 and the HTTP add-on 0.15.0, kept with their source in
tests/support/schemas/keda/ (tests/unit/test_units_idle.py validates every rendering against them).
Pure: a spec in, dicts out.
"""
from __future__ import annotations

from buildtool.units.spec import START_TIMEOUT_S, ClusterValues, UnitSpec

KEDA_API = "keda.sh/v1alpha1"
HTTP_API = "http.keda.sh/v1alpha1"
SKIP_SCALED_OBJECT = "httpscaledobject.keda.sh/skip-scaledobject-creation"
# The HTTP add-on's services as its Helm chart installs them in the `keda` namespace.
ADDON_NAMESPACE = "keda"
EXTERNAL_SCALER = f"keda-add-ons-http-external-scaler.{ADDON_NAMESPACE}:9090"
INTERCEPTOR = f"keda-add-ons-http-interceptor-proxy.{ADDON_NAMESPACE}:8080"
# Where the Prometheus operator's default instance answers; `--prometheus-url` names another.
DEFAULT_PROMETHEUS = ClusterValues.prometheus_url
POLLING_S = 15
# An answer may take long before its headers (a non-streamed request returns them with the whole
# answer): the interceptor waits this long for them instead of its 20 s default.
RESPONSE_HEADER_TIMEOUT_S = 1800


def metrics_selector(spec: UnitSpec) -> str:
    """The server's series: the job the monitoring objects set, and its served name where the plan set one."""
    served = dict(spec.server.settings).get("SERVED_MODEL_NAME")
    return '{job="vllm-turing"' + (f',model_name="{served}"' if served else "") + "}"


def keda_objects(spec: UnitSpec, labels: dict[str, str], prometheus_url: str = DEFAULT_PROMETHEUS) -> list[dict]:
    """The HTTPScaledObject and ScaledObject of an IDLE_AFTER server (none without IDLE_AFTER), with the
    server's labels."""
    idle = spec.server.idle_after_s
    if idle is None:
        return []
    name, replicas = spec.server.name, spec.cluster.replicas
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    selector = metrics_selector(spec)
    http = {"apiVersion": HTTP_API, "kind": "HTTPScaledObject",
            "metadata": {"name": name, "labels": labels, "annotations": {SKIP_SCALED_OBJECT: "true"}},
            "spec": {"hosts": [name], "pathPrefixes": ["/"],
                     "scaleTargetRef": {**target, "service": name, "port": spec.host.port},
                     "replicas": {"min": 0, "max": replicas},
                     "scaledownPeriod": idle,
                     "timeouts": {"conditionWait": f"{START_TIMEOUT_S}s",
                                  "responseHeader": f"{RESPONSE_HEADER_TIMEOUT_S}s"}}}
    scaled = {"apiVersion": KEDA_API, "kind": "ScaledObject",
              "metadata": {"name": name, "labels": labels},
              "spec": {"scaleTargetRef": target, "minReplicaCount": 0, "maxReplicaCount": replicas,
                       "cooldownPeriod": idle, "pollingInterval": POLLING_S,
                       "triggers": [
                           {"type": "external-push",
                            "metadata": {"scalerAddress": EXTERNAL_SCALER, "httpScaledObject": name}},
                           {"type": "prometheus",
                            "metadata": {"serverAddress": prometheus_url,
                                         "query": f"sum(vllm:num_requests_running{selector}) + "
                                                  f"sum(vllm:num_requests_waiting{selector})",
                                         "threshold": "1", "activationThreshold": "0"}}]}}
    return [http, scaled]


def interceptor_ingress() -> dict:
    """The NetworkPolicy rule that lets the add-on's interceptor reach an idle server's pods."""
    return {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ADDON_NAMESPACE}}}],
            "ports": [{"port": "http", "protocol": "TCP"}]}
