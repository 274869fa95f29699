"""Where a command's CPU time goes on this host (bench/ci_cpu): sampled every few seconds while it runs,
per process from /proc and per container from its cgroup's cpuacct counter (cgroup v1, Docker's
cgroupfs driver: /sys/fs/cgroup/cpuacct/docker/<id>, and BuildKit's build steps under docker/buildkit/).

A process is charged to the first of itself and its ancestors that a rule names (a pytest of the serving
tier, another pytest, build.py), up to the measured command; one outside the command's tree (the Docker
engine, other work on the host) is charged apart. A process in a container is charged to its
container's image, or to "build steps" for BuildKit's: containers are not told apart by who started them. A process that ends between two samples is
still counted when its parent waits for it: the parent's children time grows by the child's whole
time, less what earlier samples already charged for the child; the engine and processes outside the
command are charged their own time only (OWN_TIME_ONLY). What no sample saw (a process whose parent
never waits for it, or is one of those) is the machine's own counter (/proc/stat) less the rest: "unseen".
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from door import files

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ENGINE_CGROUP = "docker"  # dockerd's --cgroup-parent (its default); BuildKit's steps are under its buildkit/
TICKS_PER_S = os.sysconf("SC_CLK_TCK")

HOST_RULES = (  # (words all in a process's argv, category); the first rule an ancestor meets wins
    (("pytest", "tests/serving"), "serving tier (pytest and its host children)"),
    (("build.py",), "build.py on the host (BuildKit's steps apart)"),
    (("pytest",), "unit, docs, image and gpu tiers (pytest and its host children)"),
)
ENGINE = "Docker engine (dockerd, containerd, their shims and proxies)"
ENGINE_PROGRAMS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "docker-proxy", "runc")
BUILD_STEPS = "build steps (BuildKit)"
OTHER_HOST = "other host processes of the command"
OUTSIDE = "host processes outside the command (other work on the host)"
SAMPLER = "bench/ci_cpu itself (sampling)"
UNSEEN = "unseen (processes that lived between two samples)"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    seconds: float          # user + system CPU so far
    argv: tuple[str, ...]
    cgroup: str             # its cpuacct cgroup path ("/" on the host)
    children_seconds: float = 0.0  # the CPU of its children it has waited for (cutime + cstime)

    @property
    def total(self) -> float:
        return self.seconds + self.children_seconds

    @property
    def on_host(self) -> bool:
        return self.cgroup in ("/", "")  # else in a container (of any engine) or a build step


# Categories charged their processes' own time only, not the time of the children they wait for. The
# engine's children are containers and build steps, which their cgroups count. Outside the command, the
# waiting parent is init (or a subreaper) reaping orphans, the engine's shims among them: a shim reaped
# after the last sample that saw it brings its container's whole time along, which the container's cgroup
# already counted. What such children used on the host itself is left to "unseen".
OWN_TIME_ONLY = (ENGINE, OUTSIDE)


def host_category(pid: int, procs: dict[int, Proc], root: int | None = None) -> str:
    """The category of a host process: the first rule met walking from it up to `root` (the measured
    command; None: init). A process outside root's tree (another user of the host) is OUTSIDE; the
    Docker engine's programs are ENGINE whoever started them."""
    if pid in procs and procs[pid].argv and Path(procs[pid].argv[0]).name in ENGINE_PROGRAMS:
        return ENGINE
    chain, seen = [], set()
    while pid in procs and pid not in seen:
        seen.add(pid)
        chain.append(procs[pid])
        if pid == root:
            break
        pid = procs[pid].ppid
    if root is not None and (not chain or chain[-1].pid != root):
        return OUTSIDE
    for proc in chain:
        words = " ".join(proc.argv)
        for needed, category in HOST_RULES:
            if all(word in words for word in needed):
                return category
    return OTHER_HOST


def container_id(cgroup: str, parent: str = ENGINE_CGROUP) -> str | None:
    """The container id of a cgroup path under the engine's, None for BuildKit's and the host's."""
    if not cgroup.startswith(f"/{parent}/") or cgroup.startswith(f"/{parent}/buildkit/"):
        return None
    return cgroup[len(parent) + 2:].split("/")[0] or None


