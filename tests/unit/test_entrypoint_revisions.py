"""The Hub-revision options judged against the mounted model (entrypoint/revisions.py): vLLM reads a
local folder as it is and ignores --revision, so a revision the folder's fetch manifest (or its
snapshot name) does not say is refused in one line; offline, a Hub id's revision must be in the cache."""
import argparse
import json

import pytest

from entrypoint.argv import judge_extra
from entrypoint.fetch import manifest
from entrypoint.fetch.listing import HubFile
from entrypoint.revisions import revision_problem
from entrypoint.settings import SettingsError
from imagefacts.shape import option_table
from tests.support.model_files import write_hf_cache_model, write_model_dir

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "org/fetched"


def table() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_tag", nargs="?")
    for flag in ("--revision", "--code-revision", "--tokenizer-revision", "--tokenizer", "--seed"):
        parser.add_argument(flag)
    return option_table(parser)


def problem(model, *words, hub_cache="/nowhere", offline=False) -> SettingsError | None:
    return revision_problem(judge_extra(tuple(words), (), table()), str(model), str(hub_cache), offline)


def fetched(folder, revision="main"):
    write_model_dir(folder)
    listed = [HubFile("config.json", (folder / "config.json").stat().st_size, None, "0" * 40)]
    manifest.write(str(folder), manifest.document(REPO, revision, COMMIT, listed, [], "2026-01-01T00:00:00+00:00", "sm75"))
    return folder


@pytest.mark.parametrize("words", [("--revision", "main"), ("--revision", COMMIT), ("--revision", COMMIT[:7]),
                                   ("--code-revision", COMMIT[:12]), ("--tokenizer-revision", "main"), ("--seed", "1")])
def test_a_revision_the_fetched_folder_is_passes(tmp_path, words):
    assert problem(fetched(tmp_path / "m"), *words) is None


@pytest.mark.parametrize("flag", ["--revision", "--code-revision", "--tokenizer-revision"])
def test_a_revision_the_fetched_folder_is_not_is_refused_naming_option_folder_and_fetch(tmp_path, flag):
    refused = problem(fetched(tmp_path / "m"), flag, "v2.0")
    message = str(refused)
    assert refused.variable == f"VLLM_EXTRA_ARGS {flag}" and len(message.splitlines()) == 1
    assert message.startswith(f"VLLM_EXTRA_ARGS {flag}='v2.0': expected a revision the mounted folder is: ")
    assert f"{tmp_path / 'm'} is org/fetched at main, commit {COMMIT[:12]} by its fetch manifest" in message
    assert f"ignoring {flag}" in message and "`fetch org/fetched@v2.0`" in message
    assert problem(fetched(tmp_path / "m"), flag, "fedcba9") is not None  # a short commit, not this one


def test_a_folder_without_a_manifest_answers_to_no_revision(tmp_path):
    write_model_dir(tmp_path / "m")
    refused = problem(tmp_path / "m", "--revision", "main")
    assert refused is not None and f"without a fetch manifest ({manifest.NAME})" in str(refused)
    assert "`fetch REPO@main`" in str(refused)
    assert problem(tmp_path / "m") is None
    assert problem(tmp_path / "not-mounted", "--revision", "main") is None  # the model check names the missing folder


def test_a_mounted_cache_snapshot_answers_to_its_commit(tmp_path):
    snapshot = write_hf_cache_model(tmp_path / "hub", "org/cached")
    assert problem(snapshot, "--revision", COMMIT) is None
    assert "the Hugging Face cache snapshot of commit" in str(problem(snapshot, "--revision", "v2"))


def test_the_tokenizer_revision_is_judged_against_the_tokenizer_given(tmp_path):
    fetched(tmp_path / "m")
    write_model_dir(tmp_path / "tok")
    refused = problem(tmp_path / "m", "--tokenizer", str(tmp_path / "tok"), "--tokenizer-revision", "main")
    assert refused is not None and str(tmp_path / "tok") in str(refused)
    assert problem(tmp_path / "m", "--tokenizer", "org/tok", "--tokenizer-revision", "v2") is None  # online: the server fetches it


def test_offline_a_hub_revision_must_be_in_the_cache(tmp_path):
    write_hf_cache_model(tmp_path / "hub", "org/cached")
    hub = tmp_path / "hub"
    assert problem("org/cached", "--revision", "main", hub_cache=hub, offline=True) is None
    assert problem("org/cached", "--revision", COMMIT, hub_cache=hub, offline=True) is None
    refused = problem("org/cached", "--revision", "v2", hub_cache=hub, offline=True)
    assert refused is not None and "HF_HUB_OFFLINE is set" in str(refused) and "refs/v2" in str(refused)
    assert problem("org/cached", "--revision", "v2", hub_cache=hub, offline=False) is None  # the server downloads it
    assert problem("org/cached", "--revision", "../../x", hub_cache=hub, offline=True) is not None


def test_an_unreadable_manifest_answers_to_no_revision(tmp_path):
    folder = fetched(tmp_path / "m")
    (folder / manifest.NAME).write_text(json.dumps({"version": 1, "repo": REPO}))
    refused = problem(folder, "--revision", "main")
    assert refused is not None and "fetch manifest is unreadable" in str(refused)
