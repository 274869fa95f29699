"""Values a build takes from the host's own configuration, never written in the repo."""
import subprocess
from pathlib import Path


def pip_mirror_args() -> dict:
    """PIP_INDEX_URL / PIP_EXTRA_INDEX_URL of the host's pip config, for offline sites.

    Only http(s) URLs travel: file:// indexes exist on the host, not in the build.
    """
    args = {}
    for key, arg in (("global.index-url", "PIP_INDEX_URL"), ("global.extra-index-url", "PIP_EXTRA_INDEX_URL")):
        value = _pip_config_get(key)
        urls = [u for u in value.split() if u.startswith(("http://", "https://"))]
        if urls:
            args[arg] = " ".join(urls)
    return args


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
