"""The hostile HTTP peer: every remote read this project makes is tested against it.

HostileServer, a fault injector for the endpoint client: a real TCP server on loopback (port 0) that answers
every request by a Behaviour, byte by byte: pieces written after their delays, then the connection
closed, held open in silence, or fed the last piece again and again. No HTTP library shapes what it
sends, so it can trickle headers, declare a 2 GiB body, never end a stream, send lines without end,
invalid UTF-8 or JSON of the wrong types, or close mid-body.

    with HostileServer(trickle(ok_json({"data": []}), every_s=1.0)) as server:
        EndpointClient(server.url).get("/v1/models", deadline_s=2)

`server.behaviour` may be replaced between requests; `server.requests` lists the raw request heads
received (to show what the client sent, e.g. its Authorization header).

"For ever" ends after HOLD_S: a client that lacks its deadline then fails its test's bound on time
(deadline + tests/support/slack.py's slack, far less) instead of hanging the run."""
from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable  # noqa: F401 (in the replies' annotations)

from tests.support.slack import SCHEDULING_SLACK_S

CLOSE, HANG, REPEAT = "close", "hang", "repeat"
GiB = 1024 ** 3
HOLD_S = 4 * SCHEDULING_SLACK_S


@dataclass(frozen=True)
class Behaviour:
    pieces: tuple[tuple[float, bytes], ...]   # (delay before it, bytes)
    then: str = CLOSE                         # CLOSE, HANG (silent, open) or REPEAT (the last piece, forever)


def head(status: int = 200, headers: dict | None = None, reason: str = "OK") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(body: bytes, status: int = 200, content_type: str = "application/json", **headers) -> bytes:
    return head(status, {"Content-Type": content_type, "Content-Length": len(body), "Connection": "close",
                         **headers}) + body


def ok_json(value, status: int = 200) -> bytes:
    return answer(json.dumps(value).encode(), status)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def once(data: bytes) -> Behaviour:
    return Behaviour(((0.0, data),))


def trickle(data: bytes, every_s: float = 1.0, then: str = CLOSE) -> Behaviour:
    """One byte at a time, every_s apart."""
    return Behaviour(tuple((every_s, data[i:i + 1]) for i in range(len(data))), then)


def endless_events(event: bytes = b'data: {"choices": [{"text": " w"}]}\n\n', every_s: float = 0.05) -> Behaviour:
    """A 200 event stream that never ends: the same event, chunked, every_s apart."""
    stream_head = head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})
    return Behaviour(((0.0, stream_head), (every_s, chunk(event))), REPEAT)


def endless_line(piece: bytes = b"x" * 65536, prefix: bytes = b"data: ") -> Behaviour:
    """A 200 event stream whose first line never ends."""
    stream_head = head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})
    return Behaviour(((0.0, stream_head + chunk(prefix)), (0.0, chunk(piece))), REPEAT)


def declared_huge(length: int = 2 * GiB, piece: bytes = b"\0" * 65536) -> Behaviour:
    """A 200 declaring `length` bytes of body, then garbage as fast as the client takes it."""
    return Behaviour(((0.0, head(200, {"Content-Type": "application/json", "Content-Length": length})),
                      (0.0, piece)), REPEAT)


def unbounded_body(piece: bytes = b"[" * 65536) -> Behaviour:
    """A 200 with no length, chunked, that never ends."""
    return Behaviour(((0.0, head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})),
                      (0.0, chunk(piece))), REPEAT)


def cut_body(declared: int = 1000, sent: bytes = b'{"data": [') -> Behaviour:
    """A 200 declaring `declared` bytes, closed after `sent`."""
    return Behaviour(((0.0, head(200, {"Content-Type": "application/json", "Content-Length": declared}) + sent),))


def play(behaviour: Behaviour, connection: socket.socket, stop: threading.Event) -> None:
    """`behaviour` on `connection`: its pieces after their delays, then closed, held or repeated (until
    `stop` is set or HOLD_S passes). OSError when the client goes away."""
    for delay, data in behaviour.pieces:
        if stop.wait(delay):
            return
        connection.sendall(data)
    held_until = time.monotonic() + HOLD_S
    if behaviour.then == REPEAT and behaviour.pieces:
        delay, data = behaviour.pieces[-1]
        while not stop.wait(delay) and time.monotonic() < held_until:
            connection.sendall(data)
    elif behaviour.then == HANG:
        stop.wait(HOLD_S)


