"""Remote reads on this project's terms, in the image and on the host alike (standard library only).

Every operation has a total deadline (a watchdog shuts the socket when it passes, so a peer that
stalls after the headers or trickles a byte a second ends on time, not after each read's timeout),
a byte cap on every body (error bodies included: a 403 with 8 GiB behind it is read to ERROR_CAP and
dropped), a Content-Length checked against the cap before a byte is read and against what arrives,
at most MAX_REDIRECTS redirects (the Authorization header dropped when one leaves the host), a bound
on resumes (`download`: each one must bring bytes, and there are at most `max_resumes`), and a cycle
check on pagination (`pages`: a next link seen before, or past `max_pages`, is refused).

Every failure is a RemoteProblem: one line naming the input (`name`) and what went wrong, the URL
shown without credentials or query, and nothing of what the peer sent but its status, reason and an
X-Error-Message header passed through door.redact with the secrets this request sent scrubbed out.

    body = get(url, name="the Hub's answer for org/model", deadline_s=30, cap_bytes=16 * 2**20)
"""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.client
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from typing import BinaryIO, Iterator, Mapping

from door.problem import Problem
from door.redact import MASK, redact

KiB, MiB = 1024, 2**20
ERROR_CAP = 64 * KiB        # what is read of an error answer's body (the rest is never read)
MAX_REDIRECTS = 5
MAX_RESUMES = 5
MAX_PAGES = 1000
CHUNK = 256 * KiB
HEADER_CAP = 64 * KiB       # http.client's own limits: 64 KiB a line, 100 headers
REDIRECTS = frozenset((301, 302, 303, 307, 308))


class RemoteProblem(Problem):
    """Why a remote read failed, in one line naming it. `status` is the HTTP status where one came
    (None for a network failure, a deadline, a cap); `headers` the answer's headers (lowercase names)."""

    def __init__(self, message: str, status: int | None = None, headers: Mapping[str, str] | None = None,
                 cut: bool = False, shape: bool = False):
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})
        self.cut = cut      # the connection failed or ended early (not the deadline, not a refusal): worth a resume
        self.shape = shape  # the answer is not one the request allows (past its cap, a lie, a cycle, a loop)


@dataclasses.dataclass(frozen=True)
class Reply:
    status: int
    headers: dict          # lowercase names
    body: bytes
    url: str               # the final URL, after redirects


# -- showing what came back ------------------------------------------------------------------------------

def shown_url(url: str) -> str:
    """scheme://host[:port]/path: no credentials, no query (a presigned URL's signature), no fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unparsable URL)"
    text = f"{parts.scheme}://{host}{port}{parts.path}"
    return text if text.isprintable() else text.encode("unicode_escape", "backslashreplace").decode("ascii")


def secrets_of(headers: Mapping[str, str], url: str = "") -> list[str]:
    """The secret values a request carries: its Authorization's credentials, the URL's password."""
    found = []
    for key, value in headers.items():
        if key.lower() in ("authorization", "proxy-authorization", "cookie") and value:
            found += [value, value.partition(" ")[2].strip()]  # the whole value, and past its scheme
            with contextlib.suppress(ValueError):
                scheme, _, encoded = value.partition(" ")
                if scheme.lower() == "basic":
                    decoded = base64.b64decode(encoded, validate=True).decode("utf-8", "replace")
                    found += [decoded, decoded.partition(":")[2]]
    with contextlib.suppress(ValueError):
        parts = urllib.parse.urlsplit(url)
        found += [part for part in (parts.password, urllib.parse.unquote(parts.password or "")) if part]
    return sorted({value for value in found if value}, key=len, reverse=True)


def scrubbed(text: str, secrets: list[str]) -> str:
    """`text` on one line, printable, secrets masked, at most 200 characters."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = redact(" ".join(text.split()))
    text = text if text.isprintable() else text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text[:200]


# -- one exchange ----------------------------------------------------------------------------------------

class _Watchdog:
    """Shuts the connection's socket when the operation's deadline passes (the read blocked on it then
    fails at once, however the peer paces its bytes)."""

    def __init__(self, deadline: float):
        self.deadline, self.fired, self._sock = deadline, False, None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def cancel(self) -> None:
        self._timer.cancel()

    @property
    def expired(self) -> bool:
        return self.fired or time.monotonic() >= self.deadline


