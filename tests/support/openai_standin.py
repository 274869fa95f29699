"""A STAND-IN for a vLLM OpenAI-compatible server, for tests on machines without a GPU.

It runs no model: it answers /health with 503 for `loading_s` seconds (as vLLM does
while the engine loads), then serves canned, schema-valid replies chosen by what the
request asks (the smoke test's prompts). `broken={"arithmetic", ...}` makes the reply
of each named scenario wrong in the way a misconfigured server would be, so every
smoke check can be seen failing. `overflow={"image-contrast": "nan-400", ...}` makes a scenario's
reply what an fp16 overflow gives (OVERFLOWS: token 0 repeated, an empty answer, NaN log-probabilities
as a NaN, a null or vLLM's 400). Asked for logprobs, it returns one per word of its answer, the token
as "token_id:N" under return_tokens_as_token_ids, as vLLM does. `api_key="..."` guards the /v1 routes as vLLM's --api-key does
(401 without `Authorization: Bearer KEY`; /health, /metrics and /tokenize stay open);
broken={"api-key"} then lets every request through.

Routes live in a table, `(method, path) -> handler(body) -> StandInResponse`; add one
with `standin.route("POST", "/v1/completions", handler)`. A StandInResponse with
`events` is sent as server-sent events (`data: {...}` lines, then `data: [DONE]`).
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCENARIOS = ("health", "models", "api-key", "stream", "arithmetic", "fact-capital", "fact-gold",
             "tool-calls", "reasoning", "extra-body", "text", "image", "image-contrast", "audio")
KNOWN_CHAT_KEYS = {"model", "messages", "temperature", "max_tokens", "stream", "tools",
                   "tool_choice", "chat_template_kwargs", "logprobs", "top_logprobs", "return_tokens_as_token_ids"}
# How an fp16 overflow reaches the client: the logits NaN, the greedy token 0 (Gemma's <pad>, decoded to
# nothing) over and over, HTTP 200 with an empty content; asked for logprobs, vLLM 0.33 fails to write the
# NaN in JSON (a 400), a stream writes it as null. "empty" is an empty answer of ordinary tokens.
OVERFLOWS = ("token-0", "empty", "nan", "nan-null", "nan-400")
NAN_400 = "Out of range float values are not JSON compliant: nan"   # vLLM 0.33's 400 (starlette, allow_nan=False)


@dataclass
class StandInResponse:
    status: int = 200
    json: object = None
    events: list | None = None      # server-sent events instead of a JSON body
    done: bool = True               # end the events with `data: [DONE]`
    delay_s: float = 0.0            # wait before the first byte of the body (time to first token)
    text: str | None = None         # a plain-text body instead of JSON (/metrics)
    burst: bool = False             # send every event in one write, as a server that coalesced its stream


def error(status: int, message: str) -> StandInResponse:
    """vLLM's error body."""
    return StandInResponse(status, {"error": {"message": message, "type": "BadRequestError",
                                              "param": None, "code": status}})


def chat_completion(model: str, message: dict, finish_reason: str = "stop") -> dict:
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "logprobs": None,
                         "finish_reason": finish_reason, "stop_reason": None}],
            "usage": {"prompt_tokens": 12, "total_tokens": 16, "completion_tokens": 4}}


def chat_chunk(model: str, delta: dict, finish_reason: str | None = None) -> dict:
    return {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def _parts(body: dict) -> list:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        parts += content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    return parts


# /metrics as vLLM 0.33 writes it (prometheus_client's text format 0.0.4), cut to the families
# smoke reads plus neighbours. cache_config_info carries every CacheConfig field as a label.
METRICS_HEAD = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="%(model)s"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="%(model)s"} 0.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="%(model)s"} 412.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="%(model)s"} 1.7645e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",\
cpu_offload_gb="0.0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",\
is_attention_free="False",kv_cache_max_concurrency="%(concurrency)s",kv_cache_memory_bytes="None",\
kv_cache_size_tokens="%(tokens)s",mamba_block_size="None",num_cpu_blocks="None",num_gpu_blocks="%(blocks)s",\
prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4.0"} 1.0
"""
METRICS_SPEC_DECODE = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="%(model)s"} %(drafts)s
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="%(model)s"} 1.7645e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="%(model)s"} %(draft_tokens)s
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="%(model)s"} %(accepted)s
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="%(model)s",position="0"} %(accepted)s
"""


