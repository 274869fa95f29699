"""The serving tier's stack: the CPU vehicle, a tiny Gemma 4, and the repository's own compose.yaml
with an override that takes away only what a CPU machine cannot have. Shared by tests/serving and
bench/serving_tier, so the figures and the tests run the same path.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from buildtool.units import envfile
from contract import pins
from door import files
from door import children

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "compose.yaml"
ENV_FILE = REPO / "quadlet" / "vllm-turing.env"
GENERATOR = REPO / "tests" / "serving" / "tiny_gemma4.py"
SERVICE = "vllm"
MODEL_NAME = "tiny-gemma4"
MULTIMODAL_MODEL_NAME = "tiny-gemma4-multimodal"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DRIVER_LIBRARY_DIR = "/usr/local/nvidia/"

# What a user of this vehicle changes in the env file (the override's `environment` wins over the
# shipped env file, which compose still reads). The GPU checks cannot apply without a GPU, so they
# are skipped the ordinary way; model, drafter, disk, memory and port run for real. vLLM's CPU
# backend sizes its KV cache from --kv-cache-memory-bytes (64 MiB here), not the GPU fraction.
# Everything else, the tool and reasoning parsers included, comes from the shipped env file: the
# smoke contract is proven for its defaults.
CPU_SETTINGS = {
    "MODEL": f"/models/{MODEL_NAME}",
    "ENFORCE_EAGER": "1",
    "SKIP_CHECKS": "devices,driver,torch,clamp,fit",
    "VLLM_EXTRA_ARGS": f"--kv-cache-memory-bytes {64 * 2**20}",
}


def read_env_file(path: Path = ENV_FILE) -> dict[str, str]:
    """KEY=value lines of the env file, read as `build.py units` reads it (buildtool/units/envfile.py)."""
    return envfile.read(path, str(path)).values


def mount_target(volume) -> str:
    """Where a compose service's volume entry (short "source:target[:mode]" or long syntax) mounts."""
    if isinstance(volume, dict):
        return volume.get("target", "")
    return volume.split(":")[1] if ":" in volume else volume


