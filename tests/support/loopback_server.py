"""An HTTP server on 127.0.0.1 (port 0) served from a daemon thread while a `with` block runs: the
body of the standins that answer as one part of the Hub does."""
from __future__ import annotations

import http.server
import threading


class LoopbackServer:
    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]):
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
