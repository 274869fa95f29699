"""What the Kubernetes objects must not have although the OpenAPI schema accepts it, and the refusal.

Judged on the objects themselves (buildtool/units/kubernetes.py `owned_objects`), before `build.py
units` renders and writes them; the tests apply the same checks to broken copies and to what
`kubectl kustomize` builds from the shipped overlay. One line a problem: a Deployment's container
without a GPU limit, probes other than the service's, a variable the device plugin owns, a privileged
container, or a secret in plain text in the pods' environment or the env file's ConfigMap.
"""
from __future__ import annotations

import re

from buildtool.units.kubernetes import DEVICE_PLUGIN_OWNS, GPU_RESOURCE, HEALTH_PATH, SECRET_REFERENCES
from door.problem import UsageError
from entrypoint.ready import COMMAND as READY_COMMAND

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
SECRET_NAME = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIALS?)($|_)", re.IGNORECASE)
SECRET_VALUE = re.compile(r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{20,}")


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


def refusal(env_names: str, problems: str) -> UsageError:
    """The one line naming the env files, the problems and where a secret goes instead."""
    secrets = ", ".join(f"{name} in the Secret {secret}" for name, (secret, _) in SECRET_REFERENCES.items())
    return UsageError(f"{env_names}: {problems}; a secret goes in a Secret ({secrets}; docs/fleet.md), "
                      "never in the env file's ConfigMap")


def refuse_manifests(docs: list[dict], env_names: str) -> None:
    """The refusal (UsageError, exit 2) when the objects have any problem."""
    if problems := manifest_problems(docs):
        raise refusal(env_names, "; ".join(problems))
