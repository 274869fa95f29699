"""A standin for the Hub's file server's byte ranges, in front of olah: olah's local-mirror route
answers a `Range:` request with the whole file (200), where the Hub's CDN answers 206 with the rest.
Every request goes to olah as it came (its headers, redirects followed); a file asked with
`Range: bytes=N-` is answered 206 with the bytes from N on. `answered` counts the body bytes sent."""
from __future__ import annotations

import http.server
import re
import threading

from tests.support.loopback_server import LoopbackServer
import urllib.error
import urllib.request

RANGE = re.compile(r"bytes=(\d+)-$")
PASSED = ("authorization", "user-agent", "accept", "accept-encoding")


class RangeStandin(LoopbackServer):
    def __init__(self, upstream: str):
        standin = self
        self.answered = 0
        self.ranges: list[str] = []
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, send_body: bool) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() in PASSED}
                request = urllib.request.Request(upstream + self.path, headers=headers, method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=60) as reply:
                        status, body, reply_headers = reply.status, reply.read(), reply.headers
                except urllib.error.HTTPError as error:
                    status, body, reply_headers = error.code, error.read(), error.headers
                wanted = RANGE.match(self.headers.get("Range", ""))
                start = int(wanted.group(1)) if wanted and status == 200 and "/resolve/" in self.path else None
                if start is not None:
                    with standin._lock:
                        standin.ranges.append(self.headers["Range"])
                    total = int(reply_headers.get("Content-Length", len(body)))
                    body = body[start:] if send_body else b""
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
                    length = total - start
                else:
                    self.send_response(status)
                    length = int(reply_headers.get("Content-Length", len(body)))
                for key, value in reply_headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-range",
                                           "date", "server"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)
                    with standin._lock:
                        standin.answered += len(body)

            def do_GET(self) -> None:
                self._answer(True)

            def do_HEAD(self) -> None:
                self._answer(False)

        super().__init__(Handler)
