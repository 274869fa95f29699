"""Values a build takes from the host's own configuration, never written in the repo, each parsed
once into a typed value: package index URLs, trusted hosts, the CA bundle. A value that would
break pip inside the build minutes later, or be passed over for another, is refused at once in one
line naming the variable (a UsageError, exit 2), its URL credentials masked."""
import ipaddress
import os
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Mapping

from door.redact import redact
from door import children
from door import files
from door.problem import UsageError


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


def host_setting_error(name: str, value: str, expected: str, fix: str) -> UsageError:
    """A host setting that cannot be used: one line `host setting NAME='value': expected ...; fix`."""
    shown = redact(value)
    shown = repr(shown if len(shown) <= 80 else shown[:80] + "...")
    return UsageError(f"host setting {name}={shown}: expected {expected}; {fix}")


HOST_NAME = re.compile(r"(?i)(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")


def _host_and_port(text: str) -> bool:
    """`host`, `host:port`, `[v6]` or `[v6]:port` as pip's --trusted-host takes them."""
    host, port = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            return False
        port = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
    else:
        host, _, port = text.partition(":")
        if not HOST_NAME.fullmatch(host):
            return False
    return not port or (port.isascii() and port.isdigit() and 0 < int(port) <= 65535)


def index_urls(name: str, value: str) -> tuple[str, ...]:
    """The http(s) index URLs of a pip index setting (space-separated; file:// indexes stay on the
    host and are left out); UsageError for a word pip could not use as an index."""
    urls = []
    for word in value.split():
        if word.startswith("file:"):
            continue
        try:
            parts = urllib.parse.urlsplit(word)
            parts.port  # noqa: B018 (raises for a port that is not a number in range)
        except ValueError:
            parts = None
        if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
                or not word.isascii() or not word.isprintable()):
            raise host_setting_error(name, value, "space-separated http(s):// index URLs with a host (or file:// ones, "
                                   "which stay on the host)", f"fix or unset {name}")
        urls.append(word)
    return tuple(urls)


def trusted_hosts(name: str, value: str) -> tuple[str, ...]:
    """pip's trusted hosts (`host` or `host:port`, space-separated); UsageError otherwise."""
    hosts = tuple(value.split())
    for host in hosts:
        if not _host_and_port(host):
            raise host_setting_error(name, value, "space-separated host names or host:port, without a scheme",
                                   f"fix or unset {name}")
    return hosts


# pip's own CA settings: pip on this host fails when they name no file, so the build refuses them too
PIP_CA_SOURCES = ("PIP_CERT", "pip's cert config")


def ca_file(name: str, value: str) -> Path | None:
    """The CA bundle a setting names: None when unset; UsageError when it names no readable file
    (passing over it would build with another CA than the host's pip uses)."""
    if not value:
        return None
    path = Path(value)
    if not path.is_file() or not os.access(path, os.R_OK):
        why = "a folder" if path.is_dir() else "not readable" if path.exists() else "not there"
        raise host_setting_error(name, value, f"a readable CA bundle file (it is {why})",
                               f"point {name} at the bundle file, or unset it")
    return path


def pip_index_secrets(env: Mapping[str, str] = os.environ, config_get=None) -> dict[str, str]:
    """BuildKit secret id -> the host's package index URLs, for offline sites: the environment first
    (pip reads it before its config), then pip's config. They travel as secrets, never build
    arguments, since an index URL may carry credentials (user:password@) and a build argument a
    RUN step uses is recorded in `docker history`. Only http(s) URLs travel: file:// indexes exist
    on the host, not in the build."""
    config_get = config_get or _pip_config_get
    secrets = {}
    for variable, key, secret in PIP_INDEXES:
        from_env = env.get(variable)
        value, source = (from_env, variable) if from_env else (config_get(key), f"pip's {key} config")
        words = trusted_hosts(source, value) if variable == "PIP_TRUSTED_HOST" else index_urls(source, value)
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
        if source in PIP_CA_SOURCES:
            path = ca_file(source, value)
        else:  # borrowed from other tools' settings: one that names no file is passed over
            path = Path(value) if value and Path(value).is_file() else None
        if path is not None:
            return path, source
    return None


def _pip_config_get(key: str) -> str:
    try:
        out = children.run(["python3", "-m", "pip", "config", "get", key], timeout_s=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The first non-security Debian mirror of the host's apt sources (deb822 or one-line)."""
    for path in sorted(sources_dir.glob("sources.list.d/*.sources")):
        for line in (files.read_system(str(path)) or "").splitlines():
            if line.startswith("URIs:"):
                for uri in line.split()[1:]:
                    if "security" not in uri:
                        return uri
    one_line = sources_dir / "sources.list"
    if one_line.exists():
        for line in (files.read_system(str(one_line)) or "").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1] if not parts[1].startswith("[") else parts[2]
    return ""


def git_revision(repo: Path) -> str:
    try:
        out = children.run(["git", "-C", str(repo), "rev-parse", "HEAD"], timeout_s=10)
    except OSError:
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    dirty = children.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], timeout_s=10).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def pip_find_links() -> list[Path]:
    """The local wheel folders of the host's pip config (find-links), which exist here only."""
    value = _pip_config_get("global.find-links")
    return [Path(p.removeprefix("file://")) for p in value.split() if not p.startswith(("http://", "https://"))]
