"""The smoke test speaks vLLM's language: its request bodies (and the stand-in's replies)
are judged inside the image by the pinned release's own OpenAI-server models."""
import json
from pathlib import Path

import pytest

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.expect import NAN_REFUSED
from tests.support.openai_standin import OpenAIStandIn

HERE = Path(__file__).resolve().parent
MODEL = "google/gemma-4-E4B-it"
VENDOR_KEY = "vllm_turing_smoke_vendor_key"
CHAT = "/v1/chat/completions"
PROBES = ("text", "image", "image-contrast", "audio")
# the stand-in's fp16-overflow replies: token 0 repeated (HTTP 200), and vLLM's 400 for NaN log-probabilities
OVERFLOWED = {"text": "token-0", "image": "empty", "image-contrast": "nan-400", "audio": "token-0"}

# Controls: bodies and replies the release must reject, so a pass above means something.
BAD_REQUESTS = [{"name": "control-bad-temperature", "path": CHAT,
                 "body": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}},
                {"name": "control-no-messages", "path": CHAT, "body": {"model": MODEL}}]
BAD_REPLIES = [{"name": "control-chat-without-choices", "model": "chat",
                "json": {"id": "x", "object": "chat.completion", "created": 0, "model": MODEL}}]


def standin_replies() -> list[dict]:
    """Every reply the stand-in gives to the smoke checks, correct and broken, with the
    vLLM model that must accept it."""
    replies = []
    for variant, standin in (("good", OpenAIStandIn(model=MODEL)),
                             ("broken", OpenAIStandIn(model=MODEL, broken={c.name for c in CHECKS})),
                             ("no-media", OpenAIStandIn(model=MODEL, modalities=())),
                             ("overflow", OpenAIStandIn(model=MODEL, overflow=OVERFLOWED))):
        for check in CHECKS:
            reply = standin.handle("POST" if check.body else "GET", check.path, check.request_body(MODEL))
            name = f"{variant}:{check.name}"
            if reply.events is not None:
                replies += [{"name": f"{name}:{i}", "model": "chunk", "json": e} for i, e in enumerate(reply.events)]
            elif reply.json is not None:
                model = "error" if reply.status >= 400 else "models" if check.path == "/v1/models" else "chat"
                replies.append({"name": name, "model": model, "json": reply.json})
    return replies


@pytest.fixture(scope="module")
def judged(docker_client, image, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("smoke-requests")
    requests = [{"name": c.name, "path": c.path, "body": c.request_body(MODEL)} for c in CHECKS if c.body]
    spec = {"requests": requests + BAD_REQUESTS, "replies": standin_replies() + BAD_REPLIES}
    (folder / "input.json").write_text(json.dumps(spec))
    (folder / "judge.py").write_text((HERE / "smoke_request_models.py").read_text())
    output = docker_client.containers.run(
        image, entrypoint=["python3", "/smoke/judge.py", "/smoke/input.json"], command=[],
        environment={"CUDA_VISIBLE_DEVICES": ""}, volumes={str(folder): {"bind": "/smoke", "mode": "ro"}},
        remove=True, stdout=True, stderr=False)
    # vLLM may log to stdout; the judge's verdict is the last line
    return json.loads(output.decode().strip().splitlines()[-1])


def test_every_check_request_is_valid_for_the_pinned_release(judged):
    invalid = {name: r["error"] for name, r in judged["requests"].items()
               if not name.startswith("control") and not r["valid"]}
    assert invalid == {}
    assert set(judged["requests"]) >= {c.name for c in CHECKS if c.body}


def test_the_release_rejects_the_controls(judged):
    assert not judged["requests"]["control-bad-temperature"]["valid"]
    assert not judged["requests"]["control-no-messages"]["valid"]
    assert not judged["replies"]["control-chat-without-choices"]["valid"]


def test_only_the_vendor_key_is_an_extra_field(judged):
    """chat_template_kwargs, top_k, tool_choice... are fields the release knows, so the
    checks exercise them rather than keys it would silently ignore."""
    extras = {name: r["fields"]["extra_keys"] for name, r in judged["requests"].items()
              if not name.startswith("control")}
    assert extras.pop("extra-body") == [VENDOR_KEY]
    assert all(keys == [] for keys in extras.values()), extras


def test_the_release_reads_the_fields_each_check_relies_on(judged):
    fields = {name: r["fields"] for name, r in judged["requests"].items() if not name.startswith("control")}
    assert all(f["temperature"] == 0 for f in fields.values())
    assert fields["stream"]["stream"] is True
    assert [n for n, f in fields.items() if f["stream"]] == ["stream"]
    assert fields["tool-calls"]["tools"] == ["get_weather"] and fields["tool-calls"]["tool_choice"] == "auto"
    assert fields["reasoning"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert fields["extra-body"]["top_k"] == 1
    assert fields["extra-body"]["chat_template_kwargs"] == {"enable_thinking": False}


def test_vllm_loads_the_red_square(judged):
    parts = judged["requests"]["image"]["parts"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["media"] == {"size": [32, 32], "pixel": [255, 0, 0]}


def test_the_release_reads_the_probes_logprob_fields(judged):
    """The input probes ask for log-probabilities with the tokens as ids (the fields vLLM knows)."""
    fields = {name: judged["requests"][name]["fields"] for name in PROBES}
    assert all(f["logprobs"] is True and f["return_tokens_as_token_ids"] is True for f in fields.values()), fields


def test_the_release_answers_nan_log_probabilities_as_the_probes_read_them(judged):
    """An fp16 overflow's NaN log-probabilities, through the release's own code: its chat route's
    JSONResponse cannot write them and its ValueError handler makes that a 400 whose words the probes
    know; a stream chunk writes them as null, which the probes count as NaN."""
    nan = judged["nan_logprobs"]
    assert nan["reply"]["status"] == 400 and nan["reply"]["raised"] == "ValueError", nan
    assert NAN_REFUSED.search(nan["reply"]["message"]), nan
    assert nan["chunk"]["content"][0]["logprob"] is None, nan


def test_vllm_loads_the_checkerboard(judged):
    parts = judged["requests"]["image-contrast"]["parts"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["media"] == {"size": [256, 256], "pixel": [0, 0, 0]}


def test_vllm_loads_the_tone_or_names_the_missing_audio_extras(judged):
    parts = judged["requests"]["audio"]["parts"]
    assert [p["type"] for p in parts] == ["text", "input_audio"]
    media = parts[1]["media"]
    if "error" in media:
        # an image without the audio extras; the smoke check then skips on the server's words
        assert "vllm[audio]" in media["error"], media["error"]
    else:
        assert media["samples"] == media["rate"] * 1.0
        assert 0.45 < media["peak"] < 0.55


def test_every_standin_reply_is_valid_for_the_pinned_release(judged):
    invalid = {name: r["error"] for name, r in judged["replies"].items()
               if not name.startswith("control") and not r["valid"]}
    assert invalid == {}
    assert any(name.startswith("broken:extra-body") for name in judged["replies"])
    assert any(name.startswith("no-media:image") for name in judged["replies"])
    assert "overflow:text" in judged["replies"] and "overflow:image-contrast" in judged["replies"]
