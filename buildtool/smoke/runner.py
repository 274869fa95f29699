"""Send each check's request, judge the reply, and collect results.

The HTTP exchange is the only side effect here; `applicability` and `verdict`
are pure and decide everything else.
"""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass

from contract.verdict import Result, Status
from buildtool import endpoint
from buildtool.endpoint import replies
from buildtool.endpoint.client import DEADLINE, Answer, EndpointClient, EndpointError

from .checks import MISSING_AUDIO_EXTRAS, Check
from .expect import Reply, unsupported_input
from .inputs import Inputs
from .readiness import LOGS_HINT
from .sizing import RAISE_CONTEXT, Sizing, estimated_prompt_tokens, size_request


@dataclass(frozen=True)
class Row:
    """One line of the report: the shared verdict (name, status, message, fix, elapsed_s) plus
    what the check proves and what the wire showed."""
    verdict: Result
    proves: str
    http_status: int | None = None
    first_token_s: float | None = None
    answer: Status | None = None     # the model's side of the row; None when the row has none

    @property
    def name(self) -> str:
        return self.verdict.name

    @property
    def status(self) -> Status:
        return self.verdict.status

    def to_dict(self) -> dict:
        return {**self.verdict.to_dict(), "proves": self.proves,
                "answer": None if self.answer is None else self.answer.value,
                "http_status": self.http_status, "first_token_s": self.first_token_s}


def row(check: Check, status: Status, message: str, fix: str = "", reply: Reply | None = None,
        answer: Status | None = None) -> Row:
    if reply is None:
        return Row(Result(check.name, status, message, fix), check.proves, answer=answer)
    return Row(Result(check.name, status, message, fix, reply.elapsed_s), check.proves, reply.status,
               None if reply.first_token_s is None else round(reply.first_token_s, 3), answer)


NOT_JUDGED_ANSWER = "the server honours the contract; the answer is not judged (--contract-only)"


NO_KEY = "no API key given (set $OPENAI_API_KEY or pass --api-key-file): the row runs when one is"


ASKED = Inputs(None, "asked of the server")
TURNED_OFF = re.compile(r"At most 0 (image|audio)\(s\) may be provided")


def applicability(check: Check, inputs: Inputs = ASKED, key_given: bool = False) -> str | None:
    """Why a check does not apply (a skip reason), or None."""
    if check.without_key and not key_given:
        return NO_KEY
    if check.needs is None or inputs.modalities is None or check.needs in inputs.modalities:
        return None
    if inputs.stated:
        listed = ",".join(sorted(inputs.modalities)) or "text"
        return f"the served model takes no {check.needs} input (--modalities {listed})"
    return f"the served model takes no {check.needs} input ({inputs.source})"


def refused_input(check: Check, reply: Reply, inputs: Inputs) -> Row | None:
    """The row of a media check the server refused in its own words, or None to judge the reply.
    Asked of the server: the refusal skips (the model takes no such input), but "install vllm[audio]"
    from a model known to take audio fails. Known from config.json: only the deployment turning the
    input off (--limit-mm-per-prompt 0) skips; any other refusal fails on the status."""
    refusal = unsupported_input(reply) if check.needs and not inputs.stated else None
    if not refusal:
        return None
    if check.needs == "audio" and inputs.takes_audio and MISSING_AUDIO_EXTRAS.search(refusal):
        return row(check, Status.FAIL, f"the model takes audio, the server cannot decode it: {refusal}",
                   "rebuild the image with EXTRAS=audio", reply=reply)
    if inputs.modalities is None:
        return row(check, Status.SKIP, f"the server takes no {check.needs} input: {refusal}", reply=reply)
    if TURNED_OFF.search(refusal):
        return row(check, Status.SKIP, f"the model takes {check.needs} input ({inputs.source}), the server "
                                       f"turned it off: {refusal}", reply=reply)
    return None