def _proxy_for(parts: urllib.parse.SplitResult) -> str | None:
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxy


def _connection(parts: urllib.parse.SplitResult, timeout: float, headers: dict) -> http.client.HTTPConnection:
    """A connection for `parts` (through HTTP(S)_PROXY unless NO_PROXY names the host)."""
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"a {parts.scheme or 'schemeless'} URL (only http and https are read)")
    host, port = parts.hostname or "", parts.port
    proxy = _proxy_for(parts)
    context = ssl.create_default_context() if parts.scheme == "https" else None
    if proxy is None:
        if context is not None:
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=timeout)
    proxied = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if proxied.username is not None:
        pair = f"{urllib.parse.unquote(proxied.username)}:{urllib.parse.unquote(proxied.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    if context is None:  # plain HTTP: the proxy is asked for the absolute URL
        return http.client.HTTPConnection(proxied.hostname or "", proxied.port, timeout=timeout)
    connection = http.client.HTTPSConnection(proxied.hostname or "", proxied.port, timeout=timeout, context=context)
    tunnel = {key: headers.pop(key) for key in ("Proxy-Authorization",) if key in headers}
    connection.set_tunnel(host, port, headers=tunnel)
    return connection


def _target(parts: urllib.parse.SplitResult, proxied: bool) -> str:
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if proxied and parts.scheme == "http":
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        return f"http://{netloc}{path}"
    return path


@contextlib.contextmanager
def _exchange(url: str, name: str, deadline: float, headers: Mapping[str, str] | None, method: str = "GET",
              idle_s: float | None = None, body: bytes | None = None
              ) -> Iterator[tuple[http.client.HTTPResponse, str, list[str], _Watchdog]]:
    """The response to `method url` after redirects (at most MAX_REDIRECTS), its final URL, the secrets
    sent and the watchdog; RemoteProblem for a network failure or the deadline. A 2xx or an error
    status is yielded alike: the caller reads (within its cap) and judges it."""
    sent = dict(headers or {})
    secrets = secrets_of(sent, url)
    watchdog = _Watchdog(deadline)
    connection = None
    try:
        for hop in range(MAX_REDIRECTS + 1):
            if time.monotonic() >= deadline:
                raise TimeoutError
            parts = urllib.parse.urlsplit(url)
            request_headers = dict(sent)
            if parts.username is not None and not any(key.lower() == "authorization" for key in sent):
                pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
                request_headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            secrets = sorted(set(secrets) | set(secrets_of(request_headers, url)), key=len, reverse=True)
            remaining = max(0.001, deadline - time.monotonic())
            connection = _connection(parts, min(remaining, idle_s or remaining), request_headers)
            connection.connect()
            watchdog.watch(connection.sock)
            connection.request(method, _target(parts, _proxy_for(parts) is not None), body=body, headers=request_headers)
            response = connection.getresponse()
            if response.status not in REDIRECTS or not response.getheader("Location"):
                break
            location = urllib.parse.urljoin(url, response.getheader("Location"))
            connection.close()
            connection = None
            if hop == MAX_REDIRECTS:
                raise RemoteProblem(f"{name}: {shown_url(url)} redirected more than {MAX_REDIRECTS} times", shape=True)
            after = urllib.parse.urlsplit(location)
            if after.scheme not in ("http", "https"):
                raise RemoteProblem(f"{name}: {shown_url(url)} redirected to a {after.scheme or 'schemeless'} "
                                    "URL (only http and https are followed)", shape=True)
            if (after.hostname, after.port, after.scheme) != (parts.hostname, parts.port, parts.scheme):
                # another host (a CDN) is not given this one's credentials
                sent = {key: value for key, value in sent.items() if key.lower() != "authorization"}
            if response.status == 303:
                method, body = "GET", None
            url = location
    except BaseException as error:
        watchdog.cancel()
        if connection is not None:
            connection.close()
        if isinstance(error, (OSError, http.client.HTTPException, ValueError, TimeoutError)):
            if watchdog.expired:
                raise _late(name, url, deadline) from None
            raise RemoteProblem(f"{name}: {shown_url(url)} could not be read "
                                f"({scrubbed(_reason(error), secrets)})", cut=True) from None
        raise
    try:
        yield response, url, secrets, watchdog
    finally:
        watchdog.cancel()
        connection.close()


