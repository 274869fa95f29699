"""Renders the Kubernetes manifests from the same UnitSpec as compose and Quadlet.

One multi-document YAML file: a ConfigMap made from the env file, the cache claim, a Deployment
(one GPU or one tensor-parallel group per replica), a PodDisruptionBudget when there is more than one
replica, a Service and a NetworkPolicy that admits only the namespace's own pods. The pods meet the
Restricted Pod Security Standard (non-root uid in group 0, no privilege escalation, every capability
dropped, the runtime's default seccomp profile) except with `--model-volume hostPath`, which the
standard forbids (Baseline then), and checkov's restricted checks (tests/unit/test_units_checkov.py):
CPU and memory requests and limits, a read-only root filesystem with writable volumes only where the
server writes, secrets as files, a uid of 10000 or more. The policy the schema cannot express (a GPU
limit, the probes, no secret in plain text, no privileged pod) is `manifest_problems`, which the
renderer applies to its own output and the tests to broken copies.
"""
from __future__ import annotations

import argparse
import math
import re
import shlex

from buildtool import flags
from buildtool.units import keda, monitoring, namespace
from buildtool.units.servers import CARD_BUDGET
from buildtool.units.serialize import comment, yaml_document, yaml_documents
from buildtool.units.spec import (API_KEY_PATH, API_KEY_SECRET, CONTAINER_PORT, DROP_CAPABILITIES,
                                  ENV_API_KEY, FETCH_COMMAND, HEALTH, MODEL_MOUNT, POD_GID, POD_HOME, POD_UID, SHM_SIZE,
                                  START_TIMEOUT_S, UNIT_NAME, ClusterValues, HostValues,
                                  UnitSpec)
from entrypoint.checks.disk import NEED_TMPDIR
from entrypoint.checks.memory import staging_need
from entrypoint.checks.model import read_model_dir
from entrypoint.fetch import manifest as fetch_manifest
from entrypoint.ready import COMMAND as READY_COMMAND
from door.problem import Problem

