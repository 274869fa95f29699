"""Renders the rootless podman Quadlet unit and the env file shared with compose."""
from __future__ import annotations

import shlex

from buildtool.units.idle import IDLE_HEALTH_INTERVAL, proxy_name
from buildtool.units.serialize import Line, env_file, unit_file, unit_value
from buildtool.units.spec import (API_KEY_PATH, API_KEY_SECRET, CONTAINER_PORT, DROP_CAPABILITIES,
                                  FETCH_COMMAND, HEALTH, HEALTH_CMD, HF_CACHE, HF_TOKEN_PATH, HF_TOKEN_SECRET,
                                  READ_ONLY_NOTE, RESTART_DELAY_S, SHM_SIZE, START_TIMEOUT_S, STOP_GRACE_S,
                                  UNIT_NAME, Mount, UnitSpec, published_address)

CDI_GPU_PREFIX = "nvidia.com/gpu="
CDI_ALL_GPUS = f"{CDI_GPU_PREFIX}all"


def podman_image_ref(image: str) -> str:
    """Podman names images built or loaded locally localhost/NAME; an unqualified name would
    otherwise send it looking in registries."""
    first = image.split("/", 1)[0]
    qualified = "/" in image and ("." in first or ":" in first or first == "localhost")
    return image if qualified else f"localhost/{image}"


def _volume(mount: Mount) -> Line:
    """Volume=SOURCE:TARGET[:ro]; ~ is the shell's, systemd's specifier for the user's home is %h.
    Quadlet hands the value to podman as one argument, spaces and all (quadlet -dryrun shows it)."""
    source = mount.source
    home = source == "~" or source.startswith("~/")
    value = (source[1:] if home else source) + ":" + mount.target + (":ro" if mount.read_only else "")
    return Line("Volume", value, raw_prefix="%h" if home else "")


def _mounts_for(mounts: list[Mount]) -> list:
    """RequiresMountsFor= in systemd's quoting for each absolute bind source holding a space. Quadlet
    makes its own line from Volume=, unquoted in podman 5.4 (podman issue 21607, fixed upstream by PR
    27385), so systemd splits such a path at its spaces and waits for the wrong mount; this line names
    the right one."""
    spaced = [m.source for m in mounts if " " in m.source and m.source.startswith("/")]
    if not spaced:
        return []
    return ["A bind source with a space, quoted as systemd reads it (the line Quadlet 5.4 makes from Volume= splits it).",
            *[Line("RequiresMountsFor", source, word=True) for source in dict.fromkeys(spaced)]]


def _environment(values: dict[str, str]) -> list[Line]:
    """Environment=KEY=value, one quoted word where the value holds white space or quotes: Quadlet
    splits Environment= at white space, so a value can never set another key."""
    return [Line("Environment", f"{key}={value}", word=True) for key, value in values.items()]


def _api_key_entries(spec: UnitSpec) -> list:
    """The podman secret mounted where API_KEY_FILE says; commented out unless a key file was given."""
    source = spec.host.api_key_file
    wiring = [Line("Secret", f"{API_KEY_SECRET},type=mount,target={API_KEY_PATH}"),
              *_environment(spec.api_key_environment)]
    entries = ["API key (docs/deploy.md, \"Exposing the server\"): podman mounts the secret where API_KEY_FILE",
               "says; the entrypoint hands the key to vLLM in its environment, never in argv; it guards /v1 only.",
               f"Create it once: podman secret create {API_KEY_SECRET} {shlex.quote(source) if source else 'FILE'}"]
    if source is None:
        return entries + ["then uncomment these two lines (or regenerate with `python3 build.py units --api-key-file FILE`):",
                          *[f"{line.key}={unit_value(line.value, line.key, word=line.word)}" for line in wiring]]
    return entries + wiring


def _published(spec: UnitSpec) -> str:
    """host:port:port; an idle server on the loopback's backend port, behind its socket (buildtool/units/idle.py)."""
    if spec.server.idle_after_s is not None:
        return f"127.0.0.1:{spec.backend_port}:{CONTAINER_PORT}"
    return f"{published_address(spec.host.bind_address)}:{spec.host.port}:{CONTAINER_PORT}"


