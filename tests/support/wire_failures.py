"""Real sockets that fail the way a user's endpoint does, for the clients' error lines (no mocks):
a port nothing listens on, a name that cannot resolve (RFC 6761's .invalid), an HTTPS server
with a self-signed certificate on loopback, and an HTTP server answering one status to every
request (401 as a proxy wanting credentials does, 403, 503 as a loading engine)."""
from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

UNRESOLVABLE_URL = "http://nonexistent.invalid:8000"


def refused_url() -> str:
    """A loopback port bound and closed again: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _status_handler(status: int):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            body = b'{"error": "Unauthorized"}' if status == 401 else b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer
    return Handler


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer):
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def status_server(status: int):
    """http://127.0.0.1:PORT answering `status` to every GET and POST."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _status_handler(status))) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


def self_signed_cert(folder: Path, alt_names: str | None = None) -> tuple[Path, Path]:
    """(certificate, key) for CN=localhost, made by the openssl command line; `alt_names` (e.g.
    "DNS:localhost") makes it one a client trusting it accepts for those names."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    extension = ["-addext", f"subjectAltName={alt_names}"] if alt_names else []
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=localhost", *extension],
                   check=True, capture_output=True, timeout=120)
    return cert, key


@contextlib.contextmanager
def tls_server(folder: Path, status: int = 200):
    """https://127.0.0.1:PORT with a self-signed certificate no client trusts."""
    cert, key = self_signed_cert(folder)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _status_handler(status))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda request, address: None    # the client's failed handshake
    with serving(server):
        yield f"https://127.0.0.1:{server.server_address[1]}"