def _reason(error: BaseException) -> str:
    if isinstance(error, socket.timeout):
        return "no answer in time"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _late(name: str, url: str, deadline: float) -> RemoteProblem:
    return RemoteProblem(f"{name}: {shown_url(url)} did not finish within its deadline")


def _header_dict(response: http.client.HTTPResponse) -> dict:
    return {key.lower(): value for key, value in response.getheaders()}


def _declared(response: http.client.HTTPResponse, name: str, url: str) -> int | None:
    text = response.getheader("Content-Length")
    if text is None:
        return None
    if not text.strip().isdigit():
        raise RemoteProblem(f"{name}: {shown_url(url)} declared a Content-Length that is not a number", shape=True)
    return int(text)


def _read_capped(response: http.client.HTTPResponse, cap: int, sink: BinaryIO | None, name: str, url: str,
                 watchdog: _Watchdog) -> bytes:
    """The body up to `cap` bytes (into `sink` when given, else returned); RemoteProblem past the cap,
    when it ends before its declared length (cut), or at the deadline."""
    declared = _declared(response, name, url)
    headers = _header_dict(response)
    if declared is not None and declared > cap:
        raise RemoteProblem(f"{name}: {shown_url(url)} declared {declared} bytes, more than the {cap} "
                            "expected", response.status, headers, shape=True)
    chunks, got = [], 0
    use = chunks.append if sink is None else sink.write  # the local disk's failure (an OSError of sink.write)
    # is the caller's to report, not the peer's: it is written outside the reading's try

    def next_piece() -> bytes:
        """The next piece of the body (b"" at its end); RemoteProblem past the cap, a failed read or the deadline."""
        try:
            if watchdog.expired:
                raise TimeoutError
            piece = response.read1(min(CHUNK, cap + 1 - got))
        except http.client.IncompleteRead:
            return b""  # judged below: fewer bytes than declared
        except (OSError, http.client.HTTPException, ValueError, TimeoutError) as error:
            if watchdog.expired:
                raise _late(name, url, watchdog.deadline) from None
            raise RemoteProblem(f"{name}: {shown_url(url)} failed after {got} bytes ({_reason(error)})",
                                response.status, headers, cut=True) from None
        if got + len(piece) > cap:
            raise RemoteProblem(f"{name}: {shown_url(url)} sent more than the {cap} bytes expected",
                                response.status, headers, shape=True)
        return piece

    while piece := next_piece():
        got += len(piece)
        use(piece)
    if watchdog.expired:
        raise _late(name, url, watchdog.deadline)
    if declared is not None and got != declared:
        raise RemoteProblem(f"{name}: {shown_url(url)} ended after {got} of its {declared} bytes",
                            response.status, headers, cut=True)
    return b"".join(chunks)


def _refusal(response: http.client.HTTPResponse, name: str, url: str, secrets: list[str],
             watchdog: _Watchdog) -> RemoteProblem:
    """An error status as one line: status, reason, the X-Error-Message header scrubbed; at most
    ERROR_CAP of its body read (and never shown)."""
    headers = _header_dict(response)
    with contextlib.suppress(RemoteProblem):
        declared = _declared(response, name, url)
        if declared is None or declared <= ERROR_CAP:
            _read_capped(response, ERROR_CAP, None, name, url, watchdog)
    said = headers.get("x-error-message", "")
    reason = scrubbed(response.reason or "", secrets)
    detail = f": {scrubbed(said, secrets)}" if said else ""
    return RemoteProblem(f"{name}: {shown_url(url)} answered {response.status} {reason}{detail}".rstrip(),
                         response.status, {key: scrubbed(value, secrets) for key, value in headers.items()})


def request(url: str, *, name: str, deadline_s: float, cap_bytes: int, headers: Mapping[str, str] | None = None,
            method: str = "GET", body: bytes | None = None) -> Reply:
    """A 2xx answer whole (its body at most `cap_bytes`), within `deadline_s` in all; RemoteProblem else.
    `body`: what a POST sends (an OSV query)."""
    deadline = time.monotonic() + deadline_s
    with _exchange(url, name, deadline, headers, method, body=body) as (response, final, secrets, watchdog):
        if not 200 <= response.status < 300:
            raise _refusal(response, name, final, secrets, watchdog)
        body = b"" if method == "HEAD" else _read_capped(response, cap_bytes, None, name, final, watchdog)
        return Reply(response.status, _header_dict(response), body, final)