MANIFEST_PATH = f"kubernetes/base/{UNIT_NAME}.yaml"
# The base's kustomization, written beside the manifests so that an overlay's `../../base` builds
# wherever --out puts them.
KUSTOMIZATION_PATH = "kubernetes/base/kustomization.yaml"
KUSTOMIZATION_TEXT = yaml_document([
    "The base: the rendered manifests as they are. Site changes go in an overlay (overlays/gke-t4).",
    {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [f"{UNIT_NAME}.yaml"]},
])
GPU_RESOURCE = "nvidia.com/gpu"
MODEL_VOLUMES = ("pvc", "hostPath")
CONFIG_MAP = f"{UNIT_NAME}-env"
CACHE_CLAIM = f"{UNIT_NAME}-cache"
CACHE_CLAIM_SIZE = "20Gi"  # Triton and vLLM caches (tens to hundreds of MB), Hub downloads when not offline
HF_SECRET = f"{UNIT_NAME}-hf"
HF_TOKEN = "HF_TOKEN"
# The Secrets the pods read, by the variable a user would otherwise set: (Secret, its key). Both are
# mounted as files, never given as environment variables: the API key's file is API_KEY_FILE (the
# entrypoint reads it), the token's is huggingface_hub's own HF_TOKEN_PATH (the Hub client reads it,
# so the token is in no process's environment).
SECRET_REFERENCES = {HF_TOKEN: (HF_SECRET, HF_TOKEN), ENV_API_KEY: (API_KEY_SECRET, API_KEY_SECRET)}
API_KEY_VOLUME = "api-key"
HF_TOKEN_VOLUME = "hf-token"
HF_TOKEN_DIR = f"/run/secrets/{HF_SECRET}"
ENV_HF_TOKEN_PATH = "HF_TOKEN_PATH"
HEALTH_PATH = "/health"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
STARTUP_PERIOD_S = 10
READINESS_PERIOD_S = 10
HOME_SIZE = "1Gi"
# /tmp: the entrypoint's start report and config copies, torch's and Triton's temporary files; the
# preflight's disk check wants NEED_TMPDIR free there, the limit allows twice that.
TMP_SIZE = f"{2 * NEED_TMPDIR // 2**30}Gi"
# CPUs per replica when --cpus is not given: one for vLLM's API server (HTTP, tokenization) and two
# per GPU (the engine core or worker that drives it, and Triton's and inductor's compiles at start).
# One GPU gets 3, which fits the 4-vCPU nodes GPU pools often have (allocatable about 3.9).
SERVER_CPUS = 1
CPUS_PER_GPU = 2
MAX_CPUS = 512
MAX_REPLICAS = 1000  # a typo guard: more replicas than any GPU pool here has
PRE_STOP_S = 5  # the Service drops the pod from its endpoints before the server stops taking requests
# /dev/shm is tmpfs: what the server writes there counts against the pod's memory limit.
SHM_ALLOWANCE_PER_GPU = 2**30
LABELS = {"app.kubernetes.io/name": UNIT_NAME, "app.kubernetes.io/component": "server"}
COMPONENT = namespace.COMPONENT
# The fetch step: a Job writes the model into the claim (entrypoint/fetch, reading FETCH_MODEL and
# FETCH_GPU from the ConfigMap, into MODEL's folder); each server pod's init container waits for the
# manifest the fetch writes last, so no server starts on a half-written model. Without FETCH_MODEL
# both do nothing. The Job's memory is the server's: its judgment of the staging need is the pod's.
FETCH_CPUS = 1
GATE_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
GATE_PERIOD_S = 10
GATE_SCRIPT = ('[ -z "$FETCH_MODEL" ] || case "$MODEL" in /*) until [ -f "$MODEL/' + fetch_manifest.NAME + '" ]; do '
               'echo "waiting for $MODEL/' + fetch_manifest.NAME + ' (the fetch Job writes it last)"; sleep '
               f'{GATE_PERIOD_S}; done;; esac')
