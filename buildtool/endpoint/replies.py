"""The fields smoke and bench read from a vLLM OpenAI server's answers, parsed into typed values
once, at the edge. A field of the wrong type is a refusal naming the operation and the field
("GET /v1/models: 'data' is a number, expected a list of models"), never a KeyError, TypeError or
IndexError further in. Pure functions over client.Answer and server-sent event data."""
from __future__ import annotations

import dataclasses
import math
import re

from .client import Answer, EndpointError, parse_json

NO_MODEL_FIX = ("start the server with a model (vllm serve MODEL, or the image's MODEL setting); "
                "a server still loading lists it once /health answers 200")


def kind_of(value) -> str:
    """How a JSON value is named in a refusal."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _refuse(operation: str, field: str, value, expected: str) -> EndpointError:
    return EndpointError(operation, f"{field} is {kind_of(value)}, expected {expected}")


def json_object(answer: Answer) -> dict:
    """The answer's body as a JSON object."""
    body = answer.json()
    if not isinstance(body, dict):
        raise _refuse(answer.operation, "the body", body, "a JSON object")
    return body


def whole_number(operation: str, field: str, value, *, least: int = 0, optional: bool = False) -> int | None:
    """An integer of at least `least` (JSON's true/false are not numbers here)."""
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        shown = f"{value}" if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        expected = f"a whole number of at least {least}"
        if shown is not None:
            raise EndpointError(operation, f"{field} is {shown[:40]}, expected {expected}")
        raise _refuse(operation, field, value, expected)
    return value


