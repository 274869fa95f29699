"""A standin for the Hub's answer to a gated repository asked without a token: olah (the real mirror
the fetch tests use) has no notion of gating, so this answers every request as the Hub does for a
gated model without access: 401 with the Hub's error headers (X-Error-Code: GatedRepo and its
X-Error-Message), which huggingface_hub turns into GatedRepoError. `requests` keeps each request line
and its Authorization header (None when the client sent none)."""
from __future__ import annotations

import http.server

from tests.support.loopback_server import LoopbackServer

MESSAGE = "Access to model {repo} is restricted. You must have access to it and be authenticated to access it."


class GatedStandin(LoopbackServer):
    def __init__(self):
        standin = self
        self.requests: list[tuple[str, str | None]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _gated(self, send_body: bool) -> None:
                standin.requests.append((self.requestline, self.headers.get("Authorization")))
                parts = self.path.split("/")
                repo = "/".join(parts[3:5]) if self.path.startswith("/api/models/") else "/".join(parts[1:3])
                body = (f'{{"error": "{MESSAGE.format(repo=repo)}"}}').encode()
                self.send_response(401)
                self.send_header("X-Error-Code", "GatedRepo")
                self.send_header("X-Error-Message", MESSAGE.format(repo=repo))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def do_GET(self) -> None:
                self._gated(True)

            def do_HEAD(self) -> None:
                self._gated(False)

        super().__init__(Handler)