# The device plugin sets NVIDIA_VISIBLE_DEVICES to the GPUs it allocated; a pod that sets it itself
# (to "all", as compose does) would see every GPU of the node on hosts with the container toolkit.
DEVICE_PLUGIN_OWNS = ("NVIDIA_VISIBLE_DEVICES",)
SECRET_NAME = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIALS?)($|_)", re.IGNORECASE)
SECRET_VALUE = re.compile(r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{20,}")

HEADER = ("Generated by `python3 build.py units --kubernetes` (buildtool/units/spec.py is the source of",
          "truth, shared with compose and the Quadlet unit); regenerate rather than edit, and put",
          "site-specific changes in a kustomize overlay (kubernetes/overlays/). docs/fleet.md walks through it.")


def labels(spec: UnitSpec) -> dict[str, str]:
    """The pods' labels; a server of several on one host (buildtool/units/servers.py) adds its instance."""
    return LABELS if spec.server.name == UNIT_NAME else {**LABELS, "app.kubernetes.io/instance": spec.server.name}


def config_map_name(spec: UnitSpec) -> str:
    return CONFIG_MAP if spec.server.name == UNIT_NAME else f"{spec.server.name}-env"


def cache_claim_name(spec: UnitSpec) -> str:
    return CACHE_CLAIM if spec.server.name == UNIT_NAME else f"{spec.server.name}-cache"


def kube_quantity(docker_size: str) -> str:
    """Docker's "8g" / "512m" as a Kubernetes binary quantity ("8Gi", "512Mi")."""
    number, unit = re.fullmatch(r"(\d+)([kmg])", docker_size.lower()).groups()
    return f"{number}{unit.upper() if unit != 'k' else 'K'}i"


def seconds(duration: str) -> int:
    return int(duration.removesuffix("s"))


def gpus_per_replica(spec: UnitSpec) -> int:
    return len(spec.host.gpu_indices)


def cpu_cores(spec: UnitSpec) -> int:
    """Request = limit, like the memory: the pod's QoS class is Guaranteed."""
    return spec.cluster.cpus or SERVER_CPUS + CPUS_PER_GPU * gpus_per_replica(spec)


def memory_gib(spec: UnitSpec) -> int:
    """Request = limit: the entrypoint's memory check wants staging_need() under the cgroup limit
    (Kubernetes nodes run without swap), plus what /dev/shm may hold, in whole GiB."""
    need = staging_need(spec.cluster.weight_bytes) + SHM_ALLOWANCE_PER_GPU * gpus_per_replica(spec)
    return math.ceil(need / 2**30)


def _probe(period_s: int, timeout_s: int, failures: int, action: dict | None = None) -> dict:
    return {**(action or {"httpGet": {"path": HEALTH_PATH, "port": "http"}}), "periodSeconds": period_s,
            "timeoutSeconds": timeout_s, "failureThreshold": failures}


def _probes() -> dict:
    timeout = seconds(HEALTH["timeout"])
    return {
        # preflight + weight loading (98-157 s on a T4) + a first compile: the same budget systemd gets
        "startupProbe": _probe(STARTUP_PERIOD_S, timeout, START_TIMEOUT_S // STARTUP_PERIOD_S),
        # "this model answers": the served model listed by /v1/models, asked with the pod's key
        "readinessProbe": _probe(READINESS_PERIOD_S, timeout, HEALTH["retries"], {"exec": {"command": list(READY_COMMAND)}}),
        # the process is up: a restart is the cure only for a server that no longer answers at all
        "livenessProbe": _probe(seconds(HEALTH["interval"]), timeout, HEALTH["retries"]),
    }


def _model_volume(spec: UnitSpec) -> dict:
    if spec.cluster.model_volume == "hostPath":
        return {"name": "models", "hostPath": {"path": spec.host.model_dir, "type": "Directory"}}
    return {"name": "models", "persistentVolumeClaim": {"claimName": spec.cluster.model_claim, "readOnly": True}}


def _container(spec: UnitSpec, memory: str) -> dict:
    gpus = gpus_per_replica(spec)
    cpus = cpu_cores(spec)
    environment = {**spec.environment, "HOME": POD_HOME, **spec.api_key_environment,
                   ENV_HF_TOKEN_PATH: f"{HF_TOKEN_DIR}/{HF_TOKEN}"}
    env = [{"name": key, "value": value} for key, value in environment.items() if key not in DEVICE_PLUGIN_OWNS]
    mounts = [{"name": "models", "mountPath": MODEL_MOUNT, "readOnly": True}]
    # One claim, a subPath per cache; the compile caches' subPaths carry the image's version.
    mounts += [{"name": "cache", "mountPath": target, "subPath": name} for name, target in spec.cache_volumes.items()]
    # The root filesystem is read-only: these are every other place the server writes.
    mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    mounts.append({"name": "home", "mountPath": POD_HOME})
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    # A Secret volume is a directory of one file per key: subPath makes API_KEY_FILE the file itself
    # (a subPath is not updated when the Secret changes; vLLM reads the key at start only, so a new
    # key takes a restart either way: `kubectl rollout restart`). The Secret is required: a pod
    # without it waits in ContainerCreating rather than serving /v1 to anyone.
    mounts.append({"name": API_KEY_VOLUME, "mountPath": API_KEY_PATH, "subPath": API_KEY_SECRET, "readOnly": True})
    # The token's Secret is optional: mounted as a whole directory (an absent Secret is an empty one,
    # and huggingface_hub then asks anonymously), so HF_TOKEN_PATH names a file that may not exist.
    mounts.append({"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True})
    return {
        "name": "vllm",
        "image": spec.host.image,
        "imagePullPolicy": "IfNotPresent",
        "envFrom": [{"configMapRef": {"name": config_map_name(spec)}}],
        "env": env,
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": str(cpus), "memory": memory, GPU_RESOURCE: gpus},
                      "limits": {"cpu": str(cpus), "memory": memory, GPU_RESOURCE: gpus}},
        "volumeMounts": mounts,
        **_probes(),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_S}}},
        "securityContext": container_security(),
    }


