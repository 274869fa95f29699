"""Wait for GET /health to answer 200, showing elapsed time and the last answer.

vLLM answers 503 while the engine loads (100 to 230 s for the seed models). A name that does not
resolve and a failed TLS handshake are final at once; a refused connection before the server ever
answered may be a container still binding its port (a short grace); after it answered, it means
the server exited. 401/403 on /health means a proxy in front wants credentials (vLLM's own key
guards only /v1). The cause is named by buildtool/endpoint/. Each poll ends within its deadline (the
endpoint client's), at most what is left of --timeout, however slowly the server answers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from contract.verdict import Result, Status
from buildtool.status_line import StatusLine
from buildtool import endpoint
from buildtool.endpoint.client import EndpointClient, EndpointError

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
           connect_grace_s: float, url: str, failure: EndpointError | None = None,
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
        # the limit the user set, not the clock's reading: on a loaded host the last poll ends past it
        return Result(NAME, Status.FAIL, f"not ready after {timeout_s:g} s (last answer: {shown})",
                      f"a first load takes minutes: raise --timeout, or {LOGS_HINT}")
    return Result(NAME, Status.NOT_JUDGED, f"still waiting (last answer: {last})")


POLL_S = 5.0   # the most one poll may take: a slow answer is a still-loading server, polled again


def poll(client: EndpointClient, deadline_s: float) -> tuple[str, EndpointError | None]:
    """One GET /health: (the status code as text, None), or (the failure's kind, its cause)."""
    try:
        return str(client.get("/health", deadline_s=deadline_s).status), None
    except EndpointError as exc:
        return (REFUSED if exc.kind == endpoint.REFUSED else exc.kind), exc


def wait_ready(client: EndpointClient, *, timeout_s: float, interval_s: float,
               connect_grace_s: float, status: StatusLine) -> Readiness:
    url = client.base_url
    start = time.monotonic()
    answered_before = False
    polls = 0
    while True:
        left = timeout_s - (time.monotonic() - start)
        last, failure = poll(client, deadline_s=max(min(max(interval_s, POLL_S), left), 0.5))
        polls += 1
        elapsed = time.monotonic() - start
        answered_before = answered_before or last.isdigit()
        verdict = decide(last, answered_before, elapsed, timeout_s, connect_grace_s, url, failure, client.key_given)
        shown = {"503": "503 still loading", "200": "200 ready"}.get(last, last)
        status.update(f"waiting for {url}/health  {elapsed:5.0f} s  last: {shown}", key=shown)
        if verdict.status is not Status.NOT_JUDGED:
            status.finish()
            return Readiness(verdict, round(elapsed, 2), last, polls)
        time.sleep(min(interval_s, max(timeout_s - elapsed, 0)))