def render_quadlet(spec: UnitSpec) -> str:
    host = spec.host
    idle = spec.server.idle_after_s is not None
    devices = []
    if spec.toolkit:
        devices = [Line("AddDevice", CDI_ALL_GPUS)] if host.every_gpu else [
            Line("AddDevice", f"{CDI_GPU_PREFIX}{i}") for i in host.gpu_indices]
    devices += [Line("AddDevice", ("-" if d.optional else "") + d.path) for d in spec.devices]
    container = [
        Line("ContainerName", spec.server.name),
        Line("Image", podman_image_ref(host.image)),
        Line("Pull", "never"),
        Line("EnvironmentFile", spec.server.env_file),
        *_environment(spec.environment),
        *devices,
        *[_volume(m) for m in spec.library_mounts],
        _volume(spec.model_mount),
        *[Line("Volume", f"{UNIT_NAME}-{name}:{target}") for name, target in spec.cache_volumes.items()],
        Line("PublishPort", _published(spec)),
        *_api_key_entries(spec),
        Line("Ulimit", "memlock=-1:-1"),
        # Quadlet has no Ipc= key (podman 5.4): host IPC goes through PodmanArgs
        Line("PodmanArgs", "--ipc=host") if host.host_ipc else Line("ShmSize", SHM_SIZE),
        "Least privilege, as compose.yaml (measured against the real CPU server in tests/serving).",
        *[Line("DropCapability", cap) for cap in DROP_CAPABILITIES],
        Line("NoNewPrivileges", "true"),
        *READ_ONLY_NOTE,
        Line("HealthCmd", HEALTH_CMD),
        Line("HealthInterval", IDLE_HEALTH_INTERVAL if idle else HEALTH["interval"]),
        Line("HealthTimeout", HEALTH["timeout"]),
        Line("HealthRetries", str(HEALTH["retries"])),
        Line("HealthStartPeriod", HEALTH["start_period"]),
        Line("Notify", "healthy"),
        Line("StopTimeout", str(spec.server.stop_grace_s)),
    ]
    return unit_file([
        (None, ["Generated by `python3 build.py units` (buildtool/units/spec.py is the source of truth).",
                f"Rootless podman: copy this file and {spec.server.env_file} to ~/.config/containers/systemd/,",
                f"then `systemctl --user daemon-reload && systemctl --user start {spec.server.name}` (docs/deploy.md)."]),
        ("Unit", [Line("Description", "vLLM OpenAI server with the Turing clamp"),
                  f"The fetch step ({spec.fetch_name}.container) runs first; the server starts only after it",
                  "verified the model (with FETCH_MODEL unset in the env file it does nothing and succeeds).",
                  Line("Requires", f"{spec.fetch_name}.service"),
                  Line("After", f"{spec.fetch_name}.service"),
                  # A preflight that fails 3 times in 10 minutes leaves the unit "failed" with its report
                  # in the journal, instead of restarting forever; a crash after hours is still restarted.
                  Line("StartLimitIntervalSec", "600"),
                  Line("StartLimitBurst", "3"),
                  *_mounts_for([*spec.library_mounts, spec.model_mount]),
                  *([f"IDLE_AFTER: started by {proxy_name(spec.server.name)}.socket's first connection, stopped once its proxy",
                     "has exited (nothing needs it then). Not enabled on its own: enable the socket.",
                     Line("StopWhenUnneeded", "yes")] if idle else [])]),
        ("Container", container),
        ("Service", [Line("TimeoutStartSec", str(START_TIMEOUT_S)),
                     Line("Restart", "on-failure"),
                     Line("RestartSec", str(RESTART_DELAY_S))]),
        *([] if idle else [("Install", [Line("WantedBy", "default.target")])]),
    ])


