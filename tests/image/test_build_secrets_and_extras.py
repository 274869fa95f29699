"""EXTRAS=audio, and no secret given to a build or a run leaves a trace in the image: the CA bundle,
a token in the environment, and a package index URL with a password, which pip in the build does
use (a real index server on the Docker bridge sees its requests authenticated)."""
import base64
import http.server
import json
import os
import secrets
import subprocess
import sys
import threading

import pytest

from buildtool.hostconfig import host_ca_bundle
from buildtool.lock import base_target
from tests import REPO
from tests.image.conftest import build_command
from tests.image.containers import CPU_ENV, idle_container, run_json, run_to_end
from tests.image.layers import find_in_image
from tests.image.test_host_failures_image import AUDIO_REQUESTED, audio_verdict
from tests.support import gemma4_configs
from tests.support.docker_bridge import bridge_gateway

# the lines that fail on a GPU-less host: no device nodes, no driver libraries
DEVICE_LINES = {"devices", "driver"}
VERSIONS = "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in ('vllm', 'torch', 'triton')}))"


@pytest.fixture(scope="module")
def marked_ca_bundle(tmp_path_factory):
    """The host's CA bundle plus a CA made for this test: its PEM lines exist nowhere else."""
    tmp = tmp_path_factory.mktemp("ca")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=vllm-turing secret marker", "-keyout", str(tmp / "key.pem"),
                    "-out", str(tmp / "marker.pem")], check=True, capture_output=True)
    marker = (tmp / "marker.pem").read_text()
    bundle = tmp / "bundle.pem"
    host = host_ca_bundle()
    bundle.write_text((host[0].read_text() if host else "") + marker)
    needles = [line.encode() for line in marker.splitlines()[5:8]]
    return bundle, needles


@pytest.fixture(scope="module")
def hf_token():
    return "hf_vllmturingmarker" + secrets.token_hex(12)


class CredentialedIndex(http.server.ThreadingHTTPServer):
    """A package index that wants user:password (401 without), then knows no project (404, so pip
    goes on to its other index); it records the credentials each request brought."""

    def __init__(self, address, user: str, password: str):
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.authorized, self.refused = [], []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N805
                if handler.headers.get("Authorization") == self.expected:
                    self.authorized.append(handler.path)
                    handler.send_error(404)
                else:
                    self.refused.append(handler.path)
                    handler.send_response(401)
                    handler.send_header("WWW-Authenticate", 'Basic realm="index"')
                    handler.end_headers()

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(address, Handler)


@pytest.fixture(scope="module")
def index_password():
    return "idxpw" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def credentialed_index(docker_client, index_password):
    server = CredentialedIndex((bridge_gateway(docker_client), 0), "vllmturing", index_password)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield server, {"PIP_EXTRA_INDEX_URL": f"http://vllmturing:{index_password}@{host}:{port}/simple",
                   "PIP_TRUSTED_HOST": host}
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def audio_tag(image):
    return f"{image}-audio"


@pytest.fixture(scope="module")
def audio_image(docker_client, image_base, audio_tag, marked_ca_bundle, hf_token, credentialed_index):
    """EXTRAS=audio with every kind of secret a build can meet."""
    bundle, _ = marked_ca_bundle
    _, index_env = credentialed_index
    argv = build_command(audio_tag, "--extras", "audio", base=image_base, ca_cert=bundle)
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "HF_TOKEN": hf_token, **index_env})
    assert run.returncode == 0, f"the EXTRAS=audio build failed: {run.stderr.strip()[-1500:]}"
    yield docker_client.images.get(audio_tag)
    docker_client.images.remove(audio_tag, noprune=True)


def test_audio_extras_import_and_leave_vllm_and_torch_as_the_base_had_them(docker_client, audio_image, audio_tag,
                                                                          image_base):
    with idle_container(docker_client, audio_tag) as host:
        result = host.run("python3 -c 'import av, soundfile, scipy, mistral_common'")
        assert result.rc == 0, f"the audio stack does not import: {result.stderr.strip()[-500:]}"
        ours = run_json(host, VERSIONS)
    with idle_container(docker_client, image_base) as base:
        theirs = run_json(base, VERSIONS)
    assert ours == theirs, f"EXTRAS=audio changed vLLM/torch/Triton: base {theirs}, image {ours}"


def test_an_audio_model_passes_the_audio_check_in_the_extras_image(docker_client, audio_image, audio_tag, tmp_path):
    """The other half of the audio check: the same model that fails in the plain image passes here."""
    audio = audio_verdict(docker_client, audio_tag, tmp_path, AUDIO_REQUESTED)
    assert audio["status"] == "pass" and "decode with" in audio["message"], audio


