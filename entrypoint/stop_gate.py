"""A clean 503 for a request that arrives while the server stops.

During the drain (vLLM's --shutdown-timeout, entrypoint/command.py) uvicorn still accepts
connections, but vLLM has already shut down its renderer's executor: a new request got HTTP 500
"cannot schedule new futures after shutdown". The entrypoint passes this middleware to vLLM's
`--middleware` (an import path; vLLM 0.32 and 0.33 add a class with app.add_middleware), and
entrypoint/graceful_stop.py sets STOPPING as AsyncLLM.shutdown begins (the stop signal, or the
engine's death). From then on every new HTTP request but /metrics gets 503 with Retry-After and
`Connection: close`, so a client or a load balancer retries elsewhere; requests already running are
not touched. /metrics stays open, so the drain can be watched.

A plain ASGI class: standard library only, nothing imported from vLLM or Starlette."""
from __future__ import annotations

import json
import threading

MIDDLEWARE = "entrypoint.stop_gate.RefuseWhileStopping"
STOPPING = threading.Event()
# A stopping instance does not come back within seconds (a restart loads the model again); the
# client's next try should find another instance behind the same address, or this one restarted.
RETRY_AFTER_S = 5
OPEN_PATHS = frozenset({"/metrics"})
MESSAGE = "The server is stopping and takes no new requests; retry on another instance."
BODY = json.dumps({"error": {"message": MESSAGE, "type": "ServiceUnavailable", "param": None,
                             "code": 503}}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode()),
           (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]


def refused(scope: dict, stopping: bool) -> bool:
    """Whether a request with this ASGI scope gets the 503: HTTP only, once the stop began."""
    return stopping and scope.get("type") == "http" and scope.get("path") not in OPEN_PATHS


class RefuseWhileStopping:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if not refused(scope, STOPPING.is_set()):
            return await self.app(scope, receive, send)
        await send({"type": "http.response.start", "status": 503, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})
