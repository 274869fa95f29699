"""Whether the Hugging Face Hub can be reached at all, asked in seconds before a model that is not in
the cache is left to the server (whose download client retries for minutes on a host without
network). The endpoint is huggingface_hub's own (HF_ENDPOINT when set); an HTTPS proxy in the
environment is what the download would connect to, so that is what is probed."""
from __future__ import annotations

import os
import socket
from typing import Mapping
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0


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
