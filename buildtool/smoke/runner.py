"""Send each check's request, judge the reply, and collect results.

The HTTP exchange is the only side effect here; `applicability` and `verdict`
are pure and decide everything else.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import requests

from .checks import Check
from .expect import Reply, unsupported_input
from .readiness import LOGS_HINT

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Result:
    name: str
    proves: str
    outcome: str
    detail: str = ""
    http_status: int | None = None
    elapsed_s: float | None = None
    first_token_s: float | None = None


def applicability(check: Check, modalities: frozenset[str] | None) -> str | None:
    """Why a check does not apply (a skip reason), or None. None modalities: probe."""
    if check.needs is None or modalities is None or check.needs in modalities:
        return None
    listed = ",".join(sorted(modalities)) or "none"
    return f"the served model takes no {check.needs} input (--modalities {listed})"


def verdict(check: Check, reply: Reply, model: str | None, probing: bool) -> Result:
    """Judge one reply against the check's expectations."""
    def result(outcome: str, detail: str) -> Result:
        return Result(check.name, check.proves, outcome, detail, reply.status,
                      round(reply.elapsed_s, 3),
                      None if reply.first_token_s is None else round(reply.first_token_s, 3))

    if check.needs and probing:
        refusal = unsupported_input(reply)
        if refusal:
            return result(SKIP, f"the server takes no {check.needs} input: {refusal}")
    for expectation in check.expect:
        failure = expectation.judge(reply, model)
        if failure:
            return result(FAIL, failure)
    notes = [e.note(reply) for e in check.expect if hasattr(e, "note")]
    return result(PASS, "; ".join(notes))


def _read_stream(response: requests.Response, started: float, reply: Reply) -> None:
    """Collect server-sent events, the text of their deltas and the first token's time."""
    pieces = []
    for line in response.iter_lines(decode_unicode=True):
        if not line or not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            reply.done = True
            break
        try:
            event = json.loads(data)
        except ValueError:
            continue
        reply.events.append(event)
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            text = (delta.get("content") or "") + (delta.get("reasoning") or "")
            if text and reply.first_token_s is None:
                reply.first_token_s = time.monotonic() - started
            pieces.append(delta.get("content") or "")
    reply.text = "".join(pieces)


def exchange(session: requests.Session, url: str, check: Check, model: str | None,
             timeout_s: float) -> Reply:
    """Send the check's request; raises requests exceptions on the wire."""
    body = check.request_body(model)
    started = time.monotonic()
    if body is None:
        response = session.get(url + check.path, timeout=timeout_s)
    else:
        response = session.post(url + check.path, json=body, timeout=timeout_s, stream=check.stream)
    reply = Reply(status=response.status_code)
    if check.stream and response.ok:
        _read_stream(response, started, reply)
    else:
        reply.text = response.text
        try:
            reply.body = response.json()
        except ValueError:
            pass
    reply.elapsed_s = time.monotonic() - started
    return reply


def run_check(session: requests.Session, url: str, check: Check, model: str | None,
              modalities: frozenset[str] | None, timeout_s: float) -> Result:
    reason = applicability(check, modalities)
    if reason:
        return Result(check.name, check.proves, SKIP, reason)
    try:
        reply = exchange(session, url, check, model, timeout_s)
    except requests.ConnectionError as exc:
        what = "connection refused" if "refused" in str(exc).lower() else "connection lost"
        return Result(check.name, check.proves, FAIL, f"{what}: the server exited; {LOGS_HINT}")
    except requests.Timeout:
        return Result(check.name, check.proves, FAIL,
                      f"no reply within {timeout_s:.0f} s: raise --request-timeout, or {LOGS_HINT}")
    return verdict(check, reply, model, probing=modalities is None)


def served_model(session: requests.Session, url: str, timeout_s: float) -> str | None:
    """The first model /v1/models lists, or None when it lists none or fails."""
    try:
        data = session.get(url + "/v1/models", timeout=timeout_s).json().get("data") or []
        return data[0]["id"] if data and isinstance(data[0], dict) else None
    except (requests.RequestException, ValueError, AttributeError, KeyError):
        return None
