"""Where our files live inside the image, the report names, and the environment names."""
from __future__ import annotations

# The fit check's own names live in clamp_paths.py (the Dockerfile copies it, with devices.py, before the
# fit check, so an edit here does not re-run it); they are part of this module's names too.
from .clamp_paths import (COMPILE_RECORD, ENV_CC, ENV_FIT_TABLE, ENV_SMEM_LIMIT, FIT_REPORT,  # noqa: F401
                          FIT_REPORT_SM86, FIT_REPORT_SM86_BF16, FIT_TABLE, INSTALL_DIR, VERSIONS_REPORT,
                          in_install_dir)

# Our Python packages (a unit test holds the Dockerfile's COPYs to it). The image ships them as one zip,
# CODE_ZIP: each module's source with its bytecode beside it (buildtool/image/code_zip.py); INSTALL_DIR, after
# it on the path, holds sitecustomize.py. Data the code reads by path stays a file in INSTALL_DIR.
IMAGE_PACKAGES = ("contract", "door", "entrypoint", "imagefacts", "patches")
CODE_ZIP = in_install_dir("vllm-turing.zip")
IMAGE_PYTHONPATH = f"{CODE_ZIP}:{INSTALL_DIR}"
CLAMP_REPORT = in_install_dir("clamp-report.json")
CLAMP_REPORT_ENCODER = in_install_dir("clamp-report-encoder.json")
# The build's apply report per clamp site (patches.turing_clamp.SITES), which the preflight's clamp check reads
CLAMP_REPORTS = {"unified": CLAMP_REPORT, "encoder": CLAMP_REPORT_ENCODER}
# The build's apply report of the fp16 upcast (patches/fp16_upcast), which the preflight's fp16 check reads
FP16_REPORT = in_install_dir("fp16-report.json")
TRITON_CACHE = in_install_dir("triton-cache")
# What the build proved about the image's own stack (versions, torch's arch list, the vLLM
# parser's option table, parser names), read by the preflight instead of importing torch/vLLM.
IMAGE_FACTS = in_install_dir("image-facts.json")

# The software bill of materials of the base (CycloneDX JSON): every Python and Debian package, the
# Python ones with the hashes of the lock they were installed from (buildtool/sbom.py writes it).
SBOM = in_install_dir("sbom.cdx.json")

# The build reports build.py reads back from a finished image, by key.
BUILD_REPORTS = {"clamp": CLAMP_REPORT, "fit": FIT_REPORT, "fit_sm86": FIT_REPORT_SM86,
                 "versions": VERSIONS_REPORT, "fp16": FP16_REPORT}

# The names of the first release, still read for one release; the preflight report says to rename.
DEPRECATED_ENV_NAMES = {
    "VLLM_TURING_FIT_TABLE": ENV_FIT_TABLE,
    "VLLM_TURING_SMEM_LIMIT": ENV_SMEM_LIMIT,
    "VLLM_TURING_CC": ENV_CC,
}

# The API key: a file (compose secret, Quadlet Secret=, Kubernetes Secret volume) named by
# API_KEY_FILE, or vLLM's own VLLM_API_KEY. The entrypoint hands it to vLLM in the environment,
# never in argv. The units mount the secret named API_KEY_SECRET at API_KEY_PATH.
ENV_API_KEY_FILE = "API_KEY_FILE"
ENV_API_KEY = "VLLM_API_KEY"
API_KEY_SECRET = "vllm-api-key"
API_KEY_PATH = "/run/secrets/vllm-api-key"

# The stamp the entrypoint keeps in VLLM_CACHE_ROOT: which image filled the cache volume.
CACHE_STAMP_NAME = "vllm-turing-image.json"
# The start ledger beside it: whether the last start became healthy (entrypoint/start_ledger.py).
START_LEDGER_NAME = "vllm-turing-starts.json"

# The units' stop grace (compose stop_grace_period, Quadlet StopTimeout, Kubernetes
# terminationGracePeriodSeconds less its preStop delay): SIGTERM, then SIGKILL after this many
# seconds; the default of the STOP_GRACE_SECONDS setting. The server's HTTP drain after its engine has
# stopped is bounded well inside it (entrypoint/graceful_stop.py).
STOP_GRACE_S = 60
SERVER_HTTP_DRAIN_S = STOP_GRACE_S // 4
# vLLM drains its requests in flight for --shutdown-timeout seconds after SIGTERM (0, its default,
# aborts them); then the HTTP drain runs; this margin keeps both inside the grace.
STOP_MARGIN_S = 5
STOP_GRACE_MIN_S = SERVER_HTTP_DRAIN_S + STOP_MARGIN_S + 5
STOP_GRACE_MAX_S = 3600


def shutdown_timeout_s(stop_grace_s: int) -> int:
    """vLLM's --shutdown-timeout for a stop grace: what is left of it after the HTTP drain and a margin."""
    return max(stop_grace_s - SERVER_HTTP_DRAIN_S - STOP_MARGIN_S, 0)

# The start report (entrypoint/start_report.py): the entrypoint hands the preflight's seconds and the
# process start time to the server in this variable; the server adds its phases file for the engine
# processes it starts. Not VLLM_*: vLLM warns about every VLLM_* name it does not own.
ENV_START_REPORT = "TURING_START_REPORT"

# IDLE_AFTER (docs/deploy.md, "Idle: the card back to the host"): how long a server with nobody asking
# keeps its card before its units stop it; the next request starts it again. Below IDLE_AFTER_MIN_S the
# server would stop between the turns of one conversation; above IDLE_AFTER_MAX_S (a week) it is a typo.
IDLE_AFTER_MIN_S = 5
IDLE_AFTER_MAX_S = 7 * 24 * 3600