@pytest.mark.parametrize("variant", sorted(gemma4_configs.VARIANTS))
def test_the_default_images_preflight_passes_published_gemma4_configs_towers_and_all(docker_client, image,
                                                                                  tmp_path, variant):
    """The default build serves published Gemma 4 checkpoints: an audio tower loads without the audio
    extra (entrypoint/checks/audio.py says what was measured); on this GPU-less host only the device
    lines fail, as README's `check` line promises."""
    folder = gemma4_configs.published_model_dir(variant, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config.get("vision_config"), "the published config has a vision tower"
    assert bool(config.get("audio_config")) == ("audio" in gemma4_configs.TOWERS[variant])
    _, out, _ = run_to_end(docker_client, image, ["check", "--json"], environment={**CPU_ENV, "MODEL": "/models/m"},
                           volumes={str(folder): {"bind": "/models/m", "mode": "ro"}}, shm_size="8g")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["audio"]["status"] == "pass", checks["audio"]
    if config.get("audio_config"):
        assert "audio tower (audio_config)" in checks["audio"]["message"], checks["audio"]
    refused = {name: c["message"] for name, c in checks.items() if c["status"] == "fail"}
    assert set(refused) == DEVICE_LINES, f"the preflight refuses {variant}'s published config beyond the device lines: " \
                                         f"{refused}"


def traces(client, ref: str, needles: list[bytes]) -> dict[str, bool]:
    """Where a needle shows: `docker history --no-trunc`, `docker inspect` (labels, env, config)."""
    history = subprocess.run(["docker", "history", "--no-trunc", ref], capture_output=True, check=True).stdout
    inspect = subprocess.run(["docker", "inspect", ref], capture_output=True, check=True).stdout
    return {"docker history --no-trunc": any(n in history for n in needles),
            "docker inspect": any(n in inspect for n in needles)}


@pytest.fixture(scope="module")
def planted(docker_client, image_base, index_password, tmp_path_factory):
    """Control images holding the index password the way a leak would: a build argument a RUN step
    uses (history), a label (inspect), a file (a layer)."""
    context = tmp_path_factory.mktemp("planted")
    (context / "planted.txt").write_text(f"index password {index_password}\n")
    tags = {"history": "vllm-turing-test-planted:history", "layer": "vllm-turing-test-planted:layer"}
    (context / "Dockerfile.history").write_text(f"FROM {image_base}\nARG PIP_EXTRA_INDEX_URL\n"
                                                 "RUN test -n \"$PIP_EXTRA_INDEX_URL\"\n"
                                                 "LABEL index=$PIP_EXTRA_INDEX_URL\n")
    (context / "after.txt").write_text("a later layer, so the planted one lies below the top\n")
    (context / "Dockerfile.layer").write_text(f"FROM {image_base}\nCOPY planted.txt /planted.txt\n"
                                               "COPY after.txt /after.txt\n")
    for name, tag in tags.items():
        subprocess.run(["docker", "buildx", "build", "--load", "-q", "-f", str(context / f"Dockerfile.{name}"),
                        "--build-arg", f"PIP_EXTRA_INDEX_URL=http://u:{index_password}@index.invalid/simple",
                        "-t", tag, str(context)], check=True, capture_output=True)
    yield tags
    for tag in tags.values():
        docker_client.images.remove(tag, noprune=False)


def test_the_search_finds_a_planted_index_password(docker_client, planted, index_password, image_base):
    needle = [index_password.encode()]
    assert traces(docker_client, planted["history"], needle) == {"docker history --no-trunc": True,
                                                                 "docker inspect": True}
    # the search the audio image gets below: its layers over the base, wherever the engine keeps them
    hits = find_in_image(docker_client.images.get(planted["layer"]).id, needle, base=image_base)
    assert len(hits) == 1 and hits[0].endswith("planted.txt"), f"the layer search missed the file: {hits}"


def test_pip_in_the_base_build_meets_the_index_with_its_credentials(credentialed_index, index_password):
    """The base's pip step, made to run (a lock of one vLLM version no index has, written for this
    test: the step's cache key changes, a secret's content is no part of it), asks the credentialed
    index with user:password, then fails in one line, the password in no output."""
    server, index_env = credentialed_index
    version = "0.0.0.dev" + str(secrets.randbelow(10**9))
    lock = base_target(version).path
    lock.write_text(f"vllm=={version} \\\n    --hash=sha256:{'0' * 64}\n")
    before = len(server.authorized)
    try:
        run = subprocess.run([sys.executable, str(REPO / "build.py"), "base", "--vllm-version", version,
                              "--base-tag", "vllm-turing-test-noindex:0"], cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, **index_env})
    finally:
        lock.unlink()
    assert run.returncode == 1, f"exit {run.returncode}: {run.stderr.strip()[-500:]}"
    assert run.stderr.startswith("build.py base: build failed:") and len(run.stderr.strip().splitlines()) == 1, \
        run.stderr[-500:]
    assert index_password not in run.stdout + run.stderr, "build.py printed the index password"
    assert "/simple/vllm/" in server.authorized[before:], \
        f"pip never asked the index with its credentials (authorized {server.authorized}, refused {server.refused})"
    assert not server.refused, f"requests reached the index without its credentials: {server.refused[:5]}"


def test_no_secret_in_history_labels_env_or_any_layer(docker_client, audio_image, audio_tag, image_base, marked_ca_bundle,
                                                      hf_token, index_password, planted):
    _, needles = marked_ca_bundle
    needles = needles + [hf_token.encode(), index_password.encode()]
    assert traces(docker_client, audio_tag, needles) == {"docker history --no-trunc": False, "docker inspect": False}
    assert not any(n in json.dumps(audio_image.history()).encode() for n in needles), "a secret is in the history"
    hits = find_in_image(audio_image.id, needles, base=image_base)  # the base was built before these needles existed
    assert not hits, f"a secret is stored in the image's layers: {hits[:5]}"


def test_a_token_given_to_a_run_is_not_printed(docker_client, audio_image, audio_tag, hf_token):
    for mode in (["print-command"], ["check", "--json"]):
        _, out, err = run_to_end(docker_client, audio_tag, mode,
                                 environment={**CPU_ENV, "HF_TOKEN": hf_token, "MODEL": "/models/none"})
        assert hf_token.encode() not in (out + err).encode(), f"`{' '.join(mode)}` printed the HF_TOKEN given to the run"
