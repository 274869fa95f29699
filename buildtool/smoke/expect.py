"""What a check expects of a reply: small frozen dataclasses, each a pure judgement.

Each expectation's `judge(reply, model)` returns None when the reply meets it, or a
one-line reason when it does not (a `Failure` when the reason carries its fix); an optional `note(reply)` adds a remark to a pass. `model` is the served model id the run checks
(None when the server lists none). Add an expectation here when a new check needs
a judgement the existing ones cannot express.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from door import files
from buildtool.endpoint import replies
from buildtool.endpoint.client import EndpointError

LIST_MODELS = "GET /v1/models"

# Gemma 4's thinking delimiters and the role label inside them, as decoded text.
THINKING_MARKERS = ("<|channel>", "<channel|>", "<think>", "</think>")
THOUGHT_LABEL = "thought\n"


@dataclass
class Reply:
    """One HTTP exchange, as the runner saw it."""

    status: int
    body: object = None          # the decoded JSON body, None when it was not JSON
    text: str = ""               # the raw body (for streams: the assembled content)
    events: list = field(default_factory=list)  # a stream's events, typed (replies.ChatChunk)
    done: bool = False           # a stream ended with `data: [DONE]`
    elapsed_s: float = 0.0
    first_token_s: float | None = None

    @property
    def error_message(self) -> str:
        """vLLM's error text ({"error": {"message": ...}}), else the raw body."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return " ".join(str(self.body["error"].get("message", "")).split())[:300]
        return " ".join(self.text.split())[:300]


CHAT = "POST /v1/chat/completions"


def first_message(reply: Reply) -> replies.ChatMessage | str:
    """choices[0].message of a chat completion, typed, or why the body has none."""
    try:
        return replies.chat_message(CHAT, reply.body)
    except EndpointError as exc:
        return exc.line()


