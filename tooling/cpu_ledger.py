"""Where a command's CPU time goes on this host (bench/ci_cpu): sampled every few seconds while it runs,
per process from /proc and per container from its cgroup's cpuacct counter (cgroup v1, Docker's
cgroupfs driver: /sys/fs/cgroup/cpuacct/docker/<id>, and BuildKit's build steps under docker/buildkit/).

A process is charged to the first of itself and its ancestors that a rule names (a pytest of the serving
tier, another pytest, build.py, the Docker engine); a process in a container is charged to its
container's image, or to "build steps" for BuildKit's. A process that starts and ends between two
samples is not seen; the machine's own counter (/proc/stat) is the total, and what no sample saw is
reported as "unseen".
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
DOCKER_CGROUP = "/docker/"
BUILDKIT_CGROUP = "/docker/buildkit/"
TICKS_PER_S = os.sysconf("SC_CLK_TCK")

HOST_RULES = (  # (words all in a process's argv, category); the first rule an ancestor meets wins
    (("pytest", "tests/serving"), "serving tier (pytest and its host children)"),
    (("build.py",), "build.py on the host (BuildKit's steps apart)"),
    (("pytest",), "unit, docs, image and gpu tiers (pytest and its host children)"),
    (("dockerd",), "Docker engine"),
    (("containerd",), "Docker engine"),
    (("buildkit",), "Docker engine"),
)
BUILD_STEPS = "build steps (BuildKit)"
OTHER_HOST = "other host processes"
UNSEEN = "unseen (processes that lived between two samples)"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    seconds: float          # user + system CPU so far
    argv: tuple[str, ...]
    cgroup: str             # its cpuacct cgroup path ("/" on the host)


def host_category(pid: int, procs: dict[int, Proc]) -> str:
    """The category of a host process: the first rule met walking from it up to init."""
    seen = set()
    while pid in procs and pid not in seen:
        seen.add(pid)
        words = " ".join(procs[pid].argv)
        for needed, category in HOST_RULES:
            if all(word in words for word in needed):
                return category
        pid = procs[pid].ppid
    return OTHER_HOST


def container_id(cgroup: str) -> str | None:
    """The container id of a cgroup path under Docker's, None for BuildKit's and the host's."""
    if not cgroup.startswith(DOCKER_CGROUP) or cgroup.startswith(BUILDKIT_CGROUP):
        return None
    return cgroup[len(DOCKER_CGROUP):].split("/")[0] or None


@dataclass
class Ledger:
    """Core-seconds per category, from successive samples (add_sample)."""

    name_of_container: object = None            # id -> category, for containers (the image's name)
    seconds: dict[str, float] = field(default_factory=dict)
    timeline: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    _last_proc: dict[int, float] = field(default_factory=dict)
    _last_cgroup: dict[str, float] = field(default_factory=dict)

    def add_sample(self, at: float, procs: dict[int, Proc], cgroups: dict[str, float]) -> dict[str, float]:
        """Charges what each process and container used since the last sample; returns this interval's
        core-seconds per category."""
        interval: dict[str, float] = {}

        def charge(category: str, seconds: float) -> None:
            if seconds > 0:
                interval[category] = interval.get(category, 0.0) + seconds

        first = not (self._last_cgroup or self._last_proc)  # the baseline: nothing charged yet
        for pid, proc in procs.items():
            if proc.cgroup.startswith(DOCKER_CGROUP):
                continue  # counted whole by its cgroup below
            # a process (or container) new since the last sample: all its time is this interval's
            before = self._last_proc.get(pid, proc.seconds if first else 0.0)
            charge(host_category(pid, procs), proc.seconds - before)
        for path, used in cgroups.items():
            before = self._last_cgroup.get(path, used if first else 0.0)
            ident = container_id(path)
            category = BUILD_STEPS if path.startswith(BUILDKIT_CGROUP) else self._container(ident)
            charge(category, used - before)
        self._last_proc = {pid: proc.seconds for pid, proc in procs.items()}
        self._last_cgroup = dict(cgroups)
        for category, used in interval.items():
            self.seconds[category] = self.seconds.get(category, 0.0) + used
        self.timeline.append((at, interval))
        return interval

    def _container(self, ident: str | None) -> str:
        name = self.name_of_container(ident) if (self.name_of_container and ident) else None
        return f"container of {name}" if name else "container (gone before it was named)"


def read_procs(root: Path = Path("/proc")) -> dict[int, Proc]:
    procs = {}
    for entry in root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = tuple((entry / "cmdline").read_bytes().decode(errors="replace").split("\0"))
            cgroup = next((line.split(":", 2)[2] for line in (entry / "cgroup").read_text().splitlines()
                           if ":cpuacct" in line or line.split(":")[1:2] == ["cpu,cpuacct"]), "/")
        except (OSError, StopIteration, IndexError):
            continue  # ended while read
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(entry.name)] = Proc(int(entry.name), int(fields[1]),
                                      (int(fields[11]) + int(fields[12])) / TICKS_PER_S, argv, cgroup)
    return procs


def read_cgroups(root: Path = CPUACCT) -> dict[str, float]:
    """Seconds of CPU per Docker and BuildKit leaf cgroup (container or build step)."""
    found = {}
    for usage in root.glob("docker/**/cpuacct.usage"):
        path = "/" + str(usage.parent.relative_to(root))
        if path in ("/docker", "/docker/buildkit"):
            continue
        try:
            found[path] = int(usage.read_text()) / 1e9
        except (OSError, ValueError):
            continue
    return found


def machine_busy_s() -> float:
    """Seconds of CPU the whole machine has used (all cores, idle and iowait left out)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS_PER_S


def docker_namer():
    """id -> image name of a running or stopped container, through the Docker API (cached)."""
    import docker

    client, names = docker.from_env(), {}

    def name(ident: str) -> str | None:
        if ident not in names:
            try:
                container = client.containers.get(ident)
                tags = container.image.tags if container.image else []
                names[ident] = tags[0] if tags else container.attrs.get("Config", {}).get("Image")
            except Exception:  # noqa: BLE001  (gone, or the engine busy: unnamed, not fatal)
                return None
        return names[ident]

    return name


def sample_forever(ledger: Ledger, every_s: float, running) -> None:
    while running():
        ledger.add_sample(time.monotonic(), read_procs(), read_cgroups())
        time.sleep(every_s)
