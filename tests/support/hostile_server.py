"""A fault injector for the endpoint client: a real TCP server on loopback (port 0) that answers
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
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass

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
            for delay, data in behaviour.pieces:
                if self._stop.wait(delay):
                    return
                connection.sendall(data)
            held_until = time.monotonic() + HOLD_S
            if behaviour.then == REPEAT and behaviour.pieces:
                delay, data = behaviour.pieces[-1]
                while not self._stop.wait(delay) and time.monotonic() < held_until:
                    connection.sendall(data)
            elif behaviour.then == HANG:
                self._stop.wait(HOLD_S)
        except OSError:
            pass    # the client closed the connection: what a client ending at its deadline does
        finally:
            with self._lock:
                self._connections.discard(accepted)
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
