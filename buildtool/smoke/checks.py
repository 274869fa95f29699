"""The client contract of a deployment, as data: one Check per item, run in this order.

To add a check, append a Check to CHECKS: a name, one line on what it proves, the
request (path, and a JSON body for a POST; the runner adds "model"), the expectations
(buildtool/smoke/expect.py) split in two: `expect`, what the server must do whatever the
weights (status, field shapes, streaming), and `answer`, what only a model that answers
correctly does (`--contract-only` reports those as not judged). For media input, the
modality it needs; `without_key=True` sends it without the API key (and then once more with it).
The runner, the table and the JSON report pick it up unchanged.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .expect import (Answered, ContentMatches, FiniteTokens, MessageShaped, ModelListed, ReasoningField,
                     ReasoningSeparated, Status, StreamCompleted, StreamText, ToolCalled)
from .media import b64, checkerboard_png, data_url, solid_png, tone_wav

CHAT = "/v1/chat/completions"
MODALITIES = ("image", "audio")


@dataclass(frozen=True)
class Check:
    name: str
    proves: str
    path: str
    body: dict | None = None           # None: a GET
    expect: tuple = (Status(200),)     # the server's side of the contract: any model passes these
    answer: tuple = ()                 # the model's side: only a model that answers correctly passes
    needs: str | None = None           # an input modality ("image", "audio") the model must take
    least_tokens: int = 8              # the fewest max_tokens that still test the claim
    # True: what the row proves is the server's contract (its `answer` is a bonus); False: the row
    # exists to judge the answer. Decides the row's verdict when answers are not judged.
    proves_contract: bool = False
    # True: sent without the API key, expecting `expect` (a 401), then with it, expecting 200. Runs
    # only when a key is given (OPENAI_API_KEY or --api-key-file).
    without_key: bool = False
    stream: bool = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "stream", bool(self.body and self.body.get("stream")))

    def request_body(self, model: str | None) -> dict | None:
        """The JSON body as sent: the check's body with the served model named."""
        if self.body is None:
            return None
        return {"model": model, **self.body} if model else dict(self.body)


def ask(question: str, *, max_tokens: int = 64, content_parts: tuple = (), **extra) -> dict:
    """A deterministic one-turn chat request (temperature 0)."""
    content = [{"type": "text", "text": question}, *content_parts] if content_parts else question
    return {"messages": [{"role": "user", "content": content}],
            "temperature": 0, "max_tokens": max_tokens, **extra}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
RED_SQUARE = {"type": "image_url", "image_url": {"url": data_url("image/png", solid_png((255, 0, 0)))}}
CHECKERBOARD = {"type": "image_url", "image_url": {"url": data_url("image/png", checkerboard_png())}}
TONE_440 = {"type": "input_audio", "input_audio": {"data": b64(tone_wav(440.0)), "format": "wav"}}
CHECKER_WORDS = r"\b(checker\w*|chess\w*|black|white|squares?|grid|tiles?|alternating)\b"
TONE_WORDS = r"\b(tone|beep|sine|hum|humming|buzz|buzzing|whistle|note|pitch|ring|ringing|440|hz|frequency)\b"

SHAPED = (Status(200), MessageShaped())
# The probes of each input: the answer's log-probabilities, its tokens as ids ("token_id:N"), so an fp16
# overflow shows as NaN or token 0 repeated (expect.FiniteTokens), judged before the status (vLLM
# answers NaN log-probabilities with a 400), then the reply's shape; an empty answer is the answer's side.
PROBE = {"logprobs": True, "return_tokens_as_token_ids": True}


def probed(modality: str) -> tuple:
    return (FiniteTokens(modality), *SHAPED)