def container_security() -> dict:
    """A fresh copy per container (one object shared by two would serialize as a YAML alias)."""
    return {"privileged": False, "allowPrivilegeEscalation": False, "runAsNonRoot": True,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": list(DROP_CAPABILITIES)}}


# Restricted Pod Security Standard: a numeric non-root uid (runAsNonRoot cannot judge a named USER),
# group 0 as OpenShift assigns, which owns the claim's files (fsGroup).
def pod_security() -> dict:
    return {"runAsNonRoot": True, "runAsUser": POD_UID, "runAsGroup": POD_GID, "fsGroup": POD_GID,
            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}


def _gate_container(spec: UnitSpec) -> dict:
    """The server pod's init container: it waits for the fetch manifest in MODEL's folder (when FETCH_MODEL is set)."""
    return {"name": "wait-for-model", "image": spec.host.image, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", GATE_SCRIPT], "envFrom": [{"configMapRef": {"name": config_map_name(spec)}}],
            "resources": {"requests": dict(GATE_RESOURCES), "limits": dict(GATE_RESOURCES)},
            "volumeMounts": [{"name": "models", "mountPath": MODEL_MOUNT, "readOnly": True}],
            "securityContext": container_security()}


def _fetch_job(spec: UnitSpec, memory: str) -> dict:
    """The Job that fetches the model into the claim (read-write here alone), once."""
    job_labels = {**labels(spec), COMPONENT: "fetch"}
    environment = {"HOME": POD_HOME, "HF_HOME": f"{POD_HOME}/.cache/huggingface", "HF_HUB_OFFLINE": "0",
                   ENV_HF_TOKEN_PATH: f"{HF_TOKEN_DIR}/{HF_TOKEN}"}
    container = {
        "name": "fetch", "image": spec.host.image, "imagePullPolicy": "IfNotPresent", "args": list(FETCH_COMMAND),
        "envFrom": [{"configMapRef": {"name": config_map_name(spec)}}],
        "env": [{"name": key, "value": value} for key, value in environment.items()],
        "resources": {"requests": {"cpu": str(FETCH_CPUS), "memory": memory},
                      "limits": {"cpu": str(FETCH_CPUS), "memory": memory}},
        "volumeMounts": [{"name": "models", "mountPath": MODEL_MOUNT}, {"name": "home", "mountPath": POD_HOME},
                         {"name": "tmp", "mountPath": "/tmp"},
                         {"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True}],
        "securityContext": container_security(),
    }
    pod = {"restartPolicy": "OnFailure", "enableServiceLinks": False, "automountServiceAccountToken": False,
           "securityContext": pod_security(), "containers": [container],
           "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": spec.cluster.model_claim}},
                       {"name": "home", "emptyDir": {"sizeLimit": HOME_SIZE}},
                       {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
                       {"name": HF_TOKEN_VOLUME, "secret": {"secretName": HF_SECRET, "defaultMode": 0o440,
                                                            "optional": True}}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": spec.fetch_name, "labels": job_labels},
            "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": job_labels}, "spec": pod}}}


