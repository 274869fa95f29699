"""The one HTTP client of every host-side tool that talks to a served endpoint (`build.py smoke`,
its readiness wait, `bench/serve_sweep` and its probes), on `requests`.

Every operation has a total deadline: connect, headers and the whole body (or the whole stream)
end within it, however the server paces its bytes. A watchdog timer shuts the operation's socket
down when the deadline passes, so a read blocked inside requests or urllib3 (a server trickling its
headers a byte at a time, or silent mid-stream) returns at once; between reads the monotonic clock
is checked as well. The name lookup and the connect, which no socket shutdown can end (the system
resolver blocks in C), run in a helper thread that the operation waits for only until its deadline.

Every body and every stream line has a byte cap: a Content-Length over the cap is refused before a
byte of the body is read, and a body or line that grows past it is refused as soon as it does.
Bodies are asked for and read as sent (`Accept-Encoding: identity`), so no decompression can
inflate them past the cap.

Whatever goes wrong is one `EndpointError`: the operation ("GET /v1/models"), what happened and,
where there is one, the fix, in one line. The API key rides in the session's Authorization header
and is never part of an error or a repr.
"""
from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import socket
import threading
import time
from typing import Iterator

import requests
import requests.adapters
import urllib3
import urllib3.connection
import urllib3.exceptions

from buildtool import endpoint
from door.problem import Problem

MAX_DEADLINE_S = 7 * 24 * 3600.0   # a week: longer is no deadline (and past what a timer can wait)
MIB = 1024 * 1024
BODY_CAP = 32 * MIB        # /tokenize of a 256k-token prompt lists its ids: about 2 MiB
LINE_CAP = 1 * MIB         # one server-sent event; a token's chunk is a few hundred bytes
STREAM_CAP = 64 * MIB      # a whole stream
READ_SIZE = 64 * 1024

# What went wrong, besides the wire's own causes (buildtool/endpoint: DNS, TLS, REFUSED, DROPPED,
# NO_ANSWER): the deadline passed, a body or line passed its cap, the answer is not what the
# endpoint answers (not JSON, not UTF-8, a field of the wrong type), or a status the caller refused.
DEADLINE, TOO_LARGE, SHAPE, STATUS = "deadline", "too large", "shape", "status"