def vllm_metrics_text(model: str = "standin-model", *, tokens="41536", concurrency="5.07", blocks="2596",
                      drafts=None, accepted=0.0, draft_tokens=None) -> str:
    """vLLM's /metrics text; `drafts` set adds the speculative-decoding counters."""
    text = METRICS_HEAD % {"model": model, "tokens": tokens, "concurrency": concurrency, "blocks": blocks}
    if drafts is not None:
        text += METRICS_SPEC_DECODE % {"model": model, "drafts": float(drafts), "accepted": float(accepted),
                                       "draft_tokens": float(draft_tokens if draft_tokens is not None else 3 * drafts)}
    return text


TEMPLATE_TOKENS, MEDIA_TOKENS = 12, 260


def prompt_tokens(body: dict) -> int:
    """The stand-in's token count: words of the text, a chat template, a fixed cost per media part."""
    parts = _parts(body)
    words = sum(len((part.get("text") or "").split()) for part in parts if part.get("type") == "text")
    tools = 40 * len(body.get("tools") or [])
    return TEMPLATE_TOKENS + words + tools + MEDIA_TOKENS * sum(part.get("type") != "text" for part in parts)


def scenario(body: dict) -> str:
    """Which smoke scenario a chat request is, judged as a model would: by what it asks."""
    part_types = {part.get("type") for part in _parts(body)}
    text = " ".join(part.get("text") or "" for part in _parts(body))
    if body.get("stream"):
        return "stream"
    if body.get("tools"):
        return "tool-calls"
    if "image_url" in part_types:
        return "image-contrast" if "pattern" in text else "image"
    if "input_audio" in part_types:
        return "audio"
    if set(body) - KNOWN_CHAT_KEYS:
        return "extra-body"
    if (body.get("chat_template_kwargs") or {}).get("enable_thinking"):
        return "reasoning"
    for needle, name in (("17*23", "arithmetic"), ("Australia", "fact-capital"), ("gold", "fact-gold"),
                         ("sunny morning", "text")):
        if needle in text:
            return name
    return "chat"


# scenario -> (good message, broken message, finish reasons good/broken)
TOOL_CALL = {"content": None, "tool_calls": [{"id": "chatcmpl-tool-standin", "type": "function",
                                               "function": {"name": "get_weather",
                                                            "arguments": '{"city": "Paris"}'}}]}
