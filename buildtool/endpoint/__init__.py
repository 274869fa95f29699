"""The HTTP side of every host-side tool that talks to a served endpoint (`build.py smoke`,
`bench/serve_sweep` and its record and depth probes): a `requests` session that carries the API key,
and the cause of a failed exchange in one line.

The causes a user must tell apart, and how soon each is final:
- DNS: the host name does not resolve. Final at once: waiting does not make a name resolve.
- TLS: the handshake failed (an unknown CA, a plain-HTTP server behind https://). Final at once.
- refused: nothing listens on the port. Final after a short grace (a container may be binding it).
- dropped / no answer: accepted, then closed or silent, as a starting container's port proxy does.
- 401/403: the server (or a proxy in front) wants an API key, or refuses the one given. Final.
- 503: the engine is still loading; not ready until the caller's readiness timeout.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import pathlib
import socket
import ssl
from urllib.parse import urlsplit

import requests
import urllib3.exceptions

from door import files
from door.problem import Problem, UsageError

KEY_ENV = "OPENAI_API_KEY"
KEY_FILE_FLAG = "--api-key-file"
KEY_FILE_CAP = 64 * 1024

DNS, TLS, REFUSED, DROPPED, NO_ANSWER = "dns", "tls", "refused", "dropped", "no answer"
FINAL_AT_ONCE = (DNS, TLS)


def read_api_key(key_file: str | os.PathLike | None, environ=os.environ) -> str | None:
    """The key from `--api-key-file PATH` (first line, whitespace stripped), else OPENAI_API_KEY,
    else None. The key itself is never part of a message."""
    if key_file is None:
        return environ.get(KEY_ENV) or None
    path = pathlib.Path(key_file)
    name = f"{KEY_FILE_FLAG} {files.shown(str(path))}"
    if not os.path.lexists(path):
        raise UsageError(f"{name}: no such file; give the file holding the server's API key")
    try:  # a regular file only: a FIFO or a device would block or never end
        key = files.read_text(str(path), name, KEY_FILE_CAP).strip()
    except Problem as exc:
        raise UsageError(f"{exc}; give a regular file holding the server's API key alone, "
                          "readable by this user") from None
    if "\n" in key:
        raise UsageError(f"{KEY_FILE_FLAG} {path}: more than one line; the file holds the key alone")
    if key.startswith("\ufeff"):
        raise UsageError(f"{name} starts with a byte-order mark, which no HTTP header carries; "
                          "save the file as plain UTF-8 without a BOM")
    if not (key.isascii() and key.isprintable()) or any(c.isspace() for c in key):
        raise UsageError(f"{name} holds a character an HTTP header cannot carry (non-ASCII, a control "
                          "character or a space); write the key alone, as the server was given it")
    return key


def add_key_argument(parser) -> None:
    parser.add_argument(KEY_FILE_FLAG, metavar="PATH",
                        help=f"file holding the server's API key, sent as a bearer token "
                             f"(default: ${KEY_ENV} when set; the key is never printed)")


def session(api_key: str | None) -> requests.Session:
    """A session whose every request carries the key as `Authorization: Bearer`."""
    s = requests.Session()
    if api_key:
        s.headers["Authorization"] = f"Bearer {api_key}"
    return s


def _host(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def _causes(exc: BaseException):
    """The exception and what it wraps: requests puts urllib3's error in args, urllib3 its
    cause in .reason, Python the rest in __cause__/__context__."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        todo += [getattr(e, "reason", None) if isinstance(getattr(e, "reason", None), BaseException) else None,
                 e.__cause__, e.__context__]


@dataclasses.dataclass(frozen=True)
class WireFailure:
    kind: str        # DNS, TLS, REFUSED, DROPPED or NO_ANSWER
    message: str     # what happened
    fix: str = ""    # what to do

    @property
    def final(self) -> bool:
        return self.kind in FINAL_AT_ONCE

    @property
    def line(self) -> str:
        return "; ".join(part for part in (self.message, self.fix) if part)


def _is_address(name: str | None) -> bool:
    """Whether the URL's host is an IP address (no name lookup before the connect)."""
    try:
        ipaddress.ip_address(name or "")
        return True
    except ValueError:
        return False


def wire_failure(exc: requests.RequestException, url: str, timeout_s: float | None = None) -> WireFailure:
    """What went wrong on the wire, in one line naming the cause."""
    host = _host(url)
    name = urlsplit(url).hostname
    causes = list(_causes(exc))
    if any(isinstance(e, (urllib3.exceptions.NameResolutionError, socket.gaierror)) for e in causes):
        return WireFailure(DNS, f"cannot resolve the host name {name!r} (DNS)", "check the host in the URL")
    if isinstance(exc, requests.exceptions.SSLError) or any(isinstance(e, ssl.SSLError) for e in causes):
        reason = next((getattr(e, "reason", None) or getattr(e, "verify_message", None)
                       for e in causes if isinstance(e, ssl.SSLError)), None) or "handshake failed"
        return WireFailure(TLS, f"TLS with {host} failed ({str(reason).lower().replace('_', ' ')})",
                           "if the server's certificate is from a private CA, point REQUESTS_CA_BUNDLE at that "
                           "CA; if it serves plain HTTP, use an http:// URL")
    if any(isinstance(e, ConnectionRefusedError) for e in causes) or "refused" in str(exc).lower():
        return WireFailure(REFUSED, f"connection refused: nothing listens on {host}",
                           "start the server, or check the port in the URL")
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return WireFailure(NO_ANSWER, f"no answer from {host} within {timeout_s or 0:g} s",
                           "check the address: a firewall may be dropping the packets" if _is_address(name) else
                           "check the address: the host name's lookup (DNS) may hang, or a firewall drop the packets")
    if isinstance(exc, requests.Timeout):
        return WireFailure(NO_ANSWER, f"{host} accepted the connection but sent no reply within {timeout_s or 0:g} s")
    return WireFailure(DROPPED, f"{host} accepted the connection, then closed it without a reply",
                       "a container still starting behind its port does this; otherwise see the server's log")


def status_reason(status: int, key_given: bool) -> str | None:
    """What an answer with its own cause means, with the fix, in one line; None for the rest."""
    if status in (401, 403):
        if key_given:
            return (f"answered HTTP {status}: the API key was refused; check the key in "
                    f"{KEY_FILE_FLAG} or ${KEY_ENV} against the server's")
        return (f"answered HTTP {status}: the server wants an API key; set ${KEY_ENV} "
                f"or pass {KEY_FILE_FLAG} PATH")
    if status == 503:
        return "answered HTTP 503: the engine is not (or no longer) ready"
    if status == 404:
        return "answered HTTP 404: this is not a vLLM OpenAI server; check the URL"
    return None


def status_cause(status: int, url: str, key_given: bool) -> str | None:
    """One line for the answers that have a cause of their own, naming the URL, else None."""
    reason = status_reason(status, key_given)
    return f"{url} {reason}" if reason else None
