"""The one source of truth for the deployment units: what the service needs from a host.

compose.yaml, compose.toolkit.yaml and quadlet/vllm-turing.container are all rendered from a
`UnitSpec`, so the compose service and the Quadlet unit cannot drift apart. Host-specific
values (GPU indices, driver library directory, model directory, image, published address)
live in `HostValues`; everything else is fixed here, once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address

from buildtool.flags import GpuSelection
from contract.layout import (API_KEY_PATH, API_KEY_SECRET, ENV_API_KEY, ENV_API_KEY_FILE,  # noqa: F401
                             STOP_GRACE_S, TRITON_CACHE)  # (API_KEY_SECRET, ENV_API_KEY, STOP_GRACE_S: the units read them here)
from contract.pins import IMAGE_TAG, VLLM_VERSION

# Debian/Ubuntu's multiarch directory, where the driver packages put libcuda & co.
DEFAULT_LIB_DIR = "/usr/lib/x86_64-linux-gnu"
DEFAULT_IMAGE = IMAGE_TAG
DEFAULT_MODEL_DIR = "~/models"

# The image puts this first on LD_LIBRARY_PATH (like vllm/vllm-openai does).
CONTAINER_LIB_DIR = "/usr/local/nvidia/lib64"
# The host driver's own libraries: a copy of another version gives NVML's version mismatch.
DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1")
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
# Profiling only; compute works without it, so Quadlet marks it optional ("-" prefix).
OPTIONAL_DEVICES = ("/dev/nvidia-uvm-tools",)

CONTAINER_PORT = 8000
MODEL_MOUNT = "/models"
SHM_SIZE = "8g"  # NCCL and vLLM's multiprocessing use /dev/shm; tmpfs only takes what is used
START_TIMEOUT_S = 900  # systemd: preflight + model load (100-230 s measured) + a cold compile cache
RESTART_DELAY_S = 30
# The health check, the same in compose, Quadlet and the Dockerfile's HEALTHCHECK (a unit test
# holds the Dockerfile to these). python3, not curl: the vLLM image has no curl. urlopen raises
# on 503 (not ready), so the exit code is non-zero until the engine answers 200. PORT is the
# entrypoint's (the units set it to CONTAINER_PORT). No "%": systemd would read it as a specifier.
# Timeouts for a loaded T4 host: a starved old CPU takes seconds to start python3, and the API
# server answers /health from the event loop that also tokenizes a full batch; a probe killed
# there marks the server unhealthy at its busiest. urlopen gives up 2 s before the runtime kills
# the probe, so a slow answer fails with its own message. 3 misses in a row (90 s) are unhealthy.
HEALTH_PROBE_TIMEOUT_S = 8
HEALTH_CMD = ("python3 -c 'import os, urllib.request; urllib.request.urlopen("
              f"\"http://127.0.0.1:\" + os.environ.get(\"PORT\", \"{CONTAINER_PORT}\") + \"/health\", "
              f"timeout={HEALTH_PROBE_TIMEOUT_S})'")
HEALTH = {"interval": "30s", "timeout": "10s", "retries": 3, "start_period": "300s"}

# The caches, each on a named volume (compose, Quadlet) or a subPath of one claim (Kubernetes).
# The image ships no Triton cache (40 MB, against a 1.5 MiB budget for the derived layers): the
# volumes keep what the first start compiled, so a restart skips the JIT. Downloads (HF_HOME) are
# the same for every image; compiled artifacts belong to one image, so their volumes carry its
# version (`compile_volumes`, from the image the units are rendered for): an upgrade regenerated
# with `build.py units` starts on fresh volumes instead of a cache another vLLM/torch/Triton wrote.
# Another image run on them (VLLM_TURING_IMAGE) is what the preflight's cache stamp reports.
HF_CACHE = ("hf-cache", "/cache/huggingface")
VLLM_CACHE_ROOT = "/cache/vllm"
# What vLLM 0.33.0 and the libraries under it write at start, read from the release's
# vllm/envs.py: VLLM_CACHE_ROOT holds torch.compile's AOT graphs (torch_compile_cache) and
# inductor's cache (vLLM points TORCHINDUCTOR_CACHE_DIR under it); VLLM_ASSETS_CACHE and
# VLLM_XLA_CACHE_PATH default under $XDG_CACHE_HOME/vllm, not under VLLM_CACHE_ROOT, and
# FlashInfer's JIT, outlines and torch hub default under $XDG_CACHE_HOME too, so XDG_CACHE_HOME
# goes on the compile volume; CUDA's PTX JIT cache (CUDA_CACHE_PATH, default ~/.nv) likewise;
# Triton's JIT cache is TRITON_CACHE_DIR (default ~/.triton/cache).
COMPILE_CACHES = {"triton-cache": TRITON_CACHE, "vllm-cache": VLLM_CACHE_ROOT}
COMPILE_ENVIRONMENT = {
    "TRITON_CACHE_DIR": TRITON_CACHE,
    "VLLM_CACHE_ROOT": VLLM_CACHE_ROOT,
    "XDG_CACHE_HOME": f"{VLLM_CACHE_ROOT}/xdg",
    "CUDA_CACHE_PATH": f"{VLLM_CACHE_ROOT}/cuda-jit",
}

# An idle server's own port on the loopback (IDLE_AFTER): the socket holds the public port, so the server is
# published this far from it (8000 -> 18000); the plan refuses a clash with another server's ports.
IDLE_BACKEND_OFFSET = 10000

ENV_FILE_NAME = "vllm-turing.env"
UNIT_NAME = "vllm-turing"

# The fetch step (entrypoint/fetch): the image's `fetch`, run once before the server, reading what to
# fetch from the server's env file (FETCH_MODEL, FETCH_GPU, into MODEL's folder). It alone writes the
# models folder; the Hub token is a file it names (HF_TOKEN_PATH), never a variable. The env file
# keeps the server offline (HF_HUB_OFFLINE=1): the fetch step's own environment turns that off.
FETCH_COMMAND = ("fetch",)
FETCH_PROFILE = "fetch"
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_PATH = f"/run/secrets/{HF_TOKEN_SECRET}"

# Least privilege, measured against the real CPU server in the serving tier: vLLM needs no
# capability (the entrypoint's ldconfig refresh as root writes a root-owned file, which needs none)
# and never gains privileges through a setuid file.
DROP_CAPABILITIES = ("ALL",)
# Why the root filesystem stays writable here (a comment in compose and Quadlet; docs/deploy.md has the
# override; the Kubernetes pods are read-only, with a volume wherever the server writes).
READ_ONLY_NOTE = (
    "No read-only root filesystem by default: what writes outside the volumes (/tmp, HOME) would need a",
    "tmpfs each. The server runs read-only with a tmpfs /tmp (measured on the CPU server, tests/serving),",
    "and Triton finds the host's libcuda without a linker cache refresh; docs/deploy.md shows the override.",
)
# The image's default user (the Dockerfile's USER, held to these by a unit test) and the uid the
# Kubernetes pods run as: non-root, at least 10000 so that it is no host account's uid (checkov's
# CKV_K8S_40), in group 0 as OpenShift assigns: the image reads and writes what it needs as any uid
# of group 0. Its HOME is the image's /home/vllm (an emptyDir in the pods, whose root is read-only).
POD_UID = 10001
POD_GID = 0
POD_HOME = "/home/vllm"
_VERSION_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def image_version(image: str) -> str:
    """The tag of an image reference (`me/vllm-turing:0.33.0-b2` -> `0.33.0-b2`), the pinned vLLM
    version for an untagged one or a digest, made safe for a volume name."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last and "@" not in image else VLLM_VERSION
    return _VERSION_CHARS.sub("-", tag) or VLLM_VERSION