class EndpointError(Problem):
    """One operation against the endpoint failed; str() is one line naming the operation. The one
    Problem that host tooling catches apart: smoke and the benches judge its kind (a deadline, a
    refused port, a cap) and show its operation, message and fix in their own rows. `message` is
    what happened, without the operation; str() and line() the whole one line, the fix included."""

    def __init__(self, operation: str, message: str, fix: str = "", *, kind: str = SHAPE,
                 status: int | None = None, final: bool = False):
        self.operation, self._message = operation, " ".join(message.split())
        self.kind, self.status, self.final = kind, status, final
        fix = " ".join(fix.split())
        super().__init__("; ".join(part for part in (f"{operation}: {self._message}", fix) if part), fix)

    @property
    def message(self) -> str:
        return self._message

    def line(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"EndpointError({str(self)!r})"


def parse_json(text: str) -> object:
    """JSON text as a value; ValueError when it is not JSON, or nests deeper than Python's parser
    recurses (a 32 MiB body of `[` would)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


@dataclasses.dataclass(frozen=True)
class Answer:
    """A whole answer: its status and its body as sent (at most the operation's cap)."""
    operation: str
    status: int
    body: bytes
    content_type: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        """The body as UTF-8 text, or a refusal naming the operation."""
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EndpointError(self.operation, f"HTTP {self.status} with a body that is not UTF-8 text "
                                                f"(byte {exc.start})", status=self.status) from None

    def shown(self, limit: int = 300) -> str:
        """The body for a message: decoded leniently, on one line, cut at `limit` characters."""
        text = " ".join(self.body[: limit * 4].decode("utf-8", "replace").split())
        return text if len(text) <= limit else text[:limit] + "..."

    def json(self) -> object:
        """The body as JSON, or a refusal naming the operation."""
        try:
            return parse_json(self.text())
        except ValueError:
            raise EndpointError(self.operation, f"HTTP {self.status} with a body that is not JSON "
                                                f"({self.shown(80)!r})",
                                "is this a vLLM OpenAI server? check the URL", status=self.status) from None


@dataclasses.dataclass(frozen=True)
class Event:
    """One server-sent `data:` line and when it was read (time.monotonic())."""
    data: str
    arrived: float


_current = threading.local()


def valid_deadline(seconds: float) -> bool:
    """A deadline the client takes: positive and finite, at most MAX_DEADLINE_S (NaN is not)."""
    return 0 < seconds <= MAX_DEADLINE_S


class _Watch:
    """The connections one operation uses, shut down when its deadline passes."""

    def __init__(self, operation: str, deadline_s: float):
        if not valid_deadline(deadline_s):
            raise ValueError(f"{operation}: a deadline of {deadline_s} s; expected more than 0, "
                             f"at most {MAX_DEADLINE_S:g}")
        self.operation, self.deadline_s = operation, deadline_s
        self.ends = time.monotonic() + deadline_s
        self.expired = False
        self._finished = False
        self._connections: list = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, connection) -> None:
        with self._lock:
            self._connections.append(connection)
            if self.expired:
                _shut(connection)

    def remaining(self) -> float:
        return max(self.ends - time.monotonic(), 0.001)

    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.ends

    def check(self) -> None:
        if self.passed():
            raise self.error()

    def error(self) -> EndpointError:
        return EndpointError(self.operation, f"no complete answer within {self.deadline_s:g} s", kind=DEADLINE)

    def _expire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.expired = True
            for connection in self._connections:
                _shut(connection)

    def finish(self) -> None:
        with self._lock:
            self._finished = True
        self._timer.cancel()


def _shut(connection) -> None:
    """End every read blocked on the connection's socket (an SSL socket's too: the plain
    socket's shutdown, under the TLS layer, so its state is not torn down under the reader)."""
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _within(work, seconds: float, abandon):
    """work()'s value, or None when it has not returned within `seconds`; work then runs on in a
    daemon thread and abandon(value) disposes of what it returns late. Its exception is raised here."""
    box: dict = {}
    lock = threading.Lock()

    def run() -> None:
        try:
            value = work()
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error
            return
        with lock:
            box["value"] = value
            late = box.get("late", False)
        if late:
            abandon(value)
    helper = threading.Thread(target=run, name="endpoint-connect", daemon=True)
    helper.start()
    helper.join(seconds)
    with lock:
        if "value" not in box and "error" not in box:
            box["late"] = True
            return None
    if "error" in box:
        raise box["error"]
    return box["value"]


class _BoundedConnect:
    """A connection whose name lookup and connect end within the operation's deadline."""

    def _new_conn(self):
        watch = getattr(_current, "watch", None)
        if watch is None:
            return super()._new_conn()
        sock = _within(super()._new_conn, watch.remaining(), lambda late: late.close())
        if sock is None:
            raise urllib3.exceptions.ConnectTimeoutError(
                self, f"name lookup and connect to {self.host} did not finish within {watch.deadline_s:g} s")
        return sock


class _BoundedHTTPConnection(_BoundedConnect, urllib3.connection.HTTPConnection):
    pass


class _BoundedHTTPSConnection(_BoundedConnect, urllib3.connection.HTTPSConnection):
    pass


class _Watched:
    def _get_conn(self, timeout=None):
        connection = super()._get_conn(timeout)
        watch = getattr(_current, "watch", None)
        if watch is not None:
            watch.add(connection)
        return connection


class _WatchedHTTPPool(_Watched, urllib3.HTTPConnectionPool):
    ConnectionCls = _BoundedHTTPConnection


class _WatchedHTTPSPool(_Watched, urllib3.HTTPSConnectionPool):
    ConnectionCls = _BoundedHTTPSConnection


class _WatchedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose connection pools hand each connection to the operation's watch."""

    POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(self.POOLS)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = dict(self.POOLS)
        return manager


WIRE_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


class Stream:
    """An answer whose body is read as server-sent events (see EndpointClient.stream)."""

    def __init__(self, operation: str, response: requests.Response, watch: _Watch, client: "EndpointClient",
                 line_cap: int, stream_cap: int):
        self.operation, self.status = operation, response.status_code
        self.done = False        # the stream ended with `data: [DONE]`
        self._response, self._watch, self._client = response, watch, client
        self._line_cap, self._stream_cap = line_cap, stream_cap

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def answer(self) -> Answer:
        """The whole body (an error's), under the client's body cap and the same deadline."""
        body = self._client._body(self.operation, self._response, self._watch, self._client.body_cap)
        return Answer(self.operation, self.status, body, self._response.headers.get("Content-Type", ""))

    def events(self) -> Iterator[Event]:
        """Each `data:` line, as it arrives, until `data: [DONE]` (then .done) or the end."""
        pending, total = b"", 0
        for chunk in self._client._chunks(self.operation, self._response, self._watch):
            total += len(chunk)
            if total > self._stream_cap:
                raise EndpointError(self.operation, f"the stream ran past {self._stream_cap} bytes",
                                    kind=TOO_LARGE)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if len(pending) > self._line_cap:
                raise EndpointError(self.operation, f"a stream line longer than {self._line_cap} bytes",
                                    kind=TOO_LARGE)
            arrived = time.monotonic()
            for line in lines:
                event = self._event(line, arrived)
                if event is not None and event.data == "[DONE]":
                    self.done = True
                    return
                if event is not None:
                    yield event
        event = self._event(pending, time.monotonic())
        if event is not None and event.data == "[DONE]":
            self.done = True
        elif event is not None:
            yield event

    def _event(self, line: bytes, arrived: float) -> Event | None:
        if len(line) > self._line_cap:
            raise EndpointError(self.operation, f"a stream line longer than {self._line_cap} bytes", kind=TOO_LARGE)
        line = line.rstrip(b"\r")
        if not line.startswith(b"data:"):
            return None
        try:
            return Event(line[len(b"data:"):].strip().decode("utf-8"), arrived)
        except UnicodeDecodeError:
            raise EndpointError(self.operation, "a server-sent event that is not UTF-8 text") from None

    def close(self) -> None:
        self._response.close()
        self._watch.finish()


class EndpointClient:
    """HTTP to one served endpoint (its base URL), carrying the API key when one is given.
    Thread-safe per thread: give each thread its own client (requests' sessions are not shared)."""

    def __init__(self, base_url: str, api_key: str | None = None, *, body_cap: int = BODY_CAP,
                 line_cap: int = LINE_CAP, stream_cap: int = STREAM_CAP):
        self.base_url = base_url.rstrip("/")
        self.key_given = bool(api_key)
        self.body_cap, self.line_cap, self.stream_cap = body_cap, line_cap, stream_cap
        self._session = endpoint.session(api_key)
        self._session.headers["Accept-Encoding"] = "identity"
        adapter = _WatchedAdapter()
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def __repr__(self) -> str:
        return f"EndpointClient({self.base_url!r}, {'with' if self.key_given else 'without'} an API key)"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._session.close()

    def url(self, path: str) -> str:
        return self.base_url + path

    def expect_ok(self, answer: Answer) -> Answer:
        """The answer when its status is 2xx; otherwise a refusal naming its cause."""
        if answer.ok:
            return answer
        reason = endpoint.status_reason(answer.status, self.key_given)
        raise EndpointError(answer.operation, reason or f"answered HTTP {answer.status}: {answer.shown(200)}",
                            kind=STATUS, status=answer.status, final=answer.status in (401, 403, 404))

    # --- operations -----------------------------------------------------------------------

    def exchange(self, method: str, path: str, *, deadline_s: float, json_body=None, with_key: bool = True,
                 cap: int | None = None) -> Answer:
        """Send the request and read the whole answer, any status, within deadline_s."""
        operation = f"{method} {path}"
        response, watch = self._send(operation, method, path, deadline_s, json_body, with_key, stream=False)
        try:
            body = self._body(operation, response, watch, cap or self.body_cap)
            watch.check()
            return Answer(operation, response.status_code, body, response.headers.get("Content-Type", ""))
        finally:
            response.close()
            watch.finish()

    def get(self, path: str, *, deadline_s: float, **kwargs) -> Answer:
        return self.exchange("GET", path, deadline_s=deadline_s, **kwargs)

    def post(self, path: str, body, *, deadline_s: float, **kwargs) -> Answer:
        return self.exchange("POST", path, deadline_s=deadline_s, json_body=body, **kwargs)

    @contextlib.contextmanager
    def stream(self, method: str, path: str, *, deadline_s: float, json_body=None,
               with_key: bool = True) -> Iterator[Stream]:
        """The answer as a Stream, its headers read; its events (or its error body) all within
        deadline_s of the request."""
        operation = f"{method} {path}"
        response, watch = self._send(operation, method, path, deadline_s, json_body, with_key, stream=True)
        stream = Stream(operation, response, watch, self, self.line_cap, self.stream_cap)
        try:
            yield stream
        finally:
            stream.close()

    # --- the wire -------------------------------------------------------------------------

    def _send(self, operation: str, method: str, path: str, deadline_s: float, json_body, with_key: bool,
              stream: bool) -> tuple[requests.Response, _Watch]:
        watch = _Watch(operation, deadline_s)
        headers = None if with_key else {"Authorization": None}   # requests drops a header set to None
        _current.watch = watch
        try:
            # No redirects: the operation talks to the endpoint it names (and its key goes nowhere else).
            response = self._session.request(method, self.url(path), json=json_body, headers=headers, stream=True,
                                             allow_redirects=False, timeout=(watch.remaining(), watch.remaining()))
        except WIRE_ERRORS as exc:
            watch.finish()
            raise self._failure(operation, exc, watch, None) from None
        except BaseException:
            watch.finish()
            raise
        finally:
            _current.watch = None
        if watch.passed():
            response.close()
            watch.finish()
            raise watch.error()
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            response.close()
            watch.finish()
            raise EndpointError(operation, f"answered with Content-Encoding {encoding[:40]!r}, though only "
                                           "identity was accepted", status=response.status_code)
        return response, watch

    def _chunks(self, operation: str, response: requests.Response, watch: _Watch) -> Iterator[bytes]:
        """The body's bytes as they arrive, checking the deadline between reads."""
        try:
            while True:
                watch.check()
                chunk = response.raw.read1(READ_SIZE, decode_content=False)
                if not chunk:
                    watch.check()
                    return
                yield chunk
        except EndpointError:
            raise
        except WIRE_ERRORS as exc:
            raise self._failure(operation, exc, watch, response.status_code) from None

    def _body(self, operation: str, response: requests.Response, watch: _Watch, cap: int) -> bytes:
        declared = response.headers.get("Content-Length", "").strip()
        if declared.isdigit() and int(declared) > cap:
            raise EndpointError(operation, f"HTTP {response.status_code} with a body of {int(declared)} bytes, over "
                                           f"the cap of {cap} bytes", kind=TOO_LARGE, status=response.status_code)
        body = bytearray()
        for chunk in self._chunks(operation, response, watch):
            body += chunk
            if len(body) > cap:
                raise EndpointError(operation, f"HTTP {response.status_code} with a body over the cap of {cap} "
                                               "bytes", kind=TOO_LARGE, status=response.status_code)
        return bytes(body)

    def _failure(self, operation: str, exc: BaseException, watch: _Watch, status: int | None) -> EndpointError:
        if isinstance(exc, requests.ConnectTimeout):
            failure = endpoint.wire_failure(exc, self.base_url, watch.deadline_s)
            return EndpointError(operation, failure.message, failure.fix, kind=failure.kind)
        if watch.passed() or isinstance(exc, (requests.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
            return watch.error()
        if status is not None:
            return EndpointError(operation, f"the connection closed after HTTP {status}, before the whole body",
                                 "see the server's log", kind=endpoint.DROPPED, status=status)
        failure = endpoint.wire_failure(exc, self.base_url, watch.deadline_s)
        return EndpointError(operation, failure.message, failure.fix, kind=failure.kind, final=failure.final)
