"""A TCP proxy on loopback (port 0) in front of a real server that kills the first connection whose
answer passes `cut_after` bytes, mid-body, as a dropped link does; every later connection is passed
whole. `requests` holds the raw request heads it forwarded (to show a client's Range: resume),
`answered` the bytes of every answer passed on. With `stall`, the cut connection is held open with
nothing more sent (a link gone quiet), so the client waits until it is killed."""
from __future__ import annotations

import socket
import threading


class CuttingProxy:
    def __init__(self, upstream_port: int, cut_after: int, stall: bool = False):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.stall = stall
        self.cuts = 0
        self.answered = 0
        self._quiet = threading.Event()
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "CuttingProxy":
        self._start(self._accept)
        return self

    def __exit__(self, *exc) -> None:
        self._quiet.set()
        self._listener.close()

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._start(self._forward_requests, client, upstream)
            self._start(self._forward_answers, upstream, client)

    def _forward_requests(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                with self._lock:
                    self.requests.append(data)
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream)

    def _forward_answers(self, upstream: socket.socket, client: socket.socket) -> None:
        sent = 0
        try:
            while data := upstream.recv(65536):
                with self._lock:
                    cut = self.cuts == 0 and sent + len(data) > self.cut_after
                    if cut:
                        self.cuts += 1
                if cut:
                    client.sendall(data[:self.cut_after - sent])
                    with self._lock:
                        self.answered += self.cut_after - sent
                    if self.stall:
                        self._quiet.wait()
                    break
                client.sendall(data)
                sent += len(data)
                with self._lock:
                    self.answered += len(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
