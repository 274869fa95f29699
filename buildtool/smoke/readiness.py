"""Wait for GET /health to answer 200, showing elapsed time and the last answer.

vLLM answers 503 while the engine loads (100 to 230 s for the seed models). A name that does not
resolve and a failed TLS handshake are final at once; a refused connection before the server ever
answered may be a container still binding its port (a short grace); after it answered, it means
the server exited. 401/403 on /health means a proxy in front wants credentials (vLLM's own key
guards only /v1). The cause is named by tooling/endpoint.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import requests

from contract.verdict import Result, Status
from buildtool.status_line import StatusLine
from tooling import endpoint

LOGS_HINT = "see `docker compose logs vllm` or `journalctl --user -u vllm-turing`"
REFUSED = "connection refused"


NAME = "ready"


@dataclass
class Readiness:
    verdict: Result
    elapsed_s: float
    last: str
    polls: int

    @property
    def ready(self) -> bool:
        return self.verdict.status is Status.PASS

    @property
    def error(self) -> str | None:
        """Why the wait failed, with what to do, in one line; None when ready."""
        if self.ready:
            return None
        return "; ".join(part for part in (self.verdict.message, self.verdict.fix) if part)


def decide(last: str, answered_before: bool, elapsed_s: float, timeout_s: float,
           connect_grace_s: float, url: str, failure: endpoint.WireFailure | None = None,
           key_given: bool = False) -> Result:
    """Judge the latest poll: PASS ready, FAIL gave up, NOT_JUDGED keep waiting. `last` is the
    status code as text or the wire's failure kind; `failure` its one-line cause."""
    if last == "200":
        return Result(NAME, Status.PASS, f"{url}/health answered 200")
    if failure is not None and failure.final:
        return Result(NAME, Status.FAIL, failure.message, failure.fix)
    if last == REFUSED and answered_before:
        return Result(NAME, Status.FAIL, f"{url} answered, then refused connections: the server exited",
                      LOGS_HINT)
    if last == REFUSED and elapsed_s >= connect_grace_s:
        return Result(NAME, Status.FAIL, f"connection refused: nothing listens on {url} after {elapsed_s:.0f} s",
                      f"is the service running? (raise --connect-grace for one that binds its port late) {LOGS_HINT}")
    if last in ("401", "403"):
        return Result(NAME, Status.FAIL, endpoint.status_cause(int(last), f"{url}/health", key_given))
    if last == "404":
        return Result(NAME, Status.FAIL, f"{url}/health answered 404: this is not a vLLM OpenAI server",
                      "check the URL")
    if elapsed_s >= timeout_s:
        shown = failure.message if failure else last
        return Result(NAME, Status.FAIL, f"not ready after {elapsed_s:.0f} s (last answer: {shown})",
                      f"a first load takes minutes: raise --timeout, or {LOGS_HINT}")
    return Result(NAME, Status.NOT_JUDGED, f"still waiting (last answer: {last})")


def poll(session: requests.Session, url: str, timeout_s: float) -> tuple[str, endpoint.WireFailure | None]:
    """One GET /health: (the status code as text, None), or (the failure's kind, its cause)."""
    try:
        return str(session.get(url + "/health", timeout=timeout_s).status_code), None
    except requests.RequestException as exc:
        failure = endpoint.wire_failure(exc, url, timeout_s)
        return (REFUSED if failure.kind == endpoint.REFUSED else failure.kind), failure


def wait_ready(session: requests.Session, url: str, *, timeout_s: float, interval_s: float,
               connect_grace_s: float, status: StatusLine) -> Readiness:
    start = time.monotonic()
    answered_before = False
    polls = 0
    key_given = "Authorization" in session.headers
    while True:
        last, failure = poll(session, url, timeout_s=max(interval_s, 5.0))
        polls += 1
        elapsed = time.monotonic() - start
        answered_before = answered_before or last.isdigit()
        verdict = decide(last, answered_before, elapsed, timeout_s, connect_grace_s, url, failure, key_given)
        shown = {"503": "503 still loading", "200": "200 ready"}.get(last, last)
        status.update(f"waiting for {url}/health  {elapsed:5.0f} s  last: {shown}", key=shown)
        if verdict.status is not Status.NOT_JUDGED:
            status.finish()
            return Readiness(verdict, round(elapsed, 2), last, polls)
        time.sleep(interval_s)