def _shown(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


@dataclass(frozen=True)
class Status:
    code: int = 200

    def judge(self, reply: Reply, model: str | None) -> str | None:
        if reply.status == self.code:
            return None
        if reply.status == 503:
            return f"HTTP 503 where {self.code} was expected: the engine is not (or no longer) ready"
        return f"HTTP {reply.status} where {self.code} was expected: {reply.error_message or 'no body'}"


@dataclass(frozen=True)
class ModelListed:
    """/v1/models lists the served model (any model, when none was named)."""

    def judge(self, reply: Reply, model: str | None) -> str | None:
        try:
            ids = replies.served_ids(replies.model_cards_of(LIST_MODELS, reply.body))
        except EndpointError as exc:
            return exc.line()
        if model is not None and model not in ids:
            return f"model {model!r} is not listed; the server lists {ids}"
        return None


@dataclass(frozen=True)
class MessageShaped:
    """A chat completion with choices[0].message whose fields have their types (content a string
    or null, tool calls a list of calls)."""

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        return message if isinstance(message, str) else None


@dataclass(frozen=True)
class ReasoningField:
    """The message carries vLLM's `reasoning` field (null when the model emitted no thinking),
    not thinking under the old `reasoning_content` key alone."""

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        if isinstance(message, str):
            return message
        if message.reasoning_content and not message.reasoning:
            return "thinking came back in message.reasoning_content, expected message.reasoning"
        if not message.has_reasoning:
            return "choices[0].message has no `reasoning` field (vLLM 0.33 always sends it, null when empty)"
        return None


@dataclass(frozen=True)
class ContentMatches:
    """The message content matches a regular expression (a whole-word answer)."""

    pattern: str
    flags: int = 0

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        if isinstance(message, str):
            return message
        content = message.content or ""
        if re.search(self.pattern, content, self.flags):
            return None
        return f"the answer {_shown(content)} does not match /{self.pattern}/"


@dataclass(frozen=True)
class ToolCalled:
    """The model's call comes back parsed in message.tool_calls, not as text."""

    function: str
    argument: str
    argument_pattern: str

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        if isinstance(message, str):
            return message
        if not message.tool_calls:
            hint = " (is --enable-auto-tool-choice with the gemma4 tool parser set?)"
            return f"no tool_calls; content {_shown(message.content or '')}" + hint
        call = message.tool_calls[0]
        if call.type != "function" or call.name != self.function:
            return f"tool_calls[0] calls {call.name!r}, expected {self.function!r}"
        try:
            arguments = files.word_json(call.arguments or "")
        except ValueError:
            return f"tool_calls[0].function.arguments is not JSON: {_shown(str(call.arguments))}"
        value = arguments.get(self.argument) if isinstance(arguments, dict) else None
        if not isinstance(value, str) or not re.search(self.argument_pattern, value, re.I):
            return f"argument {self.argument!r} is {value!r}, expected /{self.argument_pattern}/"
        return None


@dataclass(frozen=True)
class ReasoningSeparated:
    """Thinking, when the model emits any, is in message.reasoning and nowhere else.

    Passes when: no thinking delimiter is left in content or reasoning, content does
    not start with the bare `thought` label, content holds the answer, and any text
    of thought is under `reasoning` (an empty or null `reasoning` passes: the model
    emitted no thinking tag). Text under the old `reasoning_content` key alone fails.
    """

    answer_pattern: str

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        if isinstance(message, str):
            return message
        content = message.content or ""
        reasoning = message.reasoning or ""
        for name, text in (("content", content), ("reasoning", reasoning)):
            leaked = [marker for marker in THINKING_MARKERS if marker in text]
            if leaked:
                return f"raw thinking delimiter {leaked[0]!r} in message.{name}: is --reasoning-parser gemma4 set?"
        if content.startswith(THOUGHT_LABEL):
            return "content starts with the thinking label 'thought': is --reasoning-parser gemma4 set?"
        if message.finish_reason == "length" and not re.search(self.answer_pattern, content):
            return "max_tokens ran out before the answer (thinking too long)"
        if not re.search(self.answer_pattern, content):
            return f"the answer {_shown(content)} does not match /{self.answer_pattern}/"
        return None

    def note(self, reply: Reply) -> str:
        message = first_message(reply)
        reasoning = "" if isinstance(message, str) else message.reasoning or ""
        return f"{len(reasoning)} chars of reasoning" if reasoning else "no thinking emitted (allowed)"


@dataclass(frozen=True)
class StreamCompleted:
    """A streamed completion: server-sent chat.completion.chunk events, ended by [DONE]."""

    def judge(self, reply: Reply, model: str | None) -> str | None:
        if not reply.events:
            return "no server-sent events came back"
        if not reply.done:
            return "the stream ended without `data: [DONE]`"
        return None


@dataclass(frozen=True)
class StreamText:
    """The stream's deltas carry text."""

    def judge(self, reply: Reply, model: str | None) -> str | None:
        return None if reply.text.strip() else "the stream carried no text in choices[0].delta"


# A numerically broken answer, by input. Turing has no bf16 datapath, so the server computes in fp16
# (range +-65,504); where an activation leaves that range the logits turn NaN, the greedy choice is token
# 0 over and over, and the reply is HTTP 200 with an empty content (vLLM issue 48231: Gemma 4 12B's
# vision embedder on an RTX 2080 Ti). With logprobs asked for, vLLM 0.33 cannot write the NaN
# log-probabilities as JSON and answers 400 "Out of range float values are not JSON compliant"
# (starlette renders with allow_nan=False; vLLM's ValueError handler makes it a 400); a stream
# carries them as null (pydantic). Each failure line names the input, what was seen and the likely cause.
LIKELY = {"text": "an fp16 overflow in the decoder (Turing computes in fp16)",
          "image": "an fp16 overflow in the vision path, the fp16 patch missing from the image",
          "audio": "an fp16 overflow in the audio path, the fp16 patch missing from the image"}
PATCH_FIX = ("rebuild the image (python3 build.py) so its vLLM carries the fp16 patch; "
             "if it does, report the model and this input")
NAN_REFUSED = re.compile(r"Out of range float values are not JSON compliant")


class Failure(str):
    """A judge's reason that carries its fix (the runner puts it in the row's `fix`)."""

    def __new__(cls, reason: str, fix: str):
        failure = super().__new__(cls, reason)
        failure.fix = fix
        return failure


def overflow(modality: str, seen: str) -> Failure:
    """The one line of a numerically broken answer: the input, what was seen, the likely cause; the
    fix with it."""
    return Failure(f"{modality}: {seen}: likely {LIKELY[modality]}", PATCH_FIX)


@dataclass(frozen=True)
class FiniteTokens:
    """The answer's log-probabilities are finite and its tokens are not token 0 repeated (the request
    asks for logprobs with return_tokens_as_token_ids). Judged before the status: vLLM answers NaN
    log-probabilities with a 400. Any weights pass this in a sound engine, so it is the contract."""

    modality: str

    def judge(self, reply: Reply, model: str | None) -> str | None:
        if reply.status != 200:
            refused = NAN_REFUSED.search(reply.error_message)
            return overflow(self.modality, f"HTTP {reply.status}, the server could not write NaN log-probabilities "
                                           f"({refused.group(0)})") if refused else None
        try:
            tokens = replies.chat_logprobs(CHAT, reply.body)
        except EndpointError as exc:
            return exc.line()
        if tokens is None:
            return "choices[0].logprobs is null: the server ignored logprobs: true (is this vLLM?)"
        nan = sum(not token.finite for token in tokens)
        if nan:
            return overflow(self.modality, f"{nan} of {len(tokens)} log-probabilities are NaN")
        ids = [token.token_id for token in tokens]
        if ids and all(token_id == 0 for token_id in ids):
            return overflow(self.modality, f"the answer is token 0 repeated ({len(ids)} tokens)")
        return None


@dataclass(frozen=True)
class Answered:
    """The answer is not empty: content (or reasoning) carries text. An fp16 overflow's token 0 decodes
    to nothing, so the reply is HTTP 200 with an empty content."""

    modality: str

    def judge(self, reply: Reply, model: str | None) -> str | None:
        message = first_message(reply)
        if isinstance(message, str):
            return message
        if (message.content or "").strip() or (message.reasoning or "").strip() or message.tool_calls:
            return None
        return overflow(self.modality, f"the answer is empty (HTTP 200, finish_reason {message.finish_reason})")


# Server replies that mean "this model takes no such input": the check is skipped,
# not failed. vLLM 0.33 answers 400 "At most 0 image(s) may be provided in one
# prompt." when the model (or --limit-mm-per-prompt) allows none, names a text-only
# model "not a multimodal model", and asks for its extras when they are missing.
UNSUPPORTED_INPUT = (
    r"At most 0 (image|audio)\(s\) may be provided",
    r"is not a multimodal model",
    r"Please install vllm\[(audio|video)\]",
    r"Unsupported chat content part type",
)


def unsupported_input(reply: Reply) -> str | None:
    """The server's own words when it refused an input it does not take, else None."""
    if reply.status not in (400, 422, 500, 501):
        return None
    message = reply.error_message
    for pattern in UNSUPPORTED_INPUT:
        if re.search(pattern, message):
            return message.splitlines()[0] if message else pattern
    return None