@dataclass(frozen=True)
class HostValues:
    """What differs from one host to the next."""

    gpu_indices: tuple[int, ...] = (0,)
    every_gpu: bool = True  # toolkit hosts: pass every GPU (True) or exactly gpu_indices
    host_ipc: bool = False  # share the host's IPC namespace (and /dev/shm) instead of sizing shm
    lib_dir: str = DEFAULT_LIB_DIR
    model_dir: str = DEFAULT_MODEL_DIR
    image: str = DEFAULT_IMAGE
    bind_address: IPv4Address | IPv6Address = IPv4Address("127.0.0.1")
    port: int = CONTAINER_PORT
    # The API key's file on this host (compose secret source; Quadlet: `podman secret create
    # vllm-api-key FILE`; Kubernetes: the Secret made from it). Never read: the key is in no unit.
    # None: the wiring is written commented out and the server takes no key.
    api_key_file: str | None = None


@dataclass(frozen=True)
class Device:
    path: str
    optional: bool = False


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ClusterValues:
    """What only a Kubernetes rendering needs (buildtool/units/kubernetes.py); the GPUs of one
    replica are `HostValues.gpu_indices` (one GPU, or one tensor-parallel group)."""

    replicas: int = 1
    weight_bytes: int = 0  # the model's weights on disk: sizes the memory request
    model_volume: str = "pvc"  # "pvc" (model_claim) or "hostPath" (HostValues.model_dir on each node)
    model_claim: str = "vllm-turing-models"
    runtime_class: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    cpus: int | None = None  # whole CPUs per replica (request = limit); None: sized from the GPUs
    # the Prometheus KEDA queries for an IDLE_AFTER server's requests in flight (buildtool/units/keda.py)
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"


