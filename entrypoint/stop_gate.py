"""A clean 503 for a request that arrives while the server stops.

During the drain (vLLM's --shutdown-timeout, entrypoint/server_command.py) uvicorn still accepts
connections, but vLLM has already shut down its renderer's executor: a new request got HTTP 500
"cannot schedule new futures after shutdown". The entrypoint passes this middleware to vLLM's
`--middleware` (an import path; vLLM 0.32 and 0.33 add a class with app.add_middleware), and
entrypoint/graceful_stop.py sets STOPPING as AsyncLLM.shutdown begins (the stop signal, or the
engine's death). From then on every new HTTP request but /metrics gets 503 with Retry-After and
`Connection: close`, so a client or a load balancer retries elsewhere, and so does one that came in
just before but failed with a 500 inside vLLM after it; requests already running are not touched. /metrics stays open, so the drain can be watched.

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


def gated(scope: dict) -> bool:
    """Whether the gate judges a request with this ASGI scope: HTTP, not /metrics."""
    return scope.get("type") == "http" and scope.get("path") not in OPEN_PATHS


def cut_by_the_stop(status: int, stopping: bool) -> bool:
    """Whether an answer is the stop's doing: a 500 (or an error on its way to become one) once the
    stop began. A request that passed the gate just before it but had not reached the engine yet
    fails inside vLLM (its renderer is shut first: "cannot schedule new futures after shutdown");
    it gets the 503 too."""
    return stopping and status == 500


class RefuseWhileStopping:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if not gated(scope):
            return await self.app(scope, receive, send)
        if STOPPING.is_set():
            return await refuse(send)
        started = replaced = False

        async def send_unless_cut(message):
            nonlocal started, replaced
            if message["type"] == "http.response.start":
                started = True
                if cut_by_the_stop(message["status"], STOPPING.is_set()):
                    replaced = True
                    return await refuse(send)
            if not replaced:  # the app's own body of a replaced answer is dropped
                await send(message)

        try:
            await self.app(scope, receive, send_unless_cut)
        except Exception:
            # vLLM's handler for an unexpected error sits outside every middleware (Starlette's
            # ServerErrorMiddleware): the error comes through here before it becomes the 500.
            if started or not cut_by_the_stop(500, STOPPING.is_set()):
                raise
            await refuse(send)


async def refuse(send) -> None:
    await send({"type": "http.response.start", "status": 503, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
