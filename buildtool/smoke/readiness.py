"""Wait for GET /health to answer 200, showing elapsed time and the last answer.

vLLM answers 503 while the engine loads (100 to 230 s for the seed models). A refused
connection before the server ever answered may be a container still starting; after
it answered, it means the server exited.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import requests

from buildtool.status_line import StatusLine

LOGS_HINT = "see `docker compose logs vllm` or `journalctl --user -u vllm-turing`"
REFUSED = "connection refused"


@dataclass
class Readiness:
    ready: bool
    elapsed_s: float
    last: str
    polls: int
    error: str | None = None


def decide(last: str, answered_before: bool, elapsed_s: float, timeout_s: float,
           connect_grace_s: float, url: str) -> str | None:
    """Given the latest poll, None to keep waiting, "" when ready, else why it failed."""
    if last == "200":
        return ""
    if last == REFUSED and answered_before:
        return f"{url} answered, then refused connections: the server exited; {LOGS_HINT}"
    if last == REFUSED and elapsed_s >= connect_grace_s:
        return (f"nothing listens on {url} after {elapsed_s:.0f} s: is the service running? "
                f"{LOGS_HINT}")
    if last == "404":
        return f"{url}/health answered 404: this is not a vLLM OpenAI server; check the URL"
    if elapsed_s >= timeout_s:
        return (f"not ready after {elapsed_s:.0f} s (last answer: {last}); a first load takes "
                f"minutes: raise --timeout, or {LOGS_HINT}")
    return None


def poll(session: requests.Session, url: str, timeout_s: float) -> str:
    """One GET /health: the status code as text, or what went wrong on the wire."""
    try:
        return str(session.get(url + "/health", timeout=timeout_s).status_code)
    except requests.ConnectionError as exc:
        # A refusal shows as ConnectionRefusedError deep in the chain; a proxy
        # accepting then dropping the connection (container starting) does not.
        return REFUSED if "refused" in str(exc).lower() else "connection dropped"
    except requests.Timeout:
        return "no answer"


def wait_ready(session: requests.Session, url: str, *, timeout_s: float, interval_s: float,
               connect_grace_s: float, status: StatusLine) -> Readiness:
    start = time.monotonic()
    answered_before = False
    polls = 0
    while True:
        last = poll(session, url, timeout_s=max(interval_s, 5.0))
        polls += 1
        elapsed = time.monotonic() - start
        answered_before = answered_before or last.isdigit()
        verdict = decide(last, answered_before, elapsed, timeout_s, connect_grace_s, url)
        shown = {"503": "503 still loading", "200": "200 ready"}.get(last, last)
        status.update(f"waiting for {url}/health  {elapsed:5.0f} s  last: {shown}", key=shown)
        if verdict is not None:
            status.finish()
            return Readiness(verdict == "", round(elapsed, 2), last, polls, verdict or None)
        time.sleep(interval_s)