@dataclass(frozen=True)
class ServerValues:
    """What tells one server of a host from another (buildtool/units/servers.py plans them). The
    defaults are the one server of a host, whose names are those of a single-server rendering."""

    name: str = UNIT_NAME  # container, unit, Deployment and Service name
    service: str = "vllm"  # the compose service
    env_file: str = ENV_FILE_NAME  # its env file, beside the Quadlet unit (compose: under quadlet/)
    volume_prefix: str = ""  # put before every cache volume's name; "" keeps a single server's names
    variable_prefix: str = "VLLM_TURING"  # compose's ${PREFIX_PORT} override of the published port
    # Settings the plan decided for this server (SERVED_MODEL_NAME, GPU_MEMORY_UTILIZATION): set in
    # the units' environment, which overrides the env file.
    settings: tuple[tuple[str, str], ...] = ()
    # Its env file's STOP_GRACE_SECONDS: the units' stop grace (SIGTERM to SIGKILL), the same seconds
    # the entrypoint sizes vLLM's drain from.
    stop_grace_s: int = STOP_GRACE_S
    # Its env file's IDLE_AFTER in seconds: None runs it always; else the public port is a systemd socket
    # and the server is published on the loopback at backend_port (buildtool/units/idle.py).
    idle_after_s: int | None = None