def _pod_spec(spec: UnitSpec, memory: str) -> dict:
    cluster = spec.cluster
    pod: dict = {}
    if cluster.runtime_class:
        pod["runtimeClassName"] = cluster.runtime_class
    if cluster.node_selector:
        pod["nodeSelector"] = dict(cluster.node_selector)
    pod.update({
        # GPU pools are commonly tainted so that only pods asking for GPUs land there.
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        # A Service named vllm-turing would otherwise inject VLLM_TURING_PORT=tcp://... and its
        # siblings, names vLLM warns about (and VLLM_PORT-style names it misreads).
        "enableServiceLinks": False,
        # The server talks to no Kubernetes API: no token in the pod.
        "automountServiceAccountToken": False,
        "securityContext": pod_security(),
        # the preStop delay runs inside the grace: the server still gets STOP_GRACE_S after SIGTERM
        "terminationGracePeriodSeconds": spec.server.stop_grace_s + PRE_STOP_S,
        "initContainers": [_gate_container(spec)],
        "containers": [_container(spec, memory)],
        "volumes": [
            _model_volume(spec),
            {"name": "cache", "persistentVolumeClaim": {"claimName": cache_claim_name(spec)}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": kube_quantity(SHM_SIZE)}},
            # HOME for the non-root uid: what writes under ~ outside the caches (~/.config/vllm)
            {"name": "home", "emptyDir": {"sizeLimit": HOME_SIZE}},
            {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
            # mode 0440: root and group 0 (the pod's gid) read them
            {"name": API_KEY_VOLUME, "secret": {"secretName": API_KEY_SECRET, "defaultMode": 0o440}},
            {"name": HF_TOKEN_VOLUME, "secret": {"secretName": HF_SECRET, "defaultMode": 0o440, "optional": True}},
        ],
    })
    return pod


def _network_policy(spec: UnitSpec) -> dict:
    """Ingress to the server from pods of its own namespace only (podSelector {} without a
    namespaceSelector); the kubelet's probes come from the node, which policies always admit."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": spec.server.name, "labels": labels(spec)},
            "spec": {"podSelector": {"matchLabels": labels(spec)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": {}}],
                                  "ports": [{"port": "http", "protocol": "TCP"}]},
                                 *([keda.interceptor_ingress()] if spec.server.idle_after_s is not None else [])]}}


def _fetch_network_policy(spec: UnitSpec) -> dict:
    """No ingress at all to the fetch Job's pod (it only calls out, to the Hub)."""
    job_labels = {**labels(spec), COMPONENT: "fetch"}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": spec.fetch_name, "labels": job_labels},
            "spec": {"podSelector": {"matchLabels": dict(job_labels)}, "policyTypes": ["Ingress"]}}


def manifests(spec: UnitSpec, env: dict[str, str]) -> list[dict]:
    """The objects, in the order `kubectl apply` wants them (config and storage before the pods)."""
    cluster = spec.cluster
    memory = f"{memory_gib(spec)}Gi"
    meta = {"name": spec.server.name, "labels": labels(spec)}
    # One replica: its node mounts the claim alone. More: every node mounts it at once.
    access = "ReadWriteOnce" if cluster.replicas == 1 else "ReadWriteMany"
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": config_map_name(spec), "labels": meta["labels"]},
         "data": env},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": cache_claim_name(spec), "labels": meta["labels"]},
         "spec": {"accessModes": [access], "resources": {"requests": {"storage": CACHE_CLAIM_SIZE}}}},
        # a hostPath model folder is each node's own: `build.py model fetch` there, not a Job on some node
        *([_fetch_job(spec, memory), _fetch_network_policy(spec)] if cluster.model_volume == "pvc" else []),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": cluster.replicas,
                  "selector": {"matchLabels": meta["labels"]},
                  # No spare GPU is assumed: replace one pod at a time, old one out first.
                  "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                  "template": {"metadata": {"labels": meta["labels"]}, "spec": _pod_spec(spec, memory)}}},
        # A node drain takes one replica at a time, so the others keep serving (one replica: a drain
        # has nothing to keep and a budget would only block it).
        *([{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": meta["labels"]}}}] if cluster.replicas > 1 else []),
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"type": "ClusterIP", "selector": meta["labels"],
                  "ports": [{"name": "http", "port": spec.host.port, "targetPort": "http", "protocol": "TCP"}]}},
        _network_policy(spec),
        *keda.keda_objects(spec, labels(spec), cluster.prometheus_url),
    ]


