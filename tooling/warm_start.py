"""Cold and warm starts of the serving tier's stack with compilation on, shared by
tests/serving/test_serving_path.py and bench/warm_start, so the figures and the tests run one path.

A cold start runs on fresh volumes; `docker compose down` then removes the container (and with it
everything outside the volumes: /tmp, the inductor default cache) but keeps the named volumes, so
the warm start finds only what VLLM_CACHE_ROOT's volume kept. The env file and the settings stay
the same between the two (vLLM keys its compile cache by a hash of the config and environment).
Time to healthy is measured to the first 200 from /health through the published port, polled every
half second (Docker's own health status moves only at the healthcheck's 30 s interval).
"""
from __future__ import annotations

import dataclasses
import re
import time

from tooling import serving_stack
from buildtool.endpoint.client import EndpointClient, EndpointError

# The shipped CPU settings with compilation on: the only change is ENFORCE_EAGER.
COMPILE_SETTINGS = {**serving_stack.CPU_SETTINGS, "ENFORCE_EAGER": "0"}
# vLLM's line (vllm/compilation/decorators.py) for an AOT artefact found but not loadable: it compiles again.
UNLOADABLE = re.compile(r"Compiling model again due to a load failure from (/\S+), reason: (.*)$", re.M)
REPORT = re.compile(r"vllm-turing: started in (\d+\.\d) s: (.*)$", re.M)
PHASE = re.compile(r"([A-Za-z][A-Za-z ]*?) (\d+\.\d) s(?: \(([^()]*)\))?(?:, |$)")
PREFLIGHT = re.compile(r"\bchecks took (\d+\.\d\d) s")
POLL_S = 0.5


# The vehicle compiles without AOT (base/cpu/Dockerfile says why): inductor's caches sit here.
INDUCTOR_CACHE = "/cache/vllm/inductor"


@dataclasses.dataclass(frozen=True)
class Start:
    seconds: float  # `docker compose up -d` to the first 200 from /health
    logs: str
    inductor_files: dict[str, tuple[int, str]]  # INDUCTOR_CACHE's files after the start: path -> (size, mtime)

    @property
    def report(self) -> tuple[float, dict[str, tuple[float, str]]] | None:
        """The start report's total and {phase: (seconds, note)}, or None when it is not in the log."""
        match = REPORT.search(self.logs)
        if not match:
            return None
        phases = {phase.group(1): (float(phase.group(2)), phase.group(3) or "")
                  for phase in PHASE.finditer(match.group(2))}
        return float(match.group(1)), phases

    def paths(self, pattern: re.Pattern) -> list[str]:
        return pattern.findall(self.logs)


def written_by(before: dict[str, tuple[int, str]], after: Start) -> list[str]:
    """The inductor cache files `after`'s start wrote: new ones and ones it rewrote, against the cache
    as it stood before (`inductor_files`, or a start's)."""
    return sorted(path for path, stat in after.inductor_files.items() if before.get(path) != stat)


def inductor_files(stack: serving_stack.Stack) -> dict[str, tuple[int, str]]:
    """The files under INDUCTOR_CACHE in the running container's VLLM_CACHE_ROOT volume, read through
    a second container of the same image that mounts the volume read-only."""
    root, volume = cache_root_and_volume(stack)
    root = INDUCTOR_CACHE.removeprefix(root)
    listing = read_volume(stack.image, volume, "sh", "-c",
                          f"cd /volume{root} 2>/dev/null && find . -type f -printf '%s %T@ %p\\n' || true")
    files = {}
    for line in listing.splitlines():
        size, mtime, path = line.split(" ", 2)
        files[path] = (int(size), mtime)
    return files


def read_volume(image: str, volume: str, entrypoint: str, *args: str) -> str:
    """What `entrypoint args` prints in a container of `image` that mounts `volume` read-only at /volume
    (no network; the server's own container may be down)."""
    return serving_stack.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", entrypoint,
                              "-v", f"{volume}:/volume:ro", image, *args]).stdout


def wait_http_healthy(stack: serving_stack.Stack, started: float, timeout: float) -> float:
    """Seconds from `started` to the first 200 from /health; raises with the logs if the container
    stops or the time runs out."""
    client = EndpointClient(stack.url)
    while time.monotonic() - started < timeout:
        try:
            if client.get("/health", deadline_s=2).status == 200:
                return time.monotonic() - started
        except EndpointError:
            pass
        state = stack.inspect()["State"]
        if state["Status"] in ("exited", "dead") or state.get("Restarting"):
            break
        time.sleep(POLL_S)
    raise RuntimeError(f"/health not 200 after {time.monotonic() - started:.0f} s "
                       f"(state {stack.inspect()['State'].get('Status')}); logs:\n{stack.logs()[-4000:]}")


def timed_start(stack: serving_stack.Stack, timeout: float) -> Start:
    started = time.monotonic()
    stack.compose("up", "-d", "--no-build", "--pull", "never")
    seconds = wait_http_healthy(stack, started, timeout)
    return Start(seconds, stack.logs(), inductor_files(stack))


def restart_on_kept_volumes(stack: serving_stack.Stack, timeout: float) -> Start:
    """`docker compose down` (the container goes, the named volumes stay), then a timed start."""
    stack.compose("down", timeout=180)
    return timed_start(stack, timeout)


def cache_root_and_volume(stack: serving_stack.Stack) -> tuple[str, str]:
    """The container's VLLM_CACHE_ROOT and the named volume mounted there (as the units name it)."""
    container = stack.inspect()
    root = dict(item.split("=", 1) for item in container["Config"]["Env"])["VLLM_CACHE_ROOT"]
    return root, next(m["Name"] for m in container["Mounts"] if m["Type"] == "volume" and m["Destination"] == root)


def drop_cache_volume(stack: serving_stack.Stack) -> None:
    """`docker compose down`, then the VLLM_CACHE_ROOT volume removed (the others kept)."""
    _, volume = cache_root_and_volume(stack)
    stack.compose("down", timeout=180)
    serving_stack.run(["docker", "volume", "rm", volume], timeout=120)


def compile_stack(image: str, models_dir, workdir, project: str) -> serving_stack.Stack:
    return serving_stack.Stack(project=project, image=image, models_dir=models_dir, workdir=workdir,
                               settings=dict(COMPILE_SETTINGS))


# `docker compose logs -t`: "<service> | <RFC 3339 time> (<process> pid=N) LEVEL MM-DD hh:mm:ss [file:line] message"
LOG_LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) \((?:[^()]*) pid=(\d+)\) +[A-Z]+ [^\[]*\[[^\]]+\] (.*)$")


def epoch_pid_lines(stamped_logs: str) -> str:
    """vLLM's lines of a `docker compose logs -t` capture as `epoch-seconds pid message`, the form
    tests/unit/data/vllm_cpu_0.32.0_start_*.log keep (the real records the unit tier reads)."""
    from datetime import datetime

    out = []
    for line in stamped_logs.splitlines():
        match = LOG_LINE.search(line)
        if match:
            stamp, pid, message = match.groups()
            seconds = datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()
            out.append(f"{seconds:.6f} {pid} {message}")
    return "\n".join(out) + "\n"