class HostileServer:
    def __init__(self, behaviour: Behaviour, tls: ssl.SSLContext | None = None):
        """`tls`: a server-side context; the answers go over TLS (url then says https://localhost)."""
        self.behaviour, self._tls = behaviour, tls
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._connections: set = set()
        self._lock = threading.Lock()
        self.port = self._listener.getsockname()[1]
        self.url = f"https://localhost:{self.port}" if tls else f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "HostileServer":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for connection in list(self._connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.add(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _read_request(self, connection: socket.socket) -> bool:
        connection.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            piece = connection.recv(65536)
            if not piece:
                return False
            data += piece
        request_head, _, body = data.partition(b"\r\n\r\n")
        self.requests.append(request_head)
        length = next((int(line.split(b":", 1)[1]) for line in request_head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            piece = connection.recv(65536)
            if not piece:
                return False
            body += piece
        return True

    def _serve(self, accepted: socket.socket) -> None:
        behaviour, connection = self.behaviour, accepted
        try:
            if self._tls is not None:
                connection.settimeout(5)
                connection = self._tls.wrap_socket(connection, server_side=True)
            if not self._read_request(connection):
                return
            play(behaviour, connection, self._stop)
        except OSError:
            pass    # the client closed the connection: what a client ending at its deadline does
        finally:
            with self._lock:
                self._connections.discard(accepted)
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


# -- the routed peer: a real http.server whose routes answer with Behaviours -------------------------------

@dataclass(frozen=True)
class Seen:
    """A request as the peer received it."""
    method: str
    path: str
    headers: dict  # lowercase names

    @property
    def range_start(self) -> int:
        found = re.fullmatch(r"bytes=(\d+)-", self.headers.get("range", ""))
        return int(found.group(1)) if found else 0


Reply = "Behaviour | Callable[[Seen], Behaviour]"


def stall_after_headers(status: int = 200, declared: int = 2048) -> Behaviour:
    """The headers of a `declared`-byte answer, then silence with the connection open."""
    return Behaviour(((0.0, head(status, {"Content-Length": declared, "Content-Type": "application/octet-stream"})),),
                     HANG)


def lying_length(body: bytes, declared: int = 2**40) -> Behaviour:
    """A 2 KiB body whose Content-Length says `declared` (a TiB), then the connection closed."""
    return Behaviour(((0.0, head(200, {"Content-Length": declared, "Content-Type": "application/octet-stream"})
                       + body),))


def huge_body(status: int = 200, size: int = 8 * GiB, declared: bool = True, piece: bytes = b"x" * 65536
              ) -> Behaviour:
    """`size` bytes (8 GiB) of body, made as fast as the client reads them; declared or not (then close-delimited)."""
    headers = {"Content-Type": "text/plain", **({"Content-Length": size} if declared else {}), "Connection": "close"}
    return Behaviour(((0.0, head(status, headers, "Forbidden" if status == 403 else "OK")), (0.0, piece)), REPEAT)


def echo_authorization(status: int = 403) -> "Callable[[Seen], Behaviour]":
    """A mirror's refusal that echoes the request's Authorization header in its reason, an
    X-Error-Message header and its body."""
    def reply(seen: Seen) -> Behaviour:
        said = seen.headers.get("authorization", "none")
        body = json.dumps({"error": f"forbidden for {said}", "headers": seen.headers}).encode()
        return once(answer(body, status, **{"X-Error-Message": f"token {said} is not allowed"})
                    .replace(f"{status} OK".encode(), f"{status} Forbidden for {said}".encode(), 1))
    return reply


def redirect(location: str, status: int = 302) -> Behaviour:
    return once(head(status, {"Location": location, "Content-Length": 0, "Connection": "close"}, "Found"))


def file_answer(content: bytes, cut_at: int | None = None, honour_range: bool = True) -> "Callable[[Seen], Behaviour]":
    """`content` as a file server answers it (206 from a `Range: bytes=N-`), the body cut at byte `cut_at`
    of the file on every request (the connection closed there), declaring its whole length."""
    def reply(seen: Seen) -> Behaviour:
        start = seen.range_start if honour_range else 0
        end = len(content) if cut_at is None else max(start, min(cut_at, len(content)))
        headers = {"Content-Type": "application/octet-stream", "Content-Length": len(content) - start,
                   "Connection": "close", "Accept-Ranges": "bytes"}
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(content) - 1}/{len(content)}"
        return once(head(206 if start else 200, headers, "Partial Content" if start else "OK") + content[start:end])
    return reply


def self_linking(value) -> "Callable[[Seen], Behaviour]":
    """A listing page whose next page is itself."""
    def reply(seen: Seen) -> Behaviour:
        return once(answer(json.dumps(value).encode(), Link=f'<{seen.path}>; rel="next"'))
    return reply


class HostilePeer:
    """A real http.server (threaded) on 127.0.0.1, port 0. Each request is answered by the route added
    last whose pattern (a regular expression) matches its path from the start; the reply, a Behaviour
    or a function of the request giving one, is played raw on the socket, so every fault of
    HostileServer is on hand per route. No route: 404. `requests` lists what came (Seen)."""

    def __init__(self):
        self.routes: list[tuple[re.Pattern, object]] = []
        self.requests: list[Seen] = []
        self._stop = threading.Event()
        peer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                seen = Seen(self.command, self.path, {key.lower(): value for key, value in self.headers.items()})
                peer.requests.append(seen)
                reply = peer.reply_for(seen)
                behaviour = reply(seen) if callable(reply) else reply
                if self.command == "HEAD":
                    behaviour = Behaviour((behaviour.pieces[0][0], behaviour.pieces[0][1].split(b"\r\n\r\n")[0]
                                           + b"\r\n\r\n"),) if behaviour.pieces else behaviour
                with contextlib.suppress(OSError):
                    self.wfile.flush()
                    play(behaviour, self.connection, peer._stop)
                self.close_connection = True

            do_GET = do_HEAD = do_POST = _any

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def route(self, pattern: str, reply) -> "HostilePeer":
        self.routes.append((re.compile(pattern), reply))
        return self

    def reply_for(self, seen: Seen):
        path = urllib.parse.unquote(seen.path)
        for pattern, reply in reversed(self.routes):
            if pattern.match(path):
                return reply
        return once(answer(b'{"error": "not found"}', 404, **{"X-Error-Code": "EntryNotFound"}))

    def __enter__(self) -> "HostilePeer":
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def tree_entry(path: str, content: bytes, lfs: bool) -> dict:
    entry = {"type": "file", "path": path, "size": len(content), "oid": blob_id(content)}
    if lfs:
        entry["lfs"] = {"oid": hashlib.sha256(content).hexdigest(), "size": len(content), "pointerSize": 134}
    return entry


class HubPeer(HostilePeer):
    """The hostile peer answering as the Hub's API does for the repositories `publish`ed to it: the
    revision's commit (/api/models/R/revision/REV), the tree at a commit (/api/models/R/tree/C, one page),
    and each file (/R/resolve/C/PATH, 206 for a Range). Routes added after `publish` override it."""

    def publish(self, repo: str, files: dict, commit: str | None = None, revision: str = "main",
                weights=(".safetensors", ".bin")) -> str:
        """`files` ({path: bytes}) as the commit `revision` points at; the commit."""
        commit = commit or hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
        listing = [tree_entry(path, content, path.endswith(tuple(weights))) for path, content in sorted(files.items())]
        quoted = re.escape(repo)
        self.route(rf"/api/models/{quoted}/revision/({re.escape(revision)}|{commit})(\?|$)",
                   once(answer(json.dumps({"id": repo, "sha": commit, "private": False}).encode())))
        self.route(rf"/api/models/{quoted}/tree/{commit}(/|\?|$)", once(answer(json.dumps(listing).encode())))
        for path, content in files.items():
            self.route(rf"/{quoted}/resolve/{commit}/{re.escape(path)}$", file_answer(content))
        return commit
