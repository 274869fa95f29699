"""The hostile harness, image tier: the built image's entrypoint (its model folder, its key file, its
Hub token file, its argv) driven with every hostile file kind and with Hypothesis's words, all in one
container of 1 GiB (tests/image/corpus_driver.py runs each case under a timeout), and judged by the
same invariants as the unit tier (tests/support/hostile/registry.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings

from tests.image.containers import run_corpus
from tests.support.hostile import files as hostile, registry
from tests.support.hostile.drive import Outcome
from tests.support.model_files import write_model_dir

CONTAINER_TIMEOUT_S = 20  # corpus_driver's bound per case
MODEL_KINDS = hostile.FILE_KINDS
KEY_KINDS = registry.TEXT_KINDS


def _argv_words() -> list[str]:
    """VLLM_EXTRA_ARGS values, drawn by Hypothesis (derandomized: the same on every run)."""
    drawn: list[str] = []

    @settings(max_examples=15, database=None)
    @given(words=registry.ARGV_WORDS)
    def draw(words):
        drawn.append(" ".join(words).replace("\x00", ""))

    draw()
    return drawn


def _cases(corpus: Path) -> tuple[list[dict], dict[str, registry.Trial]]:
    cases, trials = [], {}
    good = corpus / "good"
    write_model_dir(good)
    valid = (good / "config.json").read_bytes()
    for kind in MODEL_KINDS:
        folder = corpus / "models" / kind
        write_model_dir(folder)
        (folder / "config.json").unlink()
        hostile.make(kind, folder, "config.json", valid)
        cases.append({"id": f"model-{kind}", "env": {"MODEL": f"/corpus/models/{kind}"}, "args": [], "mode": "check"})
        trials[f"model-{kind}"] = registry.Trial([], {}, corpus, ("config.json", f"/corpus/models/{kind}"),
                                                 check="model")
    for kind in KEY_KINDS:
        hostile.make(kind, corpus / "keys" / kind, "api-key", registry.KEY_SECRET.encode() + b"\n")
        cases.append({"id": f"key-{kind}", "env": {"MODEL": "/corpus/good", "API_KEY_FILE": f"/corpus/keys/{kind}/api-key"},
                      "args": [], "mode": "print-command"})
        trials[f"key-{kind}"] = registry.Trial([], {}, corpus, ("API_KEY_FILE",),
                                               accept_ok=kind in hostile.MAY_BE_ACCEPTED)
    for number, words in enumerate(_argv_words()):
        cases.append({"id": f"argv-{number}", "env": {"MODEL": "/corpus/good", "VLLM_EXTRA_ARGS": words},
                      "args": [], "mode": "print-command"})
        trials[f"argv-{number}"] = registry.Trial([], {}, corpus, ("VLLM_EXTRA_ARGS",), accept_ok=True)
    for case in cases:
        case["env"] = {"HF_TOKEN": registry.SECRET, **case["env"]}
    return cases, trials


@pytest.fixture(scope="module")
def outcomes(docker_client, image, tmp_path_factory):
    corpus = tmp_path_factory.mktemp("hostile")
    cases, trials = _cases(corpus)
    for folder, dirs, names in os.walk(corpus):  # the image's own uid reads them
        os.chmod(folder, 0o755)
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink():
                os.chmod(path, 0o644)
    return run_corpus(docker_client, image, corpus, cases), trials


IMAGE_SURFACE = registry.Surface("the image's entrypoint", "entrypoint", (), (), None,
                                 deadline_s=CONTAINER_TIMEOUT_S, memory_cap_bytes=2**30, tier="image")


def test_the_images_entrypoint_holds_against_every_hostile_input(outcomes):
    found, trials = outcomes
    failures = []
    for case_id, trial in trials.items():
        o = found[case_id]
        outcome = Outcome([case_id], None if o["timed_out"] else o["code"], o["stdout"], o["stderr"], o["wall_s"],
                          0, False)
        lines = registry.violations(IMAGE_SURFACE, case_id, trial, outcome, {}, {}, {}, {}, [])
        failures += [f"{case_id}: {line}" for line in lines]
    assert not failures, "\n".join(failures)
    assert len(trials) >= len(MODEL_KINDS) + len(KEY_KINDS) + 10
