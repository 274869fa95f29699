"""Run INSIDE the image: judge the smoke test's requests and the stand-in's replies
with the pinned vLLM release's own OpenAI-server models and media loaders.

Usage: python3 smoke_request_models.py INPUT.json  (prints one JSON object)
INPUT: {"requests": [{"name", "path", "body"}], "replies": [{"name", "model", "json"}]}
"""
import json
import sys

from vllm.entrypoints.openai.chat_completion.protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionStreamResponse,
)
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.entrypoints.serve.engine.protocol import ErrorResponse, ModelList
from vllm.multimodal.media.connector import MediaConnector
from vllm.renderers.chat_utils.chat_message import parse_chat_message_content_mm_part

REQUEST_MODELS = {"/v1/chat/completions": ChatCompletionRequest, "/v1/completions": CompletionRequest}
REPLY_MODELS = {"chat": ChatCompletionResponse, "chunk": ChatCompletionStreamResponse,
                "models": ModelList, "error": ErrorResponse}


def decoded_media(part_type, content):
    """What vLLM's own loaders make of a media part (as the server would load it)."""
    connector = MediaConnector()
    try:
        if part_type == "image_url":
            image = connector.fetch_image(content)
            return {"size": list(image.size), "pixel": list(image.getpixel((0, 0)))}
        if part_type == "input_audio":
            samples, rate = connector.fetch_audio(f"data:audio/{content['format']};base64,{content['data']}")
            return {"rate": rate, "samples": len(samples), "peak": float(abs(samples).max())}
    except Exception as exc:  # reported, not raised: the caller judges it
        return {"error": f"{type(exc).__name__}: {exc}"}
    return None


def judge_request(path, body):
    try:
        request = REQUEST_MODELS[path].model_validate(body)
    except Exception as exc:
        return {"valid": False, "error": str(exc).splitlines()[0] + " | " + " ".join(str(exc).split())[:300]}
    parts = []
    for message in request.messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            part_type, parsed = parse_chat_message_content_mm_part(part)
            parts.append({"type": part_type, "media": decoded_media(part_type, parsed)})
    return {"valid": True, "error": None,
            "fields": {"temperature": request.temperature, "max_tokens": request.max_tokens,
                       "stream": request.stream, "top_k": request.top_k,
                       "tool_choice": request.tool_choice,
                       "tools": [tool.function.name for tool in request.tools or []],
                       "chat_template_kwargs": request.chat_template_kwargs,
                       "logprobs": request.logprobs,
                       "return_tokens_as_token_ids": request.return_tokens_as_token_ids,
                       "extra_keys": sorted(request.model_extra or {})},
            "parts": parts}


def judge_reply(model, payload):
    try:
        REPLY_MODELS[model].model_validate(payload)
        return {"valid": True, "error": None}
    except Exception as exc:
        return {"valid": False, "error": " ".join(str(exc).split())[:300]}


def nan_logprobs():
    """What the release's server makes of NaN log-probabilities (an fp16 overflow's logits): the
    whole reply rendered as its chat route renders it (starlette's JSONResponse of model_dump()),
    then, when that raises, the error body its exception handlers make of it; and one stream chunk
    as its stream writes it (model_dump_json)."""
    from starlette.responses import JSONResponse
    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response

    logprobs = {"content": [{"token": "token_id:0", "logprob": float("nan"), "bytes": [], "top_logprobs": []}]}
    reply = ChatCompletionResponse.model_validate({
        "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                                   "logprobs": logprobs, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    try:
        JSONResponse(content=reply.model_dump())
        rendered = {"status": 200, "message": None}
    except Exception as exc:
        error = create_error_response(exc)
        rendered = {"status": error.error.code, "message": error.error.message, "raised": type(exc).__name__}
    chunk = ChatCompletionStreamResponse.model_validate({
        "model": "m", "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": logprobs}]})
    return {"reply": rendered, "chunk": json.loads(chunk.model_dump_json())["choices"][0]["logprobs"]}


def main(path):
    spec = json.load(open(path))
    out = {"requests": {r["name"]: judge_request(r["path"], r["body"]) for r in spec["requests"]},
           "replies": {r["name"]: judge_reply(r["model"], r["json"]) for r in spec["replies"]},
           "nan_logprobs": nan_logprobs()}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
