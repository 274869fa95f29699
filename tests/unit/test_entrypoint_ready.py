"""`python3 -m entrypoint.ready`, the pods' readiness probe: ready only when the served model is listed
by /v1/models, asked with the key from API_KEY_FILE; each way of not being ready is exit 1 and one
line that says which, never the key. Run as the kubelet runs it, against the OpenAI stand-in."""
import json
import subprocess
import sys

from hypothesis import example, given, strategies as st

from entrypoint.ready import listed_models
from tests.support.openai_standin import OpenAIStandIn, StandInResponse
from tests import REPO
from door.problem import Problem

KEY = "sk-readiness-7d1e0b9c55"
MODEL = "/models/gemma-4-E2B-it"


def probe(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "entrypoint.ready"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env})


def test_the_served_model_listed_is_ready():
    with OpenAIStandIn(model=MODEL) as server:
        done = probe({"MODEL": MODEL, "PORT": str(server.port)})
    assert (done.returncode, done.stderr) == (0, "")
    assert [(method, path) for method, path, _ in server.requests] == [("GET", "/v1/models")]


def test_the_served_model_name_wins_over_the_model_as_it_does_for_vllm():
    with OpenAIStandIn(model="gemma") as server:
        assert probe({"MODEL": MODEL, "SERVED_MODEL_NAME": "gemma", "PORT": str(server.port)}).returncode == 0
        done = probe({"MODEL": MODEL, "PORT": str(server.port)})
    assert done.returncode == 1 and f"not the served model '{MODEL}'" in done.stderr and "'gemma'" in done.stderr


def test_the_key_comes_from_api_key_file_and_a_wrong_or_missing_one_is_not_ready(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("sk-not-the-servers-key\n")
    with OpenAIStandIn(model=MODEL, api_key=KEY) as server:
        env = {"MODEL": MODEL, "PORT": str(server.port)}
        good = probe({**env, "API_KEY_FILE": str(key_file)})
        without = probe(env)
        mismatched = probe({**env, "API_KEY_FILE": str(wrong)})
    assert good.returncode == 0, good.stderr
    assert server.authorizations[0] == f"Bearer {KEY}"
    assert without.returncode == 1 and "answered 401" in without.stderr and "API_KEY_FILE" in without.stderr
    assert mismatched.returncode == 1 and "not the server's" in mismatched.stderr
    for done in (good, without, mismatched):
        assert KEY not in done.stdout + done.stderr and "sk-not" not in done.stderr
        assert len(done.stderr.splitlines()) == done.returncode


def test_no_model_listed_a_bad_answer_and_no_server_are_each_not_ready():
    with OpenAIStandIn(model=MODEL, broken={"models"}) as server:
        empty = probe({"MODEL": MODEL, "PORT": str(server.port)})
    with OpenAIStandIn(model=MODEL) as server:
        server.route("GET", "/v1/models", lambda body: StandInResponse(200, text="<html>proxy</html>"))
        garbled = probe({"MODEL": MODEL, "PORT": str(server.port)})
    with OpenAIStandIn(model=MODEL) as server:
        server.route("GET", "/v1/models", lambda body: StandInResponse(503, {"error": "loading"}))
        loading = probe({"MODEL": MODEL, "PORT": str(server.port)})
    gone = OpenAIStandIn(model=MODEL).start()
    gone.stop()
    down = probe({"MODEL": MODEL, "PORT": str(gone.port)})
    assert empty.returncode == 1 and "lists no model" in empty.stderr
    assert garbled.returncode == 1 and "not an OpenAI model list" in garbled.stderr
    assert loading.returncode == 1 and "answered 503" in loading.stderr
    assert down.returncode == 1 and "no answer" in down.stderr


def test_a_bad_setting_is_not_ready_naming_it():
    done = probe({"MODEL": MODEL, "PORT": "eighty"})
    assert done.returncode == 1 and "PORT" in done.stderr and len(done.stderr.splitlines()) == 1


@given(st.one_of(st.binary(max_size=300),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                              lambda inner: st.lists(inner, max_size=3)
                              | st.dictionaries(st.sampled_from(["data", "id", "object"]), inner, max_size=3),
                              max_leaves=12).map(lambda value: json.dumps(value).encode())))
@example(b'{"data": [{"id": 1}]}')
@example(b'{"data": "ab"}')
@example(b"[" * 100_000)
def test_any_answer_is_a_list_of_names_or_not_ready_never_a_traceback(body):
    try:
        names = listed_models(body)
    except Problem as problem:
        assert "/v1/models" in str(problem)
    else:
        assert all(isinstance(name, str) for name in names)