def _secret_problems(where: str, name: str, value: str) -> list[str]:
    if SECRET_VALUE.search(value):
        return [f"{where}: {name} carries what looks like a token"]
    # NAME_FILE is Docker's convention for the path of a secret's file (API_KEY_FILE), NAME_PATH
    # huggingface_hub's (HF_TOKEN_PATH): a path, not a secret
    if value and SECRET_NAME.search(name) and not name.endswith(("_FILE", "_PATH")):
        return [f"{where}: {name} is a secret given in plain text"]
    return []


def _pod_containers(doc: dict) -> list[dict]:
    return doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []


def manifest_problems(docs: list[dict]) -> list[str]:
    """What the OpenAPI schema accepts but this service must not have, one line each."""
    problems = []
    for doc in docs:
        kind = doc.get("kind")
        if kind == "ConfigMap":
            for name, value in (doc.get("data") or {}).items():
                problems += _secret_problems("ConfigMap", name, str(value))
        for container in _pod_containers(doc) if kind == "Deployment" else []:
            where = f"container {container.get('name')}"
            gpus = container.get("resources", {}).get("limits", {}).get(GPU_RESOURCE)
            if not isinstance(gpus, int) or gpus < 1:
                problems.append(f"{where}: no {GPU_RESOURCE} limit (found {gpus!r}); the pod would start without a GPU")
            for probe in PROBES:
                found = container.get(probe) or {}
                if probe == "readinessProbe":
                    if found.get("exec", {}).get("command") != list(READY_COMMAND):
                        problems.append(f"{where}: {probe} does not run `{' '.join(READY_COMMAND)}` (the served model listed)")
                elif found.get("httpGet", {}).get("path") != HEALTH_PATH:
                    problems.append(f"{where}: {probe} is not an HTTP GET of {HEALTH_PATH}")
            for item in container.get("env") or []:
                if item.get("name") in DEVICE_PLUGIN_OWNS:
                    problems.append(f"{where}: sets {item['name']}, which the device plugin owns")
                if "value" in item:
                    problems += _secret_problems(where, item["name"], str(item["value"]))
            if (container.get("securityContext") or {}).get("privileged"):
                problems.append(f"{where}: privileged; the default variant never is")
    return problems


def to_yaml(docs: list[dict]) -> str:
    """Block-style YAML, each object a document (the serializer quotes what a plain scalar would misread)."""
    return yaml_documents(docs)


# Several servers on one node's GPUs (buildtool/units/servers.py): each pod asks for its GPUs, so
# two pods share a card only where the device plugin advertises it more than once.
SHARING_NOTE = ("Several servers: one Deployment per server, each with its own ConfigMap, cache claim and Service.",
                "Pods sharing a card need the NVIDIA device plugin's time-slicing (sharing.timeSlicing.replicas at",
                f"least the servers per card); each server's GPU_MEMORY_UTILIZATION is set below, summing to <= {CARD_BUDGET}.")