def render_fetch_quadlet(spec: UnitSpec) -> str:
    """The oneshot fetch step the server unit Requires: the model fetched, judged and verified into the
    model directory (read-write here alone); complete, it verifies and downloads nothing."""
    host = spec.host
    token = Line("Secret", f"{HF_TOKEN_SECRET},type=mount,target={HF_TOKEN_PATH}")
    container = [
        Line("ContainerName", spec.fetch_name),
        Line("Image", podman_image_ref(host.image)),
        Line("Pull", "never"),
        Line("EnvironmentFile", spec.server.env_file),
        *_environment(spec.fetch_environment),
        _volume(spec.fetch_model_mount),
        Line("Volume", f"{UNIT_NAME}-{spec.server.volume_prefix}{HF_CACHE[0]}:{HF_CACHE[1]}"),
        Line("Exec", " ".join(FETCH_COMMAND)),
        "A gated or private model: the Hub token's file, as a podman secret mounted where HF_TOKEN_PATH says",
        f"(never a variable or argv). Create it once, `podman secret create {HF_TOKEN_SECRET} FILE`, and add the line",
        f"  {token.key}={unit_value(token.value, token.key)}",
        *[Line("DropCapability", cap) for cap in DROP_CAPABILITIES],
        Line("NoNewPrivileges", "true"),
    ]
    return unit_file([
        (None, ["Generated by `python3 build.py units` (buildtool/units/spec.py is the source of truth).",
                f"The fetch step {spec.server.name}.container Requires: copy it beside that unit. It reads FETCH_MODEL",
                f"(REPO@REVISION) and FETCH_GPU from {spec.server.env_file} and writes into the folder MODEL names."]),
        ("Unit", [Line("Description", "Fetch, judge and verify the model of vllm-turing"),
                  *_mounts_for([spec.fetch_model_mount])]),
        ("Container", container),
        # a download takes as long as it takes; a failure is final until the next start (no loop)
        ("Service", [Line("Type", "oneshot"), Line("RemainAfterExit", "yes"), Line("TimeoutStartSec", "infinity"),
                     Line("Restart", "no")]),
    ])


# The env file's template: comments (str, "" a blank line) and KEY=value settings.
ENV_FILE_ENTRIES = [
    'Settings of the vllm-turing entrypoint, read by compose (env_file) and Quadlet (EnvironmentFile=).',
    'One KEY=value per line; no quotes and no comments after a value (compose and podman read them',
    "differently). Devices, libraries, caches, HOST and PORT are the units' business, not this file's.",
    "",
    "A directory under the host's model directory (mounted read-only at /models), or a Hugging Face id.",
    ('MODEL', '/models/gemma-4-E2B-it'),
    ('SERVED_MODEL_NAME', 'gemma-4'),
    "auto: float16 on GPUs without bf16 (Turing), the model's dtype elsewhere.",
    ('DTYPE', 'auto'),
    ('MAX_MODEL_LEN', '16384'),
    ('MAX_NUM_SEQS', '8'),
    ('GPU_MEMORY_UTILIZATION', '0.9'),
    'KV_CACHE_DTYPE=fp8',
    'ENFORCE_EAGER=1',
    'GPUs per server (tensor parallel) when the model does not fit one card; the units pass every GPU',
    '`build.py units --gpus` chose. On T4s prefer one server per GPU (docs/fleet.md).',
    'TENSOR_PARALLEL_SIZE=2',
    'A speculative drafter (bf16; a quantized drafter is refused), or a full SPECULATIVE_CONFIG JSON.',
    'DRAFTER=/models/gemma-4-12B-it-mtp',
    "Gemma 4's parsers (tool calls, reasoning); another model needs its own or none (the preflight warns).",
    ('REASONING_PARSER', 'gemma4'),
    ('TOOL_CALL_PARSER', 'gemma4'),
    'Weights are local: never reach for the Hub (the fetch step alone does: it turns this off for itself).',
    ('HF_HUB_OFFLINE', '1'),
    "The units' fetch step: the Hub repository (pinned @REVISION, best a commit) fetched into the folder MODEL",
    'names, judged for FETCH_GPU (sm75, t4, ...; its container has no GPU) before any weight byte.',
    'FETCH_MODEL=google/gemma-4-E2B-it@main',
    'FETCH_GPU=t4',
    "Hash every byte of the fetched model against its manifest at each start, within this many seconds.",
    'VERIFY_HASHES_SECONDS=300',
    'Anything else for `vllm serve`, split like a shell would.',
    'VLLM_EXTRA_ARGS=--enable-prefix-caching',
    'Checks to skip by name (the report still warns about each).',
    'SKIP_CHECKS=',
    "Seconds from a stop's SIGTERM to its SIGKILL; vLLM drains the requests in flight for most of it.",
    "`build.py units` renders the units' grace (stop_grace_period, StopTimeout, terminationGracePeriodSeconds)",
    "from this value: render them again after changing it.",
    ('STOP_GRACE_SECONDS', str(STOP_GRACE_S)),
    "Stop the server after this long with no request (15min, 1h, ...), giving the card back to the host; the",
    "next request starts it again and waits for the start. `build.py units` then renders a systemd socket that",
    "holds the port (docs/deploy.md, \"Idle\"): render the units again after changing it. Empty: always on.",
    'IDLE_AFTER=',
]


def render_env_file() -> str:
    return env_file(ENV_FILE_ENTRIES)
