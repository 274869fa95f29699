"""Reads compose services and Quadlet units into one comparable shape, so tests can prove the two
carry the same devices, mounts and settings. Accepts both the files as written and the normalised
output of `docker compose config --format json` (durations as 5m0s, sizes in bytes, devices as maps)."""
from __future__ import annotations

import re
import shlex

_DURATION = re.compile(r"(\d+)(h|m|s)")
_SIZE = re.compile(r"(\d+)([kmg]?)b?", re.I)


# The API key's wiring, written commented out in compose.yaml and the Quadlet unit.
_KEY_WIRING = re.compile(
    r"^(\s*)# (\s*(?:secrets:|vllm-api-key:|file:|API_KEY_FILE:|Secret=|Environment=API_KEY_FILE=))", re.M)


def uncommented(text: str) -> str:
    """The unit with the API key's wiring uncommented, as its comments tell a user to do."""
    return _KEY_WIRING.sub(r"\1\2", text)


def seconds(text: str | int) -> int:
    if isinstance(text, int):
        return text
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in _DURATION.findall(text))


def size_bytes(text: str | int) -> int:
    match = _SIZE.fullmatch(str(text))
    return int(match.group(1)) * 1024 ** " kmg".index((match.group(2) or " ").lower())


def interpolate_defaults(text: str) -> str:
    """What compose does with ${VAR:-default} when VAR is unset (for reading files without compose)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text)


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """systemd unit file -> section -> key -> values (keys repeat, so lists)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "---")):  # "---name---": quadlet -dryrun's file marker
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def _mount(source: str, target: str, read_only: bool) -> tuple[str, str, bool]:
    return (source, target, read_only)


def compose_view(service: dict) -> dict:
    devices = []
    for entry in service.get("devices") or []:
        path = entry["source"] if isinstance(entry, dict) else entry.split(":")[0]
        devices.append(path)
    binds, named = [], []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
            named.append(target)
        elif volume["type"] == "bind":
            binds.append(_mount(volume["source"], volume["target"], bool(volume.get("read_only"))))
        else:
            named.append(volume["target"])
    port = service["ports"][0]
    if isinstance(port, str):
        host_ip, published, target = port.rsplit(":", 2)
    else:
        host_ip, published, target = port["host_ip"], port["published"], port["target"]
    memlock = service["ulimits"]["memlock"]
    health = service["healthcheck"]
    return {
        "devices": sorted(devices),
        "binds": sorted(binds),
        "named_volume_targets": sorted(named),
        "environment": dict(service.get("environment") or {}),
        "port": (host_ip, int(published), int(target)),
        "shm_bytes": size_bytes(service["shm_size"]),
        "memlock": memlock if isinstance(memlock, int) else (memlock["soft"], memlock["hard"]),
        "health_cmd": health["test"][1],
        "health": {key: seconds(health[key]) if key != "retries" else health[key]
                   for key in ("interval", "timeout", "retries", "start_period")},
        "stop_grace_s": seconds(service["stop_grace_period"]),
    }


def quadlet_view(unit: dict[str, dict[str, list[str]]], home: str) -> dict:
    container = unit["Container"]
    binds, named = [], []
    for volume in container.get("Volume", []):
        source, target, *options = volume.split(":")
        if source.startswith(("/", "%h")):
            binds.append(_mount(source.replace("%h", home, 1), target, "ro" in options))
        else:
            named.append(target)
    host_ip, published, target = container["PublishPort"][0].rsplit(":", 2)
    soft, hard = container["Ulimit"][0].removeprefix("memlock=").split(":")
    return {
        "devices": sorted(d.lstrip("-") for d in container.get("AddDevice", [])),
        "binds": sorted(binds),
        "named_volume_targets": sorted(named),
        "environment": dict(e.split("=", 1) for e in container.get("Environment", [])),
        "port": (host_ip, int(published), int(target)),
        "shm_bytes": size_bytes(container["ShmSize"][0]),
        "memlock": -1 if soft == hard == "-1" else (int(soft), int(hard)),
        "health_cmd": container["HealthCmd"][0],
        "health": {"interval": seconds(container["HealthInterval"][0]),
                   "timeout": seconds(container["HealthTimeout"][0]),
                   "retries": int(container["HealthRetries"][0]),
                   "start_period": seconds(container["HealthStartPeriod"][0])},
        "stop_grace_s": int(container["StopTimeout"][0]),
    }


def podman_run_argv(quadlet_output: str) -> list[str]:
    """The `podman run` argv of the ExecStart= line that `quadlet -dryrun` prints."""
    line = next(l for l in quadlet_output.splitlines() if l.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def option_values(argv: list[str], *names: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in names]


def podman_env_file_standin(text: str) -> dict[str, str]:
    """What `podman run --env-file` (Quadlet's EnvironmentFile=) sets from an env file, for the lines
    buildtool/units/envfile.py accepts; podman is not installed on the test hosts. containers/common's
    pkg/env ParseFile: each line trimmed of leading blanks and tabs; empty lines and lines starting with
    '#' skipped; the name up to the first '=', the value everything after it, as it is."""
    values = {}
    for line in text.split("\n"):
        line = line.lstrip(" \t")
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def podman_environment(argv: list[str], read_file) -> dict[str, str]:
    """The environment a `podman run` argv gives its container: each --env-file (read_file(path) -> text)
    in order, then each --env, the later overriding the earlier as podman applies them."""
    environment: dict[str, str] = {}
    for path in option_values(argv, "--env-file"):
        environment.update(podman_env_file_standin(read_file(path)))
    for pair in option_values(argv, "--env", "-e"):
        name, _, value = pair.partition("=")
        environment[name] = value
    return environment
