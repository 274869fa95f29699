"""Smoke's input probes against the OpenAI stand-in: a numerically broken answer (what an fp16 overflow
gives: token 0 repeated, an empty answer, NaN log-probabilities) fails the row of its input in one line,
and the inputs asked follow the served model's config.json."""
import json
import os

import pytest

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.command_line import main
from buildtool.smoke.inputs import host_folders
from tests.support import gemma4_configs
from tests.support.openai_standin import OpenAIStandIn
from buildtool.endpoint.replies import ModelCard

FAST = ["--interval", "0.05", "--timeout", "10", "--json"]
PROBES = ["text", "image", "image-contrast", "audio"]
MODALITY = {"text": "text", "image": "image", "image-contrast": "image", "audio": "audio"}


@pytest.fixture(autouse=True)
def no_key_no_model_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "no-models-here"))


def smoke(capsys, url, *args):
    code = main([url, *FAST, *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def rows(report):
    return {check["name"]: check for check in report["checks"]}


def chats(standin):
    return [body for _, path, body in standin.requests if path == "/v1/chat/completions"]


def test_the_probes_ask_for_log_probabilities_as_token_ids():
    for check in CHECKS:
        if check.name in PROBES:
            assert check.body["logprobs"] is True and check.body["return_tokens_as_token_ids"] is True, check.name


@pytest.mark.parametrize("name, fault, seen", [
    ("text", "token-0", "the answer is token 0 repeated (32 tokens)"),
    ("text", "nan", "32 of 32 log-probabilities are NaN"),
    ("image", "nan-null", "64 of 64 log-probabilities are NaN"),
    ("image-contrast", "nan-400", "HTTP 400, the server could not write NaN log-probabilities"),
    ("image-contrast", "empty", "the answer is empty (HTTP 200, finish_reason stop)"),
    ("audio", "token-0", "the answer is token 0 repeated (96 tokens)"),
    ("audio", "nan-400", "Out of range float values are not JSON compliant"),
])
def test_an_overflowed_answer_fails_its_row_in_one_line_naming_the_input_and_the_cause(capsys, name, fault, seen):
    with OpenAIStandIn(overflow={name: fault}) as standin:
        code, report, _ = smoke(capsys, standin.url, "--only", name)
    (row,) = report["checks"]
    assert code == 1 and row["status"] == "fail"
    assert row["message"].startswith(f"{MODALITY[name]}: ") and seen in row["message"]
    assert "likely an fp16 overflow" in row["message"] and "\n" not in row["message"]
    assert "rebuild the image (python3 build.py)" in row["fix"]


@pytest.mark.parametrize("fault", ["token-0", "nan", "nan-null", "nan-400"])
def test_an_overflow_fails_even_when_answers_are_not_judged(capsys, fault):
    """NaN and token 0 are the engine's numbers, wrong whatever the weights: --contract-only (random
    weights) still fails them; the high-contrast picture alone overflows, the solid red passes."""
    with OpenAIStandIn(overflow={"image-contrast": fault}) as standin:
        code, report, _ = smoke(capsys, standin.url, "--contract-only", "--only", "image", "--only", "image-contrast")
    assert code == 1
    assert {name: row["status"] for name, row in rows(report).items()} == {"image": "not judged",
                                                                           "image-contrast": "fail"}


def test_an_empty_answer_is_the_answers_side(capsys):
    """Random weights may end at once: under --contract-only an empty answer is not judged."""
    with OpenAIStandIn(overflow={"text": "empty"}) as standin:
        code, report, _ = smoke(capsys, standin.url, "--contract-only", "--only", "text")
    assert code == 0 and report["checks"][0]["status"] == "pass"
    assert report["checks"][0]["answer"] == "not judged"


def test_sound_answers_pass_every_probe(capsys):
    with OpenAIStandIn() as standin:
        code, report, _ = smoke(capsys, standin.url, *[arg for name in PROBES for arg in ("--only", name)])
    assert code == 0 and {name: row["status"] for name, row in rows(report).items()} == dict.fromkeys(PROBES, "pass")
    assert report["inputs"] == {"modalities": None, "source": "no config.json of the served model on this host: "
                                                                "the server's refusals decide"}


def test_a_reply_without_logprobs_fails_naming_the_field(capsys):
    with OpenAIStandIn() as standin:
        answer = standin.chat_completions

        def without_logprobs(body):
            reply = answer(body)
            reply.json["choices"][0]["logprobs"] = None
            return reply
        standin.route("POST", "/v1/chat/completions", without_logprobs)
        code, report, _ = smoke(capsys, standin.url, "--only", "text")
    assert code == 1 and "choices[0].logprobs is null" in report["checks"][0]["message"]
    assert report["checks"][0]["fix"] == ""     # not an overflow: no rebuild advised


# --- which inputs: the served model's config.json -----------------------------------------------

@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """Model folders whose config.json transformers wrote: E2B (vision and audio), the 12B (vision; and
    with an audio_config, which vLLM's Gemma4UnifiedForConditionalGeneration embeds), and a text-only
    Gemma 4 as the serving tier's tiny model (tests/serving/tiny_gemma4.py)."""
    import transformers

    root = tmp_path_factory.mktemp("models")
    made = {}
    for variant, name in (("gemma4-e2b", "gemma-4-E2B-it"), ("gemma4-12b", "gemma-4-12B-it")):
        (root / name).mkdir()
        gemma4_configs.save_model_dir(variant, root / name, towers=True)
        made[name] = root / name
    config = json.loads((made["gemma-4-12B-it"] / "config.json").read_text())
    config["audio_config"] = transformers.Gemma4UnifiedAudioConfig().to_dict()
    (root / "served-12b").mkdir()
    (root / "served-12b" / "config.json").write_text(json.dumps(config))
    made["served-12b"] = root / "served-12b"
    transformers.Gemma4TextConfig(vocab_size=1024, architectures=["Gemma4ForCausalLM"]).save_pretrained(root / "tiny")
    made["tiny"] = root / "tiny"
    return root, made


def test_a_text_only_model_is_asked_no_image_and_no_audio(capsys, configs, monkeypatch):
    root, made = configs
    monkeypatch.setenv("MODEL_DIR", str(root))
    with OpenAIStandIn(model="/models/tiny", modalities=()) as standin:
        code, report, _ = smoke(capsys, standin.url)
        sent = chats(standin)
    assert code == 0
    assert report["inputs"]["modalities"] == ["text"]
    assert str(made["tiny"] / "config.json") in report["inputs"]["source"]
    assert not any(part.get("type") != "text" for body in sent for part in
                   (body["messages"][0]["content"] if isinstance(body["messages"][0]["content"], list) else []))
    checks = rows(report)
    assert checks["text"]["status"] == "pass"
    for name in ("image", "image-contrast", "audio"):
        assert checks[name]["status"] == "skip" and "config.json" in checks[name]["message"], checks[name]


def test_a_served_12b_under_another_name_is_asked_about_a_sound(capsys, configs):
    """The name says nothing (not gemma-4-E2B/E4B), the config has an audio tower: the audio row is
    sent, and an image without the audio extras fails it with the fix."""
    _, made = configs
    with OpenAIStandIn(model="served-12b", audio_extras=False) as standin:
        code, report, _ = smoke(capsys, standin.url, "--model-config", str(made["served-12b"]), "--only", "audio")
    assert report["inputs"]["modalities"] == ["text", "audio", "image"]
    audio = report["checks"][0]
    assert code == 1 and audio["status"] == "fail" and "EXTRAS=audio" in audio["fix"]


@pytest.mark.parametrize("folder, asked", [("gemma-4-E2B-it", ["text", "audio", "image"]),
                                           ("gemma-4-12B-it", ["text", "image"])])
def test_the_units_models_folder_is_found_from_the_served_root(capsys, configs, monkeypatch, folder, asked):
    """compose and Quadlet serve MODEL=/models/NAME from $MODEL_DIR/NAME on the host: /v1/models names
    the root, smoke reads the same folder here."""
    root, made = configs
    monkeypatch.setenv("MODEL_DIR", str(root))
    with OpenAIStandIn(model=f"/models/{folder}") as standin:
        code, report, _ = smoke(capsys, standin.url, "--only", "image-contrast", "--only", "audio")
        sent = chats(standin)
    assert code == 0 and report["inputs"]["modalities"] == asked
    statuses = {name: row["status"] for name, row in rows(report).items()}
    assert statuses == {"image-contrast": "pass", "audio": "pass" if "audio" in asked else "skip"}
    assert len(sent) == len(asked) - 1
    if "audio" not in asked:
        assert "no audio tower" in rows(report)["audio"]["message"]


def test_an_input_the_config_has_but_the_server_turned_off_is_skipped_quoting_it(capsys, configs):
    _, made = configs
    with OpenAIStandIn(model="e2b", modalities=("image",)) as standin:
        code, report, _ = smoke(capsys, standin.url, "--model-config", str(made["gemma-4-E2B-it"] / "config.json"),
                                "--only", "audio")
    audio = report["checks"][0]
    assert code == 0 and audio["status"] == "skip"
    assert "the server turned it off: At most 0 audio(s) may be provided" in audio["message"]


def test_stated_modalities_win_over_the_config(capsys, configs):
    _, made = configs
    with OpenAIStandIn(model="e2b") as standin:
        code, report, _ = smoke(capsys, standin.url, "--model-config", str(made["gemma-4-E2B-it"]),
                                "--modalities", "text", "--only", "image")
    assert code == 0 and report["inputs"] == {"modalities": ["text"], "source": "--modalities"}
    assert report["checks"][0]["status"] == "skip"


@pytest.mark.parametrize("make, expected", [
    (lambda path: path, "has no config.json"),
    (lambda path: (path.mkdir(), (path / "config.json").write_text("{not json"))[0], "config.json"),
    (lambda path: (path.mkdir(), (path / "config.json").write_text('{"vision_config": 3}'))[0],
     "'vision_config' is the number 3, expected a JSON object"),
])
def test_an_unreadable_model_config_is_bad_input_in_one_line(capsys, tmp_path, make, expected):
    folder = tmp_path / "model"
    make(folder)
    code = main(["http://127.0.0.1:9", *FAST, "--model-config", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("smoke: --model-config ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("root, env, folders", [
    ("/models/gemma-4-E2B-it", {"MODEL_DIR": "/srv/m"}, ["/srv/m/gemma-4-E2B-it", "/models/gemma-4-E2B-it"]),
    ("/models/gemma-4-E2B-it", {}, [os.path.expanduser("~/models/gemma-4-E2B-it"), "/models/gemma-4-E2B-it"]),
    ("/data/llm/gemma", {"MODEL_DIR": "/srv/m"}, ["/data/llm/gemma"]),
    ("google/gemma-4-E2B-it", {}, []),                       # a Hub name: nothing on this host to read
    ("/models/../etc", {"MODEL_DIR": "/srv/m"}, []),          # the server names the folder: no climbing out
])
def test_where_the_served_root_is_looked_for_on_this_host(root, env, folders):
    assert host_folders(ModelCard("gemma-4", root), env) == folders