def get(url: str, *, name: str, deadline_s: float, cap_bytes: int, headers: Mapping[str, str] | None = None) -> bytes:
    """The body of a 2xx answer to GET `url`: at most `cap_bytes`, within `deadline_s`; RemoteProblem else."""
    return request(url, name=name, deadline_s=deadline_s, cap_bytes=cap_bytes, headers=headers).body


# -- pagination ------------------------------------------------------------------------------------------

LINK_NEXT = re.compile(r'<([^>]*)>\s*;[^,]*\brel="?next"?', re.IGNORECASE)


def next_link(headers: Mapping[str, str], url: str) -> str | None:
    found = LINK_NEXT.search(headers.get("link", ""))
    return urllib.parse.urljoin(url, found.group(1)) if found else None


def pages(url: str, *, name: str, deadline_s: float, cap_bytes: int, headers: Mapping[str, str] | None = None,
          max_pages: int = MAX_PAGES) -> Iterator[Reply]:
    """Each page of a listing that links its next page (Link: <...>; rel="next"), within one deadline for
    all; a next page already seen (a cycle) or past `max_pages` is a RemoteProblem."""
    deadline = time.monotonic() + deadline_s
    seen: set[str] = set()
    while url is not None:
        if url in seen:
            raise RemoteProblem(f"{name}: page {len(seen) + 1} links back to a page already read "
                                f"({shown_url(url)}): the listing goes round in a cycle", shape=True)
        if len(seen) >= max_pages:
            raise RemoteProblem(f"{name}: more than {max_pages} pages", shape=True)
        seen.add(url)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _late(name, url, deadline)
        page = request(url, name=name, deadline_s=remaining, cap_bytes=cap_bytes, headers=headers)
        yield page
        url = next_link(page.headers, page.url)


# -- downloads, resumed a bounded number of times -------------------------------------------------------

CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)$")


def download(url: str, sink: BinaryIO, *, name: str, size: int, deadline_s: float,
             headers: Mapping[str, str] | None = None, max_resumes: int = MAX_RESUMES, idle_s: float | None = None
             ) -> None:
    """`url`'s body of `size` bytes into `sink` (a file opened r+b, holding the bytes a run before got:
    kept when a run fails so the next resumes), resumed with Range where a connection ends early, at most
    `max_resumes` times and only while each try brings the file further than ever; all within `deadline_s`,
    and a connection silent for `idle_s` counted as cut (resumed)."""
    deadline = time.monotonic() + deadline_s
    resumes, furthest = 0, -1
    while True:
        have = sink.seek(0, os.SEEK_END)
        if have == size:
            return
        if have > size:
            sink.truncate(0)
            have = 0
        if time.monotonic() >= deadline:
            raise _late(name, url, deadline)
        sent = dict(headers or {})
        if have:
            sent["Range"] = f"bytes={have}-"
        try:
            with _exchange(url, name, deadline, sent, idle_s=idle_s) as (response, final, secrets, watchdog):
                if not 200 <= response.status < 300:
                    raise _refusal(response, name, final, secrets, watchdog)
                if have and response.status == 206:
                    found = CONTENT_RANGE.match((response.getheader("Content-Range") or "").strip())
                    if not found or int(found.group(1)) != have or found.group(3) not in ("*", str(size)):
                        raise RemoteProblem(f"{name}: {shown_url(final)} answered a range other than the one asked",
                                            response.status, shape=True)
                elif have:  # the whole file again: start over
                    sink.seek(0)
                    sink.truncate(0)
                    have = 0
                _read_capped(response, size - have, sink, name, final, watchdog)
                sink.flush()
                got = sink.seek(0, os.SEEK_END)
                if got != size:  # a body of no declared length (chunked, or to the close) that ended early
                    raise RemoteProblem(f"{name}: {shown_url(final)} ended after {got} of its {size} bytes", cut=True)
        except RemoteProblem as problem:
            sink.flush()
            now = sink.seek(0, os.SEEK_END)
            if not problem.cut:
                raise
            if now <= furthest or now <= have or resumes >= max_resumes:
                raise RemoteProblem(f"{problem}; given up after {resumes} resume(s), none bringing it further"
                                    if now <= max(furthest, have) else
                                    f"{problem}; given up after {resumes} resume(s)",
                                    problem.status, problem.headers, cut=True) from None
            furthest = now
            resumes += 1
            continue
        return