CHECKS: tuple[Check, ...] = (
    Check("health", "GET /health answers 200 once the engine is loaded (503 while loading)",
          "/health"),
    Check("models", "GET /v1/models lists the served model",
          "/v1/models", expect=(Status(200), ModelListed())),
    # vLLM's key (--api-key / VLLM_API_KEY) guards the /v1 routes only; /health and /metrics stay open.
    Check("api-key", "without the API key GET /v1/models answers 401, with it 200 (runs when a key is given)",
          "/v1/models", expect=(Status(401),), without_key=True),
    # The first generation streams, so the report shows time to first token
    # (the Triton JIT compile of the attention kernel lands on this request).
    Check("stream", "a streamed chat completion sends text deltas and ends with [DONE]",
          CHAT, ask("Count from 1 to 5.", max_tokens=32, stream=True),
          expect=(Status(200), StreamCompleted()), answer=(StreamText(),), proves_contract=True),
    Check("arithmetic", "17*23 is 391 at temperature 0",
          CHAT, ask("What is 17*23? Reply with the number only."),
          expect=SHAPED, answer=(ContentMatches(r"\b391\b"),)),
    Check("fact-capital", "the capital of Australia is Canberra",
          CHAT, ask("What is the capital of Australia? Answer in one word."),
          expect=SHAPED, answer=(ContentMatches(r"\bCanberra\b", re.I),)),
    Check("fact-gold", "the chemical symbol for gold is Au",
          CHAT, ask("What is the chemical symbol for gold? Answer with the symbol only."),
          expect=SHAPED, answer=(ContentMatches(r"\bAu\b"),)),
    Check("tool-calls", "a tool call comes back parsed in message.tool_calls (tool_choice auto)",
          CHAT, ask("What is the weather in Paris right now? Use the tool.", max_tokens=128,
                    tools=[WEATHER_TOOL], tool_choice="auto"),
          expect=SHAPED, answer=(ToolCalled("get_weather", "city", r"paris"),)),
    Check("reasoning", "thinking comes back in message.reasoning, the answer in content",
          CHAT, ask("What is 6 times 7? Reply with the number only.", max_tokens=1024,
                    chat_template_kwargs={"enable_thinking": True}),
          expect=(Status(200), ReasoningField()), answer=(ReasoningSeparated(r"\b42\b"),), least_tokens=64,
          proves_contract=True),
    Check("extra-body", "extra body keys (chat_template_kwargs, top_k, a vendor key) get 200, not 400",
          CHAT, ask("Reply with the word ready.", chat_template_kwargs={"enable_thinking": False},
                    top_k=1, vllm_turing_smoke_vendor_key={"ignored": True}),
          expect=SHAPED, answer=(ContentMatches(r"\S"),), proves_contract=True),
    Check("text", "a text answer is sound: finite log-probabilities, not token 0 repeated, not empty",
          CHAT, ask("Describe a sunny morning in one sentence.", max_tokens=32, **PROBE),
          expect=probed("text"), answer=(Answered("text"),), proves_contract=True),
    Check("image", "a solid red PNG is described as red, in a sound answer",
          CHAT, ask("What colour is this image? Answer with one word.", content_parts=(RED_SQUARE,), **PROBE),
          expect=probed("image"), answer=(Answered("image"), ContentMatches(r"\bred\b", re.I)), needs="image"),
    # Full range in every patch: the input that overflows an fp16 patch embedding (vLLM issue 48231).
    Check("image-contrast", "a black-and-white checkerboard PNG gets a sound answer (the fp16 overflow input)",
          CHAT, ask("Describe the pattern in this image in a few words.", content_parts=(CHECKERBOARD,), **PROBE),
          expect=probed("image"), answer=(Answered("image"), ContentMatches(CHECKER_WORDS, re.I)),
          needs="image", proves_contract=True),
    Check("audio", "a 440 Hz WAV tone is described as a tone, in a sound answer",
          CHAT, ask("Describe this sound in a few words.", max_tokens=96, content_parts=(TONE_440,), **PROBE),
          expect=probed("audio"), answer=(Answered("audio"), ContentMatches(TONE_WORDS, re.I)), needs="audio"),
)

MISSING_AUDIO_EXTRAS = re.compile(r"install vllm\[audio\]")