def verdict(check: Check, reply: Reply, model: str | None, inputs: Inputs = ASKED,
            judge_answers: bool = True) -> Row:
    """Judge one reply: the server's side of the contract first, then (unless not judged) the answer."""
    refused = refused_input(check, reply, inputs)
    if refused:
        return refused
    for expectation in check.expect:
        failure = expectation.judge(reply, model)
        if failure:
            return row(check, Status.FAIL, str(failure), getattr(failure, "fix", ""), reply=reply)
    if check.answer and not judge_answers:
        # A row that proves the contract passes on it; a row that exists to judge the answer is not judged.
        status = Status.PASS if check.proves_contract else Status.NOT_JUDGED
        return row(check, status, NOT_JUDGED_ANSWER, reply=reply, answer=Status.NOT_JUDGED)
    for expectation in check.answer:
        failure = expectation.judge(reply, model)
        if failure:
            return row(check, Status.FAIL, str(failure), getattr(failure, "fix", ""), reply=reply,
                       answer=Status.FAIL)
    notes = [e.note(reply) for e in check.expect + check.answer if hasattr(e, "note")]
    return row(check, Status.PASS, "; ".join(notes), reply=reply, answer=Status.PASS if check.answer else None)


def _read_stream(stream, started: float, reply: Reply) -> None:
    """Collect server-sent events (typed: a chunk of the wrong shape is a refusal naming its
    field), the text of their deltas and the first token's time."""
    pieces = []
    for index, event in enumerate(stream.events()):
        chunk = replies.chat_chunk(stream.operation, event.data, index)
        reply.events.append(chunk)
        for delta in chunk.deltas:
            if (delta.content or delta.reasoning) and reply.first_token_s is None:
                reply.first_token_s = event.arrived - started
            pieces.append(delta.content or "")
    reply.done = stream.done
    reply.text = "".join(pieces)


def _whole(reply: Reply, answer: Answer) -> None:
    reply.text = answer.body.decode("utf-8", "replace")
    try:
        reply.body = answer.json()
    except EndpointError:
        reply.body = None


def exchange(client: EndpointClient, check: Check, body: dict | None, timeout_s: float,
             with_key: bool = True) -> Reply:
    """Send the check's request (`body` as sized) and read its reply, all within timeout_s;
    raises EndpointError. with_key=False sends it without the API key."""
    started = time.monotonic()
    if not check.stream:
        answer = client.exchange("GET" if body is None else "POST", check.path, json_body=body,
                                 deadline_s=timeout_s, with_key=with_key)
        reply = Reply(status=answer.status)
        _whole(reply, answer)
    else:
        with client.stream("POST", check.path, json_body=body, deadline_s=timeout_s, with_key=with_key) as stream:
            reply = Reply(status=stream.status)
            if stream.ok:
                _read_stream(stream, started, reply)
            else:
                _whole(reply, stream.answer())
    reply.elapsed_s = time.monotonic() - started
    return reply


def prompt_tokens(client: EndpointClient, body: dict, timeout_s: float) -> int:
    """The prompt's token count from vLLM's POST /tokenize (chat template and tools included), or
    an upper-bound estimate when the server does not answer it."""
    ask = {key: body[key] for key in ("model", "messages", "tools", "chat_template_kwargs") if key in body}
    try:
        answer = client.post("/tokenize", {**ask, "add_generation_prompt": True}, deadline_s=timeout_s)
        return replies.token_count(answer) if answer.ok else estimated_prompt_tokens(body)
    except EndpointError:
        return estimated_prompt_tokens(body)


