"""EXTRAS=audio, and no secret given to a build or a run leaves a trace in the image."""
import json
import os
import secrets
import subprocess

import pytest

from tests.image.conftest import REPO, SYSTEM_CA_BUNDLE, build_command
from tests.image.containers import CPU_ENV, idle_container, run_json, run_to_end
from tests.image.layers import find_in_image
from tests.image.test_host_failures_image import AUDIO_REQUESTED, audio_verdict
from tests.support import gemma4_configs

AUDIO_TAG = "vllm-turing-test:0.33.0-audio"
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
    bundle.write_text((SYSTEM_CA_BUNDLE.read_text() if SYSTEM_CA_BUNDLE.is_file() else "") + marker)
    needles = [line.encode() for line in marker.splitlines()[5:8]]
    return bundle, needles


@pytest.fixture(scope="module")
def hf_token():
    return "hf_vllmturingmarker" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def audio_image(docker_client, image_base, marked_ca_bundle, hf_token):
    bundle, _ = marked_ca_bundle
    argv = build_command(AUDIO_TAG, "--extras", "audio", base=image_base, ca_cert=bundle)
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env={**os.environ, "HF_TOKEN": hf_token})
    assert run.returncode == 0, f"the EXTRAS=audio build failed: {run.stderr.strip()[-1500:]}"
    yield docker_client.images.get(AUDIO_TAG)
    docker_client.images.remove(AUDIO_TAG, noprune=True)


def test_audio_extras_import_and_leave_vllm_and_torch_as_the_base_had_them(docker_client, audio_image, image_base):
    with idle_container(docker_client, AUDIO_TAG) as host:
        result = host.run("python3 -c 'import av, soundfile, scipy, mistral_common'")
        assert result.rc == 0, f"the audio stack does not import: {result.stderr.strip()[-500:]}"
        ours = run_json(host, VERSIONS)
    with idle_container(docker_client, image_base) as base:
        theirs = run_json(base, VERSIONS)
    assert ours == theirs, f"EXTRAS=audio changed vLLM/torch/Triton: base {theirs}, image {ours}"


def test_an_audio_model_passes_the_audio_check_in_the_extras_image(docker_client, audio_image, tmp_path):
    """The other half of the audio check: the same model that fails in the plain image passes here."""
    audio = audio_verdict(docker_client, AUDIO_TAG, tmp_path, AUDIO_REQUESTED)
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


def test_no_secret_in_history_labels_env_or_any_layer(docker_client, audio_image, marked_ca_bundle, hf_token):
    _, needles = marked_ca_bundle
    needles = needles + [hf_token.encode()]
    history = json.dumps(audio_image.history()).encode()
    attrs = json.dumps(audio_image.attrs).encode()
    assert not any(n in history for n in needles), "a secret is in `docker history`"
    assert not any(n in attrs for n in needles), "a secret is in the image's labels or config (env)"
    hits = find_in_image(audio_image.id, needles)
    assert not hits, f"a secret is stored in the image's layers: {hits[:5]}"


def test_a_token_given_to_a_run_is_not_printed(docker_client, audio_image, hf_token):
    for mode in (["print-command"], ["check", "--json"]):
        output = _output_of_run(docker_client, mode, hf_token)
        assert hf_token.encode() not in output, f"`{' '.join(mode)}` printed the HF_TOKEN given to the run"


def _output_of_run(client, command, token) -> bytes:
    """stdout and stderr of a run, whatever its exit code (check fails here: no GPU)."""
    _, out, err = run_to_end(client, AUDIO_TAG, command,
                             environment={**CPU_ENV, "HF_TOKEN": token, "MODEL": "/models/none"})
    return (out + err).encode()