@dataclass(frozen=True)
class UnitSpec:
    host: HostValues = field(default_factory=HostValues)
    toolkit: bool = False  # True: the container toolkit / CDI wires devices and libraries
    cluster: ClusterValues = field(default_factory=ClusterValues)
    server: ServerValues = field(default_factory=ServerValues)

    @property
    def devices(self) -> list[Device]:
        if self.toolkit:
            return []
        gpus = [Device(f"/dev/nvidia{i}") for i in self.host.gpu_indices]
        return (gpus + [Device(p) for p in CONTROL_DEVICES]
                + [Device(p, optional=True) for p in OPTIONAL_DEVICES])

    @property
    def library_mounts(self) -> list[Mount]:
        if self.toolkit:
            return []
        return [Mount(f"{self.host.lib_dir.rstrip('/')}/{name}", f"{CONTAINER_LIB_DIR}/{name}")
                for name in DRIVER_LIBRARIES]

    @property
    def visible_devices(self) -> str:
        """NVIDIA_VISIBLE_DEVICES as the container toolkit reads it."""
        return "all" if self.host.every_gpu else ",".join(map(str, self.host.gpu_indices))

    @property
    def model_mount(self) -> Mount:
        return Mount(self.host.model_dir, MODEL_MOUNT)

    @property
    def compile_volumes(self) -> dict[str, str]:
        """name -> mount point of the caches that belong to one image: the name carries its version."""
        version = image_version(self.host.image)
        prefix = self.server.volume_prefix
        return {f"{prefix}{name}-{version}": target for name, target in COMPILE_CACHES.items()}

    @property
    def cache_volumes(self) -> dict[str, str]:
        return {self.server.volume_prefix + HF_CACHE[0]: HF_CACHE[1], **self.compile_volumes}

    @property
    def environment(self) -> dict[str, str]:
        """Wiring the units own; user settings go in the env file, which these override."""
        return {
            "NVIDIA_VISIBLE_DEVICES": self.visible_devices,
            "HOST": "0.0.0.0",
            "PORT": str(CONTAINER_PORT),
            "HF_HOME": HF_CACHE[1],
            **COMPILE_ENVIRONMENT,
            **dict(self.server.settings),
        }

    @property
    def backend_port(self) -> int:
        """Where an idle server is published on the loopback, behind the socket on host.port."""
        return backend_port(self.host.port)

    @property
    def fetch_name(self) -> str:
        """The fetch step's container, unit and Job name."""
        return f"{self.server.name}-fetch"

    @property
    def fetch_service(self) -> str:
        """The fetch step's compose service: `fetch` beside the one server, `<service>-fetch` beside several."""
        return FETCH_PROFILE if self.server.service == ServerValues.service else f"{self.server.service}-fetch"

    @property
    def fetch_model_mount(self) -> Mount:
        return Mount(self.host.model_dir, MODEL_MOUNT, read_only=False)

    @property
    def fetch_environment(self) -> dict[str, str]:
        return {"HF_HOME": HF_CACHE[1], "HF_HUB_OFFLINE": "0", "HF_TOKEN_PATH": HF_TOKEN_PATH}

    @property
    def api_key_environment(self) -> dict[str, str]:
        """What the API key's wiring adds: the entrypoint reads the key from this file."""
        return {ENV_API_KEY_FILE: API_KEY_PATH}


def backend_port(port: int) -> int:
    """An idle server's loopback port: its public port's, IDLE_BACKEND_OFFSET above (or below, near the top)."""
    return port + IDLE_BACKEND_OFFSET if port + IDLE_BACKEND_OFFSET <= 65535 else port - IDLE_BACKEND_OFFSET


def gpu_indices_from_names(names: list[str]) -> tuple[int, ...]:
    """The N of every /dev/nvidiaN among directory entry names (nvidiactl, nvidia-uvm excluded)."""
    return tuple(sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"nvidia(\d+)", n))))


def missing_libraries(present: set[str]) -> list[str]:
    return [name for name in DRIVER_LIBRARIES if name not in present]


def resolve_gpus(selection: GpuSelection, present: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], bool]:
    """--gpus as (GPU indices, every GPU?): `all` the `present` ones (ValueError when there are
    none), indices as given (as nvidia-smi numbers them), a count N the first N."""
    if selection.every:
        if not present:
            raise ValueError("--gpus all: no /dev/nvidiaN on this host; name the GPUs (--gpus 0,1) or a count")
        return tuple(present), True
    if selection.count is not None:
        return tuple(range(selection.count)), False
    return selection.indices, False


def published_address(address: IPv4Address | IPv6Address) -> str:
    """The address as `address:port:port` needs it: an IPv6 address in brackets."""
    return f"[{address}]" if address.version == 6 else str(address)