def override_text(compose: dict, environment: dict[str, str], service_lines: tuple[str, ...] = (),
                  name: str = SERVICE, unmounted: tuple[str, ...] = ()) -> str:
    """The test override of the shipped service (or the rendered service `name`): no device nodes, no
    driver library mounts and no memlock limit (containers here cannot raise RLIMIT_MEMLOCK:
    CAP_SYS_RESOURCE is withheld), plus the user's settings. Everything else (env file, other
    volumes, port, healthcheck, restart, stop grace, shm size) stays as shipped, but the volumes
    mounted at `unmounted` (a case that mounts something else there in its service_lines)."""
    service = compose["services"][name]
    kept = [v for v in service.get("volumes", [])
            if not mount_target(v).startswith(DRIVER_LIBRARY_DIR) and mount_target(v) not in unmounted]
    ulimits = {k: v for k, v in (service.get("ulimits") or {}).items() if k != "memlock"}
    return "\n".join([
        "services:",
        f"  {name}:",
        "    devices: !reset []",
        f"    volumes: !override {json.dumps(kept)}",
        f"    ulimits: !override {json.dumps(ulimits)}" if ulimits else "    ulimits: !reset {}",
        f"    environment: {json.dumps(environment)}",
        *(f"    {line}" for line in service_lines),
        ""])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(argv: list[str], timeout: float = 600, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = children.run(argv, env=env, timeout_s=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    return proc


def vehicle_given(config) -> str | None:
    """The vehicle image the session was told to test (`--vehicle REF` or $VLLM_TURING_VEHICLE), if any."""
    return config.getoption("--vehicle", default=None) or os.environ.get("VLLM_TURING_VEHICLE")


def vehicle_argv(tag: str = pins.CPU_VEHICLE_TAG) -> list[str]:
    argv = [sys.executable, str(REPO / "build.py"), "vehicle", "--bootstrap", "--tag", tag]
    return argv + (["--ca-cert", str(CA_BUNDLE)] if CA_BUNDLE.is_file() else [])


def build_vehicle(tag: str = pins.CPU_VEHICLE_TAG) -> float:
    """`build.py vehicle` (layers cached after the first build); returns its wall time."""
    started = time.monotonic()
    run(vehicle_argv(tag), timeout=3600)
    return time.monotonic() - started


class VehicleAhead:
    """`build.py vehicle` in the background while the image tier's build runs: on a cold host their
    downloads and the image's fit check overlap instead of following each other. It starts once the OS
    image the two share is there (the image build bootstraps vllm-turing-os:bookworm where nothing can be
    pulled; two bootstraps at once would tag two different OS images) or the image build has ended.
    `wait()`: the vehicle build's wall time; RuntimeError naming its last lines when it failed."""

    def __init__(self, os_image_here, image_build: subprocess.Popen, argv: list[str] | None = None):
        import threading

        self._result: tuple[float, str | None] | None = None
        self.process: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._build, args=(os_image_here, image_build, argv or vehicle_argv()),
                                        daemon=True)
        self._thread.start()

    def _build(self, os_image_here, image_build, argv) -> None:
        while image_build.poll() is None and not os_image_here():
            time.sleep(2)
        started = time.monotonic()
        try:
            self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _, stderr = self.process.communicate(timeout=3600)
            code = self.process.returncode
            failure = None if code == 0 else f"exited {code}: {stderr.strip()[-1500:]}"
        except (OSError, subprocess.TimeoutExpired) as error:
            failure = str(error)
        self._result = (time.monotonic() - started, failure)

    def stop(self) -> None:
        """Ends the build if it still runs (the session ended before the serving tier needed it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self) -> float:
        self._thread.join()
        seconds, failure = self._result
        if failure:
            raise RuntimeError(f"build.py vehicle (started beside the image build) {failure}")
        return seconds


_vehicle_ahead: VehicleAhead | None = None


def start_vehicle_ahead(os_image_here, image_build: subprocess.Popen) -> None:
    global _vehicle_ahead
    _vehicle_ahead = VehicleAhead(os_image_here, image_build)


def vehicle_ahead() -> VehicleAhead | None:
    """The vehicle build the image tier started for this session, if it did."""
    return _vehicle_ahead


def readable_by_all(root: Path) -> None:
    """pytest's folders are 0700 root: the server's uid (the image's own, 10001, or any other) must be
    able to read the model, as a user's model folder must be (docs/deploy.md)."""
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else path.stat().st_mode | 0o444)


def make_tiny_model(image: str, models_dir: Path, multimodal: bool = False) -> Path:
    """The tiny Gemma 4 (MODEL_NAME; with `multimodal`, its vision and audio towers too, MULTIMODAL_MODEL_NAME),
    generated inside the vehicle (it has transformers) into models_dir, as this host's user (the folder
    is theirs), then made readable by every uid."""
    models_dir.mkdir(parents=True, exist_ok=True)
    name = MULTIMODAL_MODEL_NAME if multimodal else MODEL_NAME
    run(["docker", "run", "--rm", "--entrypoint", "python3", "--network", "none",
         "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp",
         "-v", f"{GENERATOR}:/gen/tiny_gemma4.py:ro", "-v", f"{models_dir.resolve()}:/out",
         image, "/gen/tiny_gemma4.py", *(["--multimodal"] if multimodal else []), f"/out/{name}"], timeout=600)
    readable_by_all(models_dir)
    return models_dir / name


HEALTH_POLL_S = 5.0
STREAM_DEADLINE_S = 900.0  # a streamed chat of the serving tier's tests: 1,000 tokens of the tiny model on a loaded host


@dataclass
class Stack:
    """One compose project of the shipped compose.yaml plus the test override."""
    project: str
    image: str
    models_dir: Path
    workdir: Path
    port: int = field(default_factory=free_port)
    settings: dict = field(default_factory=lambda: dict(CPU_SETTINGS))
    compose_file: Path = COMPOSE_FILE  # the shipped file, or one `build.py units` rendered
    service_lines: tuple[str, ...] = ()  # more of the test override's service keys, one YAML line each
    unmounted: tuple[str, ...] = ()  # targets of shipped volumes the override drops (service_lines remount them)

    def __post_init__(self):
        self.override = self.workdir / "compose.cpu-override.yaml"
        self.override.write_text(override_text(yaml.safe_load(self.compose_file.read_text()), self.settings,
                                               self.service_lines, unmounted=self.unmounted))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        return {**os.environ, "VLLM_TURING_IMAGE": self.image, "MODEL_DIR": str(self.models_dir.resolve()),
                "VLLM_TURING_PORT": str(self.port), "VLLM_TURING_BIND": "127.0.0.1"}

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        return run(["docker", "compose", "-p", self.project, "--project-directory", str(REPO),
                    "-f", str(self.compose_file), "-f", str(self.override), *args],
                   timeout=timeout, env=self.env(), check=check)

    def container(self) -> str:
        return self.compose("ps", "-a", "-q", SERVICE).stdout.strip()

    def inspect(self) -> dict:
        return files.own_json(run(["docker", "inspect", self.container()]).stdout)[0]

    def health(self) -> str:
        return self.inspect()["State"].get("Health", {}).get("Status", "none")

    def ps_health(self) -> str:
        """The Health field of `docker compose ps --format json` (one object, or one per line)."""
        out = self.compose("ps", "--format", "json", SERVICE).stdout.strip()
        rows = files.own_json(out) if out.startswith("[") else [files.own_json(l) for l in out.splitlines() if l]
        return rows[0].get("Health", "") if rows else ""

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until the container's healthcheck says healthy; raises with the logs otherwise."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            state = self.inspect()["State"]
            if state.get("Health", {}).get("Status") == "healthy":
                return time.monotonic() - started
            if state["Status"] in ("exited", "dead") or state.get("Restarting"):
                break
            time.sleep(1)
        raise RuntimeError(f"not healthy after {time.monotonic() - started:.0f} s "
                           f"(state {self.inspect()['State'].get('Status')}); logs:\n{self.logs()[-3000:]}")

    def up(self, timeout: float) -> float:
        started = time.monotonic()
        self.compose("up", "-d", "--no-build", "--pull", "never")
        self.wait_healthy(timeout)
        return time.monotonic() - started

    def stop(self) -> float:
        started = time.monotonic()
        self.compose("stop", timeout=180)
        return time.monotonic() - started

    def logs(self) -> str:
        proc = self.compose("logs", "--no-color", SERVICE, check=False)
        return proc.stdout + proc.stderr

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", timeout=180, check=False)


def write_env_file(path: Path, settings: dict[str, str]) -> Path:
    """KEY=value lines, as the units' env files take them (no quoting)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


@dataclass
class RenderedServers:
    """Several servers on one host as docs/deploy.md ("Two models on one card") tells a user: one
    env file each (`servers`: name -> its settings; the tiny model is its MODEL unless given),
    `build.py units --defaults` with one `--env-file` and `--port` per server (plus `units_args`),
    and the rendered compose.yaml run as one project with the test override of each service (the
    CPU settings, less device nodes, driver libraries and memlock). Each server is published on a
    free port of the loopback."""
    project: str
    image: str
    models_dir: Path
    workdir: Path
    servers: dict[str, dict[str, str]]
    units_args: tuple[str, ...] = ()
    settings: dict = field(default_factory=lambda: {k: v for k, v in CPU_SETTINGS.items() if k != "MODEL"})

    def __post_init__(self):
        self.ports = {name: free_port() for name in self.servers}
        argv = [sys.executable, str(REPO / "build.py"), "units", "--defaults", "--image", self.image,
                "--model-dir", str(self.models_dir), "--out", str(self.workdir), *self.units_args]
        for name, settings in self.servers.items():
            env_file = write_env_file(self.workdir / f"{name}.env", {"MODEL": f"/models/{MODEL_NAME}", **settings})
            argv += ["--env-file", str(env_file), "--port", str(self.ports[name])]
        run(argv, timeout=300)
        self.compose_spec = yaml.safe_load((self.workdir / "compose.yaml").read_text())
        self.files = ["-f", str(self.workdir / "compose.yaml")]
        for name in self.servers:
            override = self.workdir / f"override-{name}.yaml"
            override.write_text(override_text(self.compose_spec, self.settings, name=name))
            self.files += ["-f", str(override)]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def compose(self, *words: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        return run(["docker", "compose", "-p", self.project, "--project-directory", str(self.workdir), *self.files,
                    *words], timeout=timeout, check=check, env={**os.environ, "MODEL_DIR": str(self.models_dir.resolve())})

    def up(self, *names: str) -> None:
        self.compose("up", "-d", "--no-build", "--pull", "never", *names)

    def stop(self, *names: str) -> None:
        self.compose("stop", *names, timeout=300)

    def healthy(self, name: str) -> bool:
        """Whether /health answers 2xx within HEALTH_POLL_S, the whole exchange (a server trickling its
        answer a byte at a time would hold requests' per-read timeout for ever)."""
        from buildtool.endpoint.client import EndpointClient, EndpointError

        try:
            with EndpointClient(self.url(name)) as client:
                return client.get("/health", deadline_s=HEALTH_POLL_S).ok
        except EndpointError:
            return False

    def wait_healthy(self, name: str, timeout: float) -> float:
        """Seconds until the server's /health answers 200 on its published port; RuntimeError with the
        end of its logs otherwise."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.healthy(name):
                return time.monotonic() - started
            time.sleep(0.5)
        logs = self.compose("logs", "--no-color", name, check=False).stdout[-3000:]
        raise RuntimeError(f"{name} not healthy after {timeout:.0f} s; logs:\n{logs}")

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", timeout=300, check=False)


def smoke(url: str, *extra: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict | None, float]:
    """`build.py smoke URL --json`: (process, report or None, wall seconds)."""
    started = time.monotonic()
    proc = run([sys.executable, str(REPO / "build.py"), "smoke", url, "--json", *extra], timeout=timeout, check=False)
    wall = time.monotonic() - started
    try:
        report = files.own_json(proc.stdout)
    except json.JSONDecodeError:
        report = None
    return proc, report, wall


def chat_body(model: str, tokens: int, stream: bool) -> dict:
    """A chat completion that generates exactly `tokens` tokens (EOS ignored), the same each time."""
    return {"model": model, "messages": [{"role": "user", "content": "Count to a thousand."}],
            "max_tokens": tokens, "ignore_eos": True, "stream": stream, "temperature": 0}


def stream_chat(url: str, body: dict, record: dict, ready, ready_after: int = 1,
                abandon_after: int | None = None, deadline_s: float = STREAM_DEADLINE_S) -> None:
    """Posts a streaming chat completion and records its status, every SSE line and how it ended
    ("closed", "abandoned" or the client's error) in `record`; sets `ready` once `ready_after` lines
    arrived, and in any case when it ends. With `abandon_after` the client hangs up after that many
    lines, as a user who gives up does. A stream still sending at `deadline_s` is hung up on, its
    end recorded as "deadline" (requests' timeout bounds each read only: a stream that never ends
    would hold the thread for ever). For a thread: the serving tier's stop and fault tests read
    streams while they stop or break the server."""
    import requests

    record["lines"] = []
    ends = time.monotonic() + deadline_s
    try:
        with requests.post(f"{url}/v1/chat/completions", json=body, stream=True, timeout=(10, 120)) as reply:
            record["status"] = reply.status_code
            # Bytes split at newlines only: decoded text would also split at U+2028 or U+0085, which a
            # tiny random model's tokens may carry inside a JSON string.
            for line in reply.iter_lines():
                if line:
                    record["lines"].append(line.decode("utf-8"))
                    if len(record["lines"]) >= ready_after:
                        ready.set()
                    if abandon_after is not None and len(record["lines"]) >= abandon_after:
                        record["ended"] = "abandoned"
                        return  # the `with` closes the connection mid-stream
                if time.monotonic() > ends:
                    record["ended"] = f"deadline: still streaming after {deadline_s:g} s"
                    return
        record["ended"] = "closed"
    except requests.RequestException as exc:
        record["ended"] = f"{type(exc).__name__}: {exc}"
    finally:
        ready.set()
