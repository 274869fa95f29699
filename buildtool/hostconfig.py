"""Values a build takes from the host's own configuration, never written in the repo."""
import os
import subprocess
from pathlib import Path
from typing import Mapping


# (pip's environment variable, its config key, the BuildKit secret the Dockerfiles read it from);
# the trusted hosts travel with the indexes: pip ignores an http:// index on a host it does not trust
PIP_INDEXES = (("PIP_INDEX_URL", "global.index-url", "pip-index-url"),
               ("PIP_EXTRA_INDEX_URL", "global.extra-index-url", "pip-extra-index-url"),
               ("PIP_TRUSTED_HOST", "global.trusted-host", "pip-trusted-host"))
# Where a CA bundle for pip is looked for, most specific first: pip's own setting (what pip on
# this host verifies with), then the variables requests and OpenSSL read, then the system store.
CA_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
SYSTEM_CA_BUNDLES = (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt"),
                     Path("/etc/ssl/cert.pem"))


def pip_index_secrets(env: Mapping[str, str] = os.environ, config_get=None) -> dict[str, str]:
    """BuildKit secret id -> the host's package index URLs, for offline sites: the environment first
    (pip reads it before its config), then pip's config. They travel as secrets, never build
    arguments, since an index URL may carry credentials (user:password@) and a build argument a
    RUN step uses is recorded in `docker history`. Only http(s) URLs travel: file:// indexes exist
    on the host, not in the build."""
    config_get = config_get or _pip_config_get
    secrets = {}
    for variable, key, secret in PIP_INDEXES:
        value = env.get(variable) or config_get(key)
        words = value.split() if variable == "PIP_TRUSTED_HOST" else \
            [u for u in value.split() if u.startswith(("http://", "https://"))]
        if words:
            secrets[secret] = " ".join(words)
    if not {"pip-index-url", "pip-extra-index-url"} & set(secrets):
        secrets.pop("pip-trusted-host", None)  # trusted hosts of file:// indexes mean nothing in a build
    return secrets


def host_ca_bundle(env: Mapping[str, str] = os.environ, config_get=None,
                   system: tuple[Path, ...] = SYSTEM_CA_BUNDLES) -> tuple[Path, str] | None:
    """(the host's CA bundle, where it was found) for the builds' pip, or None: PIP_CERT, pip's
    `cert` config, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, then the system store. Only files count
    (a directory such as SSL_CERT_DIR cannot travel as one secret)."""
    config_get = config_get or _pip_config_get
    candidates = [(env.get("PIP_CERT", ""), "PIP_CERT"), (config_get("global.cert"), "pip's cert config")]
    candidates += [(env.get(name, ""), name) for name in CA_VARIABLES[1:]]
    candidates += [(str(path), "the system store") for path in system]
    for value, source in candidates:
        if value and Path(value).is_file():
            return Path(value), source
    return None


def _pip_config_get(key: str) -> str:
    try:
        out = subprocess.run(["python3", "-m", "pip", "config", "get", key],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The first non-security Debian mirror of the host's apt sources (deb822 or one-line)."""
    for path in sorted(sources_dir.glob("sources.list.d/*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:"):
                for uri in line.split()[1:]:
                    if "security" not in uri:
                        return uri
    one_line = sources_dir / "sources.list"
    if one_line.exists():
        for line in one_line.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1] if not parts[1].startswith("[") else parts[2]
    return ""


def git_revision(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def pip_find_links() -> list[Path]:
    """The local wheel folders of the host's pip config (find-links), which exist here only."""
    value = _pip_config_get("global.find-links")
    return [Path(p.removeprefix("file://")) for p in value.split() if not p.startswith(("http://", "https://"))]