@dataclass
class Ledger:
    """Core-seconds per category, from successive samples (add_sample)."""

    name_of_container: object = None            # id -> category, for containers (the image's name)
    root: int | None = None                     # the measured command's pid: host processes outside its tree apart
    engine_cgroup: str = ENGINE_CGROUP          # the engine measured: other engines' containers are not charged
    sampler: int = field(default_factory=os.getpid)  # this process: its own reading of /proc, charged apart
    seconds: dict[str, float] = field(default_factory=dict)
    timeline: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    _last_proc: dict[int, Proc] = field(default_factory=dict)
    _last_cgroup: dict[str, float] = field(default_factory=dict)
    _category: dict[int, str] = field(default_factory=dict)

    def _root_category(self, procs: dict[int, Proc]) -> str:
        if self.root not in self._category and self.root in procs:
            self._category[self.root] = host_category(self.root, procs, self.root)
        return self._category.get(self.root, OTHER_HOST)

    def follow(self, root: int) -> None:
        """From now on, host processes outside root's tree are OUTSIDE (categories are judged anew)."""
        self.root = root
        self._category.clear()

    def add_sample(self, at: float, procs: dict[int, Proc], cgroups: dict[str, float]) -> dict[str, float]:
        """Charges what each process and container used since the last sample; returns this interval's
        core-seconds per category (a category may be negative in one interval: see below)."""
        interval: dict[str, float] = {}

        def charge(category: str, seconds: float) -> None:
            if seconds:
                interval[category] = interval.get(category, 0.0) + seconds

        first = not (self._last_cgroup or self._last_proc)  # the baseline: nothing charged yet
        for pid, proc in procs.items():
            if not proc.on_host:
                continue  # counted whole by its cgroup below
            if pid not in self._category:
                self._category[pid] = host_category(pid, procs, self.root)
            # a process new since the last sample: all its time (and its waited-for children's) is this interval's
            last = self._last_proc.get(pid, proc if first else Proc(pid, proc.ppid, 0.0, (), "/"))
            own, children = proc.seconds - last.seconds, proc.children_seconds - last.children_seconds
            if pid == self.sampler:  # its own work apart; the command it waits for, the command's
                charge(SAMPLER, own)
                charge(self._root_category(procs), children)
            elif self._category[pid] in OWN_TIME_ONLY:
                charge(self._category[pid], own)
            else:
                charge(self._category[pid], own + children)
        known = dict(self._category)  # a parent that ended too keeps its category for its children
        for pid, gone in self._last_proc.items():
            if pid in procs:
                continue
            parent = self._last_proc.get(gone.ppid)
            category = known.get(pid)
            self._category.pop(pid, None)
            parent_category = known.get(gone.ppid)
            if (parent is not None and parent.on_host
                    and (gone.ppid == self.sampler or parent_category not in OWN_TIME_ONLY)
                    and (category is not None or not gone.on_host)):
                # its parent's children time now holds its whole time, of which the samples so far charged
                # its total at the last sample (to it, or to its container): only the rest is new. Charged to
                # the parent's category, where the parent's growth went.
                charge(self._root_category(procs) if gone.ppid == self.sampler
                       else parent_category or OTHER_HOST, -gone.total)
        for path, used in cgroups.items():
            before = self._last_cgroup.get(path, used if first else 0.0)
            ident = container_id(path, self.engine_cgroup)
            category = BUILD_STEPS if path.startswith(f"/{self.engine_cgroup}/buildkit/") else self._container(ident)
            charge(category, used - before)
        self._last_proc = dict(procs)
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
        stat, cmdline, cgroups = (files.read_system(str(entry / name)) for name in ("stat", "cmdline", "cgroup"))
        if stat is None or cmdline is None or cgroups is None:
            continue  # ended while read
        try:
            argv = tuple(cmdline.split("\0"))
            cgroup = next((line.split(":", 2)[2] for line in cgroups.splitlines()
                           if ":cpuacct" in line or line.split(":")[1:2] == ["cpu,cpuacct"]), "/")
        except (StopIteration, IndexError):
            continue  # ended while read
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(entry.name)] = Proc(int(entry.name), int(fields[1]),
                                      (int(fields[11]) + int(fields[12])) / TICKS_PER_S, argv, cgroup,
                                      (int(fields[13]) + int(fields[14])) / TICKS_PER_S)
    return procs


def read_cgroups(parent: str = ENGINE_CGROUP, root: Path = CPUACCT) -> dict[str, float]:
    """Seconds of CPU per container and BuildKit build step of the engine whose cgroup parent is `parent`."""
    found = {}
    for usage in root.glob(f"{parent}/**/cpuacct.usage"):
        path = "/" + str(usage.parent.relative_to(root))
        if path in (f"/{parent}", f"/{parent}/buildkit"):
            continue
        try:
            found[path] = int(files.read_system(str(usage)) or "") / 1e9
        except ValueError:
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
        ledger.add_sample(time.monotonic(), read_procs(), read_cgroups(ledger.engine_cgroup))
        time.sleep(every_s)
