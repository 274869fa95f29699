"""A STAND-IN for vLLM's streaming /v1/completions, for benchmark tests without a GPU.

It extends tests/support/openai_standin.py's server with the route `vllm bench serve`
drives: server-sent text_completion chunks, one per output token, paced like a decoding
engine (a prefill delay per prompt token, then one token every `token_interval_s`), and a
closing usage chunk (`stream_options.include_usage`). Prompt tokens are counted by
splitting on whitespace, which is exactly what tests/support/word_tokenizer.py produces.

`burst=True` sends every event of a completion in one write, after the decode time has passed:
what a client sees when the server coalesced its stream (vLLM's API process merges the tokens it
has not sent yet). `server_tpot_s=T` adds the server's own histogram to /metrics,
vllm:request_time_per_output_token_seconds, observing T per finished completion, as vLLM does
from its engine's step times. /tokenize counts a completion prompt's words.

Like vLLM it refuses a request whose prompt plus max_tokens exceed `max_model_len`
(HTTP 400) and a malformed `cache_salt`; it records every completion request, and counts
"cache hits": a request whose salt and leading `block_tokens` tokens repeat an earlier
one, which vLLM's prefix cache would have served.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from tests.support.openai_standin import OpenAIStandIn, StandInResponse, error, vllm_metrics_text

CACHE_SALT_FORBIDDEN = ("@", "/", "\\", "\0")


@dataclass(frozen=True)
class CompletionRecord:
    prompt: str
    prompt_tokens: int
    max_tokens: int
    cache_salt: str | None
    status: int


def salt_problem(salt) -> str | None:
    """vLLM 0.33's rule for cache_salt (vllm/entrypoints/generate/base/protocol.py)."""
    if salt is None:
        return None
    if not isinstance(salt, str) or not salt:
        return "Parameter 'cache_salt' must be a non-empty string if provided."
    if len(salt) > 128 or any(ch in salt for ch in CACHE_SALT_FORBIDDEN):
        return "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL."
    return None


class StreamingCompletionsStandIn(OpenAIStandIn):
    def __init__(self, *, max_model_len: int = 4096, token_interval_s: float = 0.004,
                 prefill_s_per_token: float = 0.0001, block_tokens: int = 16, hold_after_salts: int | None = None,
                 burst: bool = False, server_tpot_s: float | None = None, **kwargs):
        """`hold_after_salts=N`: requests under an (N+1)-th distinct cache_salt wait until `release()`,
        so a test can stop a sweep between runs without racing it."""
        super().__init__(**kwargs)
        self.hold_after_salts = hold_after_salts
        self._salts: list = []
        self._released = threading.Event()
        self.max_model_len = max_model_len
        self.token_interval_s = token_interval_s
        self.prefill_s_per_token = prefill_s_per_token
        self.block_tokens = block_tokens
        self.completions: list[CompletionRecord] = []
        self.cache_hits = 0
        self._seen_blocks: set = set()
        self._lock = threading.Lock()
        self.burst, self.server_tpot_s = burst, server_tpot_s
        self.finished = 0
        self.route("POST", "/v1/completions", self.stream_completion)
        self.route("GET", "/metrics", self.metrics)
        chat_tokenize = self.routes[("POST", "/tokenize")]
        self.route("POST", "/tokenize", lambda body: self.tokenize_prompt(body) if isinstance(body, dict)
                   and isinstance(body.get("prompt"), str) else chat_tokenize(body))

    def tokenize_prompt(self, body) -> StandInResponse:
        count = len(body["prompt"].split())
        return StandInResponse(200, {"count": count, "max_model_len": self.max_model_len,
                                     "tokens": list(range(count)), "token_strs": None})

    def metrics(self, body) -> StandInResponse:
        text = vllm_metrics_text(self.model)
        if self.server_tpot_s is not None:
            name, labels = "vllm:request_time_per_output_token_seconds", f'engine="0",model_name="{self.model}"'
            with self._lock:
                n = self.finished
            text += (f"# HELP {name} Histogram of time_per_output_token_seconds per request.\n"
                     f"# TYPE {name} histogram\n"
                     f'{name}_bucket{{{labels},le="+Inf"}} {float(n)}\n'
                     f"{name}_count{{{labels}}} {float(n)}\n{name}_sum{{{labels}}} {n * self.server_tpot_s}\n")
        return StandInResponse(200, text=text)

    def _record(self, body: dict, prompt_tokens: int, status: int) -> None:
        record = CompletionRecord(body.get("prompt"), prompt_tokens, body.get("max_tokens"),
                                  body.get("cache_salt"), status)
        with self._lock:
            self.completions.append(record)
            if status == 200:
                key = (record.cache_salt, tuple(record.prompt.split()[: self.block_tokens]))
                if prompt_tokens >= self.block_tokens and key in self._seen_blocks:
                    self.cache_hits += 1
                self._seen_blocks.add(key)

    def stream_completion(self, body) -> StandInResponse:
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return error(400, "prompt: a string is required")
        max_tokens, prompt_tokens = body.get("max_tokens"), len(body["prompt"].split())
        if not isinstance(max_tokens, int) or max_tokens < 1 or not body.get("stream"):
            self._record(body, prompt_tokens, 400)
            return error(400, "this stand-in serves streaming requests with max_tokens >= 1")
        problem = salt_problem(body.get("cache_salt"))
        if problem is None and prompt_tokens + max_tokens > self.max_model_len:
            problem = (f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                       f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                       f"{max_tokens} in the completion). Please reduce the length of the messages or completion.")
        if problem:
            self._record(body, prompt_tokens, 400)
            return error(400, problem)
        self._hold(body.get("cache_salt"))
        self._record(body, prompt_tokens, 200)
        usage = (body.get("stream_options") or {}).get("include_usage")
        if self.burst:   # decoded first, then delivered at once
            events = list(self._events(max_tokens, prompt_tokens, usage))
            return StandInResponse(200, events=events, delay_s=self.prefill_s_per_token * prompt_tokens, burst=True)
        return StandInResponse(200, events=self._events(max_tokens, prompt_tokens, usage),
                               delay_s=self.prefill_s_per_token * prompt_tokens)

    def release(self) -> None:
        self._released.set()

    def _hold(self, salt) -> None:
        with self._lock:
            if salt not in self._salts:
                self._salts.append(salt)
            held = self.hold_after_salts is not None and self._salts.index(salt) >= self.hold_after_salts
        if held:
            self._released.wait()

    def _events(self, max_tokens: int, prompt_tokens: int, usage: bool):
        """Generated lazily, so each chunk leaves when a decoding engine would send it."""
        created = int(time.time())
        for i in range(max_tokens):
            if i:
                time.sleep(self.token_interval_s)
            yield {"id": "cmpl-standin", "object": "text_completion", "created": created, "model": self.model,
                   "choices": [{"index": 0, "text": f" w{i % 97}", "logprobs": None,
                                "finish_reason": "length" if i == max_tokens - 1 else None,
                                "stop_reason": None}]}
        with self._lock:
            self.finished += 1
        if usage:
            yield {"id": "cmpl-standin", "object": "text_completion", "created": created, "model": self.model,
                   "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                                            "total_tokens": prompt_tokens + max_tokens}}