def run_check(client: EndpointClient, check: Check, model: str | None,
              inputs: Inputs, timeout_s: float,
              max_model_len: int | None = None, judge_answers: bool = True,
              served: list[str] | None = None, key_given: bool = False) -> Row:
    reason = applicability(check, inputs, key_given)
    if reason:
        return row(check, Status.SKIP, reason)
    if check.body is not None and served and model not in served:
        return row(check, Status.FAIL, f"not sent: model {model!r} is not served; the server serves {served}",
                   "pass --model with a served name, or leave --model out")
    body = check.request_body(model)
    sizing = Sizing(None)
    try:
        if body is not None and "max_tokens" in body:
            counted = prompt_tokens(client, body, timeout_s) if max_model_len else None
            sizing = size_request(body["max_tokens"], check.least_tokens, max_model_len, counted)
            if sizing.max_tokens is None:
                return row(check, Status.SKIP, sizing.note, RAISE_CONTEXT)
            body["max_tokens"] = sizing.max_tokens
        reply = exchange(client, check, body, timeout_s, with_key=not check.without_key)
        if check.without_key:
            return key_verdict(check, reply, exchange(client, check, body, timeout_s))
    except EndpointError as exc:
        return failed_exchange(check, exc, timeout_s)
    judged = verdict(check, reply, model, inputs, judge_answers=judge_answers)
    return noted(judged, sizing.note)


def failed_exchange(check: Check, exc: EndpointError, timeout_s: float) -> Row:
    """The row of a check whose exchange failed: the deadline, the wire, or an answer refused."""
    if exc.kind == DEADLINE:
        return row(check, Status.FAIL, f"no complete reply within {timeout_s:g} s",
                   f"raise --request-timeout, or {LOGS_HINT}")
    if exc.kind in (endpoint.REFUSED, endpoint.DROPPED, endpoint.NO_ANSWER) and not exc.final \
            and exc.status is None:
        what = "connection refused" if exc.kind == endpoint.REFUSED else "connection lost"
        return row(check, Status.FAIL, f"{what}: the server exited", LOGS_HINT)
    return row(check, Status.FAIL, f"{exc.operation}: {exc.message}", exc.fix)


def key_verdict(check: Check, without: Reply, with_key: Reply) -> Row:
    """The API key row: the check's expectations (401) on the reply without the key, 200 with it."""
    for expectation in check.expect:
        failure = expectation.judge(without, None)
        if failure:
            return row(check, Status.FAIL, f"without the key: {failure}",
                       "start the server with the key (API_KEY_FILE or VLLM_API_KEY)", reply=without)
    if with_key.status != 200:
        return row(check, Status.FAIL, f"with the key: HTTP {with_key.status} where 200 was expected",
                   "check the key in --api-key-file or $OPENAI_API_KEY against the server's", reply=with_key)
    return row(check, Status.PASS, f"HTTP {without.status} without the key, {with_key.status} with it",
               reply=with_key)


def noted(judged: Row, note: str) -> Row:
    if not note:
        return judged
    message = "; ".join(part for part in (judged.verdict.message, note) if part)
    return dataclasses.replace(judged, verdict=dataclasses.replace(judged.verdict, message=message))


def served_models(client: EndpointClient, timeout_s: float) -> tuple[int | None, tuple[replies.ModelCard, ...]]:
    """(GET /v1/models' status, None when the wire failed; the model cards it lists, () when none
    or not a 200). A 200 whose body is not a list of model cards raises EndpointError."""
    try:
        answer = client.get("/v1/models", deadline_s=timeout_s)
    except EndpointError as exc:
        if exc.kind in (endpoint.REFUSED, endpoint.DROPPED, endpoint.NO_ANSWER, DEADLINE):
            return None, ()
        raise
    return answer.status, replies.model_cards(answer) if answer.status == 200 else ()


METRIC_PROVES = {"spec-decode": "with a drafter, it drafts: mean acceptance length well above 1.0 (/metrics)",
                 "kv-cache": "the KV cache vLLM allocated: tokens and maximum concurrency (/metrics)"}


def read_metrics(client: EndpointClient, timeout_s: float) -> tuple[str | None, str]:
    """GET /metrics: (the text, "") or (None, why it could not be read)."""
    try:
        answer = client.get("/metrics", deadline_s=timeout_s)
        if answer.status != 200:
            return None, f"GET /metrics answered {answer.status}"
        return answer.text(), ""
    except EndpointError as exc:
        return None, exc.line()


def metric_row(result: Result) -> Row:
    return Row(result, METRIC_PROVES[result.name])