CANNED = {
    "arithmetic": ({"content": "391"}, {"content": "381"}),
    "fact-capital": ({"content": "Canberra"}, {"content": "Sydney"}),
    "fact-gold": ({"content": "Au"}, {"content": "Ag"}),
    "tool-calls": (TOOL_CALL, {"content": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'}),
    "reasoning": ({"content": "42", "reasoning": "Six times seven is forty-two."},
                  {"content": "<|channel>thought\nSix times seven is forty-two.<channel|>42", "reasoning": None}),
    "extra-body": ({"content": "Ready."}, None),
    "text": ({"content": "A bright, quiet sunny morning."}, {"content": ""}),
    "image": ({"content": "Red."}, {"content": "Blue."}),
    "image-contrast": ({"content": "A black and white checkerboard."}, {"content": "A blue sky."}),
    "audio": ({"content": "A steady high-pitched tone."}, {"content": "Silence."}),
    "chat": ({"content": "OK."}, {"content": "OK."}),
}


def logprobs(content: str, fault: str | None, max_tokens: int, as_ids: bool) -> dict:
    """choices[0].logprobs as vLLM writes it: one entry per generated token (here, per word of the
    answer, ids from 100 on; token 0 max_tokens times under an overflow; end of turn, id 106, alone
    for an empty answer)."""
    if fault in ("token-0", "nan", "nan-null", "nan-400"):
        tokens = [(0, "<pad>")] * max(max_tokens, 1)
    elif fault == "empty":
        tokens = [(106, "<turn|>")]
    else:
        tokens = [(100 + i, word) for i, word in enumerate(content.split())]
    value = {"nan": float("nan"), "nan-null": None}.get(fault, -0.25)
    return {"content": [{"token": f"token_id:{token_id}" if as_ids else text, "logprob": value,
                         "bytes": list(text.encode()), "top_logprobs": []} for token_id, text in tokens]}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # a client or stop() closing a connection mid-reply is expected here
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class OpenAIStandIn:
    """The stand-in server; use as a context manager or start()/stop()."""

    def __init__(self, *, model: str = "standin-model", loading_s: float = 0.0, broken=(), overflow=None,
                 modalities=("image", "audio"), first_token_delay_s: float = 0.0, max_model_len: int = 8192,
                 audio_extras: bool = True, loading_polls: int = 0, api_key: str | None = None):
        unknown = set(broken) - set(SCENARIOS)
        if unknown:
            raise ValueError(f"no such scenario {sorted(unknown)}; scenarios are {SCENARIOS}")
        unknown = {kind for kind in (overflow or {}).values()} - set(OVERFLOWS)
        if unknown or set(overflow or {}) - set(SCENARIOS):
            raise ValueError(f"overflow maps scenarios {SCENARIOS} to one of {OVERFLOWS}: {overflow}")
        self.overflow = dict(overflow or {})
        self.model = model
        self.loading_s = loading_s
        self.loading_polls = loading_polls  # /health answers 503 this many times first (no clock involved)
        self._health_polls = 0
        self.broken = frozenset(broken)
        self.modalities = frozenset(modalities)
        self.first_token_delay_s = first_token_delay_s
        self.max_model_len = max_model_len
        self.audio_extras = audio_extras
        self.api_key = api_key
        self.authorizations: list[str | None] = []   # each request's Authorization header, as received
        self.requests: list[tuple[str, str, object]] = []   # (method, path, JSON body) as received
        self.routes = {("GET", "/health"): self.health, ("GET", "/v1/models"): self.models,
                       ("POST", "/v1/chat/completions"): self.chat_completions,
                       ("POST", "/tokenize"): self.tokenize,
                       ("GET", "/metrics"): lambda body: StandInResponse(200, text=self.metrics_text)}
        self.metrics_text = vllm_metrics_text(model)
        self._started = None
        self._health_served = False
        self._server = None
        self._connections = set()   # live sockets, closed by stop() as a dying process would

    def route(self, method: str, path: str, handler) -> None:
        self.routes[(method, path)] = handler

    # --- handlers: body (decoded JSON or None) -> StandInResponse -----------------

    def health(self, body) -> StandInResponse:
        self._health_polls += 1
        loading = (self._started is None or time.monotonic() - self._started < self.loading_s
                   or self._health_polls <= self.loading_polls)
        engine_died = "health" in self.broken and self._health_served
        if loading or engine_died:
            return StandInResponse(503)
        self._health_served = True
        return StandInResponse(200)

    def models(self, body) -> StandInResponse:
        cards = [] if "models" in self.broken else [
            {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
             "root": self.model, "parent": None, "max_model_len": self.max_model_len, "permission": []}]
        return StandInResponse(200, {"object": "list", "data": cards})

    def tokenize(self, body) -> StandInResponse:
        if not isinstance(body, dict) or not body.get("messages"):
            return error(400, "messages: Field required")
        count = prompt_tokens(body)
        return StandInResponse(200, {"count": count, "max_model_len": self.max_model_len,
                                     "tokens": list(range(count)), "token_strs": None})

    def chat_completions(self, body) -> StandInResponse:
        if not isinstance(body, dict) or not body.get("messages"):
            return error(400, "messages: Field required")
        max_tokens = body.get("max_tokens") or 0
        if max_tokens > self.max_model_len:     # vLLM 0.33's words (vllm/renderers/params.py)
            return error(400, f"max_tokens={max_tokens} cannot be greater than max_model_len="
                              f"{self.max_model_len}. Please request fewer output tokens.")
        if prompt_tokens(body) > self.max_model_len - max_tokens:
            return error(400, f"This model's maximum context length is {self.max_model_len} tokens. However, "
                              f"your prompt contains {prompt_tokens(body)} input tokens, which exceeds this limit.")
        name = scenario(body)
        broken = name in self.broken
        if name == "audio" and not self.audio_extras:   # vLLM fetches audio before checking the model
            return error(500, "Please install vllm[audio] for audio support")
        media = "image" if name.startswith("image") else name
        if media in ("image", "audio") and media not in self.modalities:
            return error(400, f"At most 0 {media}(s) may be provided in one prompt.")
        if name == "stream":
            return self._stream(broken)
        if name == "extra-body" and broken:
            return error(400, f"Unrecognized request argument supplied: {sorted(set(body) - KNOWN_CHAT_KEYS)[0]}")
        good, bad = CANNED[name]
        message = bad if broken else good
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        fault = self.overflow.get(name)
        if fault == "nan-400" and body.get("logprobs"):
            return error(400, NAN_400)
        reply = chat_completion(self.model, {"content": "", "reasoning": None} if fault else message,
                                "length" if fault in ("token-0", "nan", "nan-null") else finish)
        if body.get("logprobs"):
            reply["choices"][0]["logprobs"] = logprobs(message.get("content") or "", fault, max_tokens,
                                                       bool(body.get("return_tokens_as_token_ids")))
        return StandInResponse(200, reply, delay_s=self.first_token_delay_s)

    def _stream(self, broken: bool) -> StandInResponse:
        deltas = [{"role": "assistant", "content": ""}] + [{"content": f"{n} "} for n in range(1, 6)]
        events = [chat_chunk(self.model, delta) for delta in deltas]
        events.append(chat_chunk(self.model, {}, "stop"))
        return StandInResponse(200, events=events, done=not broken, delay_s=self.first_token_delay_s)

    def handle(self, method: str, path: str, body, headers=None) -> StandInResponse:
        self.requests.append((method, path, body))
        self.authorizations.append((headers or {}).get("Authorization"))
        if self.api_key and path.startswith("/v1") and "api-key" not in self.broken \
                and (headers or {}).get("Authorization") != f"Bearer {self.api_key}":
            return StandInResponse(401, {"error": "Unauthorized"})    # vLLM's body for a missing or wrong key
        handler = self.routes.get((method, path))
        if handler is None:
            return error(404, f"no route {method} {path} in the stand-in")
        return handler(body)

    # --- the HTTP server -----------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "OpenAIStandIn":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                standin._connections.add(self.connection)

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                standin_reply = standin.handle(method, self.path, body, self.headers)
                write_response(self, standin_reply)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._started = time.monotonic()
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening: from now on connections are refused, as after a container exits."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            for connection in list(self._connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def write_response(handler: BaseHTTPRequestHandler, reply: StandInResponse) -> None:
    if reply.events is None:
        payload = reply.text.encode() if reply.text is not None else b"" if reply.json is None \
            else json.dumps(reply.json).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "text/plain; version=0.0.4" if reply.text is not None
                            else "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        time.sleep(reply.delay_s)
        handler.wfile.write(payload)
        return
    # chunked, one chunk per event, as uvicorn sends vLLM's StreamingResponse
    handler.send_response(reply.status)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Connection", "close")
    handler.end_headers()
    time.sleep(reply.delay_s)

    def chunk(data: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()
    pieces = (f"data: {json.dumps(event)}\n\n".encode() for event in reply.events)
    if reply.burst:
        pieces = [b"".join(pieces)]
    for piece in pieces:
        chunk(piece)
    if reply.done:
        chunk(b"data: [DONE]\n\n")
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()
    handler.close_connection = True