def text_field(operation: str, field: str, value, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _refuse(operation, field, value, "a string" + (" or null" if optional else ""))
    return value


@dataclasses.dataclass(frozen=True)
class ModelCard:
    """One entry of GET /v1/models."""
    id: str
    root: str | None = None
    max_model_len: int | None = None


def model_cards(answer: Answer) -> tuple[ModelCard, ...]:
    """The cards of a 200 from GET /v1/models (possibly none: see served_ids)."""
    return model_cards_of(answer.operation, json_object(answer))


def model_cards_of(operation: str, body) -> tuple[ModelCard, ...]:
    """The cards of GET /v1/models' decoded body."""
    if not isinstance(body, dict):
        raise _refuse(operation, "the body", body, "a JSON object")
    data = body.get("data")
    if not isinstance(data, list):
        raise _refuse(operation, "'data'", data, "a list of models")
    cards = []
    for i, card in enumerate(data):
        if not isinstance(card, dict):
            raise _refuse(operation, f"data[{i}]", card, "a model card (an object)")
        name = card.get("id")
        if not isinstance(name, str) or not name:
            raise _refuse(operation, f"data[{i}].id", name, "the model's name (a string)")
        cards.append(ModelCard(name, text_field(operation, f"data[{i}].root", card.get("root")),
                               whole_number(operation, f"data[{i}].max_model_len", card.get("max_model_len"),
                                            least=1, optional=True)))
    return tuple(cards)


def served_ids(cards: tuple[ModelCard, ...], operation: str = "GET /v1/models") -> list[str]:
    """The served model names; none listed is a refusal with the fix."""
    if not cards:
        raise EndpointError(operation, "the server lists no model", NO_MODEL_FIX)
    return [card.id for card in cards]


def token_count(answer: Answer) -> int:
    """'count' of a 200 from POST /tokenize."""
    return whole_number(answer.operation, "'count'", json_object(answer).get("count"))


def context_limit(answer: Answer) -> int:
    """'max_model_len' of a 200 from POST /tokenize."""
    return whole_number(answer.operation, "'max_model_len'", json_object(answer).get("max_model_len"), least=1)


def _event_object(operation: str, data: str, index: int) -> dict:
    try:
        event = parse_json(data)
    except ValueError:
        raise EndpointError(operation, f"event {index} is not JSON ({data[:80]!r})") from None
    if not isinstance(event, dict):
        raise _refuse(operation, f"event {index}", event, "a JSON object")
    return event


def _choices(operation: str, event: dict, index: int) -> list:
    choices = event.get("choices", [])
    if not isinstance(choices, list):
        raise _refuse(operation, f"event {index}: 'choices'", choices, "a list")
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise _refuse(operation, f"event {index}: choices[{i}]", choice, "an object")
    return choices


@dataclasses.dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclasses.dataclass(frozen=True)
class CompletionChunk:
    """One event of a streamed /v1/completions: how many choices it carries, and the usage the
    closing event reports (stream_options.include_usage)."""
    choices: int
    usage: Usage | None


def completion_chunk(operation: str, data: str, index: int) -> CompletionChunk:
    event = _event_object(operation, data, index)
    choices = _choices(operation, event, index)
    for i, choice in enumerate(choices):
        text_field(operation, f"event {index}: choices[{i}].text", choice.get("text"))
    usage = event.get("usage")
    if usage is None:
        return CompletionChunk(len(choices), None)
    if not isinstance(usage, dict):
        raise _refuse(operation, f"event {index}: 'usage'", usage, "an object")
    return CompletionChunk(len(choices), Usage(
        whole_number(operation, f"event {index}: usage.prompt_tokens", usage.get("prompt_tokens")),
        whole_number(operation, f"event {index}: usage.completion_tokens", usage.get("completion_tokens"))))


@dataclasses.dataclass(frozen=True)
class ChatDelta:
    content: str | None
    reasoning: str | None


@dataclasses.dataclass(frozen=True)
class ChatChunk:
    """One event of a streamed /v1/chat/completions: the deltas of its choices."""
    deltas: tuple[ChatDelta, ...]


def chat_chunk(operation: str, data: str, index: int) -> ChatChunk:
    event = _event_object(operation, data, index)
    if "choices" not in event:
        raise EndpointError(operation, f"event {index} has no 'choices' list")
    deltas = []
    for i, choice in enumerate(_choices(operation, event, index)):
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise _refuse(operation, f"event {index}: choices[{i}].delta", delta, "an object")
        deltas.append(ChatDelta(text_field(operation, f"event {index}: choices[{i}].delta.content",
                                           delta.get("content")),
                                text_field(operation, f"event {index}: choices[{i}].delta.reasoning",
                                           delta.get("reasoning"))))
    return ChatChunk(tuple(deltas))


@dataclasses.dataclass(frozen=True)
class ToolCall:
    type: str | None
    name: str | None
    arguments: str | None     # JSON text, as the server sends it


@dataclasses.dataclass(frozen=True)
class ChatMessage:
    """choices[0] of a chat completion: its message, typed, and why it finished."""
    content: str | None
    reasoning: str | None
    has_reasoning: bool               # the `reasoning` key is there (vLLM 0.33 sends it, null when empty)
    reasoning_content: str | None     # the old key
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None


def chat_message(operation: str, body) -> ChatMessage:
    """choices[0].message of a chat completion's decoded body."""
    if not isinstance(body, dict):
        raise _refuse(operation, "the body", body, "a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise (_refuse(operation, "'choices'", choices, "a list of choices") if not isinstance(choices, list)
               else EndpointError(operation, "'choices' is empty, expected a choice"))
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _refuse(operation, "choices[0]", choice, "an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _refuse(operation, "choices[0].message", message, "an object")
    field = "choices[0].message."
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _refuse(operation, field + "tool_calls", calls, "a list")
    tool_calls = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            raise _refuse(operation, f"{field}tool_calls[{i}]", call, "an object")
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise _refuse(operation, f"{field}tool_calls[{i}].function", function, "an object")
        tool_calls.append(ToolCall(text_field(operation, f"{field}tool_calls[{i}].type", call.get("type")),
                                   text_field(operation, f"{field}tool_calls[{i}].function.name", function.get("name")),
                                   text_field(operation, f"{field}tool_calls[{i}].function.arguments",
                                              function.get("arguments"))))
    return ChatMessage(text_field(operation, field + "content", message.get("content")),
                       text_field(operation, field + "reasoning", message.get("reasoning")),
                       "reasoning" in message,
                       text_field(operation, field + "reasoning_content", message.get("reasoning_content")),
                       tuple(tool_calls),
                       text_field(operation, "choices[0].finish_reason", choice.get("finish_reason")))


@dataclasses.dataclass(frozen=True)
class TokenLogprob:
    """One generated token of choices[0].logprobs.content: the token as sent ("token_id:N" when the
    request set return_tokens_as_token_ids) and its log-probability, NaN where the server sent NaN
    or null (pydantic writes a NaN float as null)."""
    token: str
    logprob: float

    @property
    def token_id(self) -> int | None:
        """N of a "token_id:N" token, else None."""
        found = TOKEN_ID.fullmatch(self.token)
        return int(found.group(1)) if found else None

    @property
    def finite(self) -> bool:
        return math.isfinite(self.logprob)


TOKEN_ID = re.compile(r"token_id:(\d{1,12})")


def _logprob(operation: str, field: str, value) -> float:
    if value is None:
        return math.nan
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _refuse(operation, field, value, "a number")
    return float(value)


def chat_logprobs(operation: str, body) -> tuple[TokenLogprob, ...] | None:
    """choices[0].logprobs.content of a chat completion's decoded body (each token's top_logprobs
    are read too: one NaN among them is NaN); None when the choice carries no logprobs."""
    chat_message(operation, body)  # the choice's shape first, with its own refusals
    logprobs = body["choices"][0].get("logprobs")
    if logprobs is None:
        return None
    if not isinstance(logprobs, dict):
        raise _refuse(operation, "choices[0].logprobs", logprobs, "an object")
    content = logprobs.get("content") or []
    if not isinstance(content, list):
        raise _refuse(operation, "choices[0].logprobs.content", content, "a list")
    tokens = []
    for i, entry in enumerate(content):
        field = f"choices[0].logprobs.content[{i}]"
        if not isinstance(entry, dict):
            raise _refuse(operation, field, entry, "an object")
        token = text_field(operation, field + ".token", entry.get("token"), optional=False)
        logprob = _logprob(operation, field + ".logprob", entry.get("logprob"))
        top = entry.get("top_logprobs") or []
        if not isinstance(top, list):
            raise _refuse(operation, field + ".top_logprobs", top, "a list")
        for j, alternative in enumerate(top):
            if not isinstance(alternative, dict):
                raise _refuse(operation, f"{field}.top_logprobs[{j}]", alternative, "an object")
            if not math.isfinite(_logprob(operation, f"{field}.top_logprobs[{j}].logprob", alternative.get("logprob"))):
                logprob = math.nan
        tokens.append(TokenLogprob(token, logprob))
    return tuple(tokens)
