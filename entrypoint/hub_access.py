"""Whether the Hugging Face Hub can be reached at all, asked in seconds before a model that is not in
the cache is left to the server (whose download client retries for minutes on a host without
network). The endpoint is huggingface_hub's own (HF_ENDPOINT when set); an HTTPS proxy in the
environment is what the download would connect to, so that is what is probed."""
from __future__ import annotations

import os
import socket
from typing import Mapping
from urllib.parse import urlsplit

from door import files
from door.problem import Problem
from .settings import SettingsError

PROBE_TIMEOUT_S = 3.0
# huggingface_hub's own setting for the token's file (default $HF_HOME/token): the Hub client reads
# the token from it, so it is in no process's environment, argv or log (the Kubernetes pods mount
# the Secret there). The preflight only judges the file; the token is never kept.
ENV_HF_TOKEN_PATH = "HF_TOKEN_PATH"
MAX_TOKEN_FILE_BYTES = 64 * 1024


def token_file_refusal(path: str | None, present=os.path.lexists) -> SettingsError | None:
    """Why the file HF_TOKEN_PATH names cannot serve as the token, None when it can or when there
    is none (no file is no token: huggingface_hub then asks anonymously). An unreadable one would
    raise PermissionError in the server, after the preflight, at its first Hub request."""
    if path is None or not present(path):
        return None
    fix = (f"Put the token alone in that file (e.g. a Secret mounted there), readable by uid "
           f"{os.geteuid()} or group 0, or unset {ENV_HF_TOKEN_PATH}.")
    try:
        data = files.read_bytes(path, "the file", MAX_TOKEN_FILE_BYTES)
    except Problem as problem:
        return SettingsError(ENV_HF_TOKEN_PATH, path, f"a readable token file, or none at that path ({problem})", fix)
    # huggingface_hub sends the file's stripped text as an HTTP header: a byte-order mark, a byte
    # that is not ASCII or a second line would fail the server's first Hub request, not here
    token = data.strip()
    if token.startswith(b"\xef\xbb\xbf"):
        return SettingsError(ENV_HF_TOKEN_PATH, path, "a token file without a byte-order mark",
                             f"Save it as plain text without a BOM. {fix}")
    if not (token.isascii() and token.decode("ascii").isprintable()) or any(c in token for c in b" \t\r\n"):
        return SettingsError(ENV_HF_TOKEN_PATH, path, "one token on one line of printable ASCII", fix)
    return None


def endpoint(env: Mapping[str, str]) -> str | None:
    if env.get("HF_ENDPOINT", "").strip():
        return env["HF_ENDPOINT"].strip()
    try:
        from huggingface_hub import constants
    except Exception:  # no huggingface_hub here: nothing to ask
        return None
    return constants.ENDPOINT


def proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    scheme = urlsplit(url).scheme
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    return next((env[name] for name in names if env.get(name, "").strip()), None)


def unreachable(env: Mapping[str, str] = os.environ, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[str, str] | None:
    """(what was probed, why it failed) when the Hub (or the proxy in front of it) cannot be reached."""
    url = endpoint(env)
    if not url:
        return None
    target = proxy_for(url, env) or url
    parts = urlsplit(target if "://" in target else "http://" + target)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    if not host:
        return target, "no host name in it"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        return host, f"its name does not resolve: {error.strerror}"
    errors = []
    for family, kind, proto, _, address in addresses[:3]:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(timeout_s)
                probe.connect(address)
                return None
        except OSError as error:
            errors.append(error.strerror or type(error).__name__)
    return f"{host}:{port}", f"no connection: {', '.join(dict.fromkeys(errors))}"