def render_kubernetes(spec: UnitSpec, env: dict[str, str], *others: tuple[UnitSpec, dict[str, str]],
                      pod_monitor: bool | None = None, owners: tuple[str, ...] = ()) -> str:
    """The manifest file of one server, or of several (`others`), with the monitoring objects unless
    `pod_monitor` is None. NamespaceClash (one line naming both `owners`, the servers' env files) when
    two objects of one kind would have one name; ValueError with every problem when the policy refuses it."""
    servers = ((spec, env), *others)
    owned = [(owner, doc) for (each, each_env), owner in zip(servers, owners or [s.server.name for s, _ in servers])
             for doc in manifests(each, each_env)]
    watching = () if pod_monitor is None else monitoring.kubernetes_note(pod_monitor)
    owned += [] if pod_monitor is None else [(namespace.MONITORING_OWNER, doc) for doc in
                                             monitoring.kubernetes_objects(pod_monitor, LABELS)]
    namespace.refuse_clashes(namespace.cluster_claims(owned))
    docs = [doc for _, doc in owned]
    if problems := manifest_problems(docs):
        raise ValueError("; ".join(problems))
    sharing = [*SHARING_NOTE, *(f"{each.server.name}: {memory_gib(each)} GiB of memory per replica, GPU_MEMORY_UTILIZATION "
                                f"{dict(each.server.settings)['GPU_MEMORY_UTILIZATION']}"
                                for each, _ in servers)] if others else []
    cluster = spec.cluster
    key = [f"API key (required): the Secret {API_KEY_SECRET} mounted at {API_KEY_PATH} (API_KEY_FILE); create it with",
           f"  kubectl create secret generic {API_KEY_SECRET} --from-file="
           + shlex.quote(f"{API_KEY_SECRET}={spec.host.api_key_file or 'FILE'}"),
           f"Hub token (optional): the Secret {HF_SECRET} mounted at {HF_TOKEN_DIR} ({ENV_HF_TOKEN_PATH}); create it with",
           f"  kubectl create secret generic {HF_SECRET} --from-file={HF_TOKEN}=FILE"]
    baseline = (["hostPath model volume: the pods meet the Baseline Pod Security Standard, not Restricted",
                 "(which forbids hostPath); use a claim (--model-volume pvc) for a Restricted namespace."]
                if cluster.model_volume == "hostPath" else [])
    sizing = [f"CPUs per replica: {cpu_cores(spec)} (--cpus; default {SERVER_CPUS} + {CPUS_PER_GPU} per GPU)",
              f"memory per replica: {memory_gib(spec)} GiB = staging {cluster.weight_bytes / 2**30:.2f} GiB of "
              "weights (entrypoint/checks/memory.py)",
              f"plus {SHM_ALLOWANCE_PER_GPU // 2**30} GiB of /dev/shm per GPU; "
              f"{cluster.replicas} replica(s) of {gpus_per_replica(spec)} GPU(s)"]
    return "".join(comment(line) for line in (*HEADER, *key, *baseline, *(sharing or sizing), *watching)) + to_yaml(docs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def _weight_bytes(args: argparse.Namespace) -> int:
    if (args.weights_gib is None) == (args.weights_from is None):
        raise Problem("--kubernetes needs the model's size to size the memory request, found "
                         f"{'both' if args.weights_gib is not None else 'neither'} of --weights-gib and --weights-from; "
                         "pass one: --weights-from DIR (a local copy) or --weights-gib N", exit_code=2)
    if args.weights_from is not None:
        try:
            return read_model_dir(str(args.weights_from)).weight_bytes
        except Problem as problem:
            raise Problem(f"--weights-from: {problem}; {problem.fix}", exit_code=2) from None
    return int(args.weights_gib * 2**30)


def spec_from_args(args: argparse.Namespace, weight_bytes: int | None = None) -> UnitSpec:
    """The spec for a cluster: nothing of this host is read but the --weights-from directory
    (`weight_bytes`, when the caller sized the model, stands for --weights-gib / --weights-from)."""
    if args.gpus is not None and args.gpus.count is None:
        raise Problem("--gpus: in a cluster the device plugin picks the GPUs; give the number of GPUs per "
                         "replica, e.g. --gpus 2", exit_code=2)
    gpus = tuple(range(args.gpus.count)) if args.gpus is not None else (0,)
    if args.model_volume == "hostPath" and not args.model_dir.startswith("/"):
        raise Problem(f"--model-dir {args.model_dir!r}: a hostPath volume needs an absolute path on the nodes, "
                         "e.g. --model-dir /srv/models", exit_code=2)
    cluster = ClusterValues(replicas=args.replicas, weight_bytes=_weight_bytes(args) if weight_bytes is None else weight_bytes,
                            model_volume=args.model_volume, model_claim=args.model_claim,
                            runtime_class=args.runtime_class, node_selector=tuple(args.node_selector),
                            cpus=args.cpus, prometheus_url=args.prometheus_url)
    host = HostValues(gpu_indices=gpus, model_dir=args.model_dir, image=args.image, port=args.port,
                      api_key_file=args.api_key_file)
    return UnitSpec(host, cluster=cluster)
