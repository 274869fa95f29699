"""`entrypoint fetch` against the hostile Hub peer (tests/support/hostile/peer.py): every remote name
stays under the model folder, an answer without a commit is refused, a re-fetch that fails leaves the
folder fetched before byte-identical, no read runs without end or cap, and no secret reaches a line.
Each refusal: its exit code, one line naming the input and the fix, within its deadline."""
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import example, given, strategies as st

from contract import layout
from door import paths
from door.problem import Problem, UsageError
from entrypoint.fetch import hub_client
from entrypoint.fetch.listing import HubFile, parse_listing
from tests.support.hostile import peer as hostile
from tests.support.hostile.peer import HubPeer
from tests.support.slack import SCHEDULING_SLACK_S
from tests import REPO
from tests.unit.test_fetch import FITS, GLOBAL_HEAD_TOO_BIG, model_contents
from tests.unit.test_fitcheck_lookup import installed, written_table  # noqa: F401 (a fixture)

HUB_REPO = "org/model"
TOKEN = "hf_plantedTOKENvalue0123456789abcdef"
TIMEOUT_S = 120


@pytest.fixture
def site(tmp_path, installed):  # noqa: F811
    return tmp_path / "site"


def fetch(peer, tmp_path, *words, table=FITS, **env):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    clean.update({"HF_ENDPOINT": peer.url, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp_path / "hf-home"),
                  "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
                  layout.ENV_FIT_TABLE: str(written_table(tmp_path, table)), **env})
    return subprocess.run([sys.executable, "-m", "entrypoint", "fetch", *(words or (HUB_REPO,)), "--gpu", "sm75",
                           "--models-dir", str(tmp_path / "models")], cwd=REPO, env=clean, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def state(root: pathlib.Path) -> dict:
    """Every file under `root` (the lock and the stage beside the folder aside): {path: SHA-256}."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and ".staged" not in str(path.relative_to(root))
            and not path.name.endswith(".lock")}


def one_line(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    last = lines[-1]
    assert all(word in last for word in words), done.stderr
    assert "Traceback" not in done.stderr
    return last


def fetched(peer, tmp_path) -> dict:
    """A first fetch of HUB_REPO that succeeds; the folder's state."""
    done = fetch(peer, tmp_path)
    assert done.returncode == 0, done.stderr
    # the fetch's reads alone: no library asks the endpoint anything of its own (an agent registry, a token)
    assert all(seen.path.startswith((f"/api/models/{HUB_REPO}/", f"/{HUB_REPO}/resolve/")) for seen in peer.requests), \
        [seen.path for seen in peer.requests]
    return state(tmp_path / "models" / "model")


@pytest.mark.parametrize("name", ["../escape.json", "/models/abs.json", "sub/../../escape.json", "a\\..\\b.json"])
def test_a_listed_name_that_leaves_the_folder_is_refused_and_nothing_is_written(tmp_path, site, name):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, {**model_contents(tmp_path), name: b"{}"})
        done = fetch(peer, tmp_path)
    one_line(done, 2, "HF_ENDPOINT", repr(name)[1:-1][:20])
    assert not (tmp_path / "escape.json").exists() and not (tmp_path / "models" / "escape.json").exists()
    assert not os.path.exists("/models/abs.json")
    assert not (tmp_path / "models" / "model").exists()


def test_an_answer_without_a_commit_sha_is_refused_never_fetched_unpinned(tmp_path, site):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        peer.route(rf"/api/models/{HUB_REPO}/revision/main", hostile.once(hostile.ok_json({"id": HUB_REPO})))
        done = fetch(peer, tmp_path)
    one_line(done, 2, "without a commit sha", "HF_ENDPOINT")
    assert not (tmp_path / "models" / "model").exists()


def test_main_moved_to_wrong_bytes_leaves_the_good_folder_byte_identical(tmp_path, site):
    good = model_contents(tmp_path, fill=1)
    with HubPeer() as peer:
        peer.publish(HUB_REPO, good)
        before = fetched(peer, tmp_path)
        moved = model_contents(tmp_path, fill=2)
        commit = peer.publish(HUB_REPO, moved)  # main moves; its shard is served with other bytes than listed
        shard = "model-00001-of-00002.safetensors"
        peer.route(rf"/{HUB_REPO}/resolve/{commit}/{shard}", hostile.file_answer(good[shard][:-1] + b"\xff"))
        done = fetch(peer, tmp_path)
    one_line(done, 1, shard, "SHA-256")
    assert state(tmp_path / "models" / "model") == before


def test_main_moved_to_an_unfit_commit_keeps_the_good_config(tmp_path, site):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        before = fetched(peer, tmp_path)
        unfit = model_contents(tmp_path, fill=3)
        config = json.loads(unfit["config.json"])
        unfit["config.json"] = json.dumps({**config, "note": "moved"}).encode()
        peer.publish(HUB_REPO, unfit)
        done = fetch(peer, tmp_path, table=GLOBAL_HEAD_TOO_BIG)
    one_line(done, 1, "cannot serve on sm75")
    assert state(tmp_path / "models" / "model") == before


def test_a_fifo_where_the_lock_goes_is_refused_without_blocking(tmp_path, site):
    (tmp_path / "models").mkdir()
    os.mkfifo(tmp_path / "models" / ".model.lock")
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        started = time.monotonic()
        done = fetch(peer, tmp_path)
    one_line(done, 2, ".model.lock", "remove it")
    assert time.monotonic() - started < TIMEOUT_S


def test_a_fifo_as_the_token_file_is_refused_naming_hf_token_path(tmp_path, site):
    os.mkfifo(tmp_path / "token")
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        done = fetch(peer, tmp_path, HF_TOKEN_PATH=str(tmp_path / "token"))
    one_line(done, 2, "HF_TOKEN_PATH", "named pipe")


def test_a_mirrors_403_echoing_the_token_never_prints_it(tmp_path, site):
    assert TOKEN in f"forbidden for Bearer {TOKEN}"  # the search finds a planted one
    with HubPeer() as peer:
        peer.route("/", hostile.echo_authorization())
        done = fetch(peer, tmp_path, HF_TOKEN=TOKEN)
        assert any(TOKEN in seen.headers.get("authorization", "") for seen in peer.requests)  # sent, echoed
    one_line(done, 1, "403")
    assert TOKEN not in done.stdout + done.stderr


def test_hf_endpoint_credentials_never_print_through_retries_or_logs(tmp_path, site):
    password = "pa55wordPLANTED"
    with HubPeer() as peer:
        peer.route("/", hostile.once(hostile.answer(b"busy", 503)))
        endpoint = peer.url.replace("http://", f"http://user:{password}@")
        assert password in endpoint  # the search finds a planted one
        done = fetch(peer, tmp_path, HF_ENDPOINT=endpoint)
        assert peer.requests[0].headers["authorization"].startswith("Basic ")  # the credentials were used
    one_line(done, 1, "503")
    assert password not in done.stdout + done.stderr


THIRD_PARTY = """
import logging, sys, warnings
from door import output
logging.basicConfig(format="%(name)s: %(message)s")
log = logging.getLogger("huggingface_hub.utils._http")
secret = sys.argv[1]
log.warning("before install: %s", secret)
output.install(output.secrets_in({"HF_ENDPOINT": f"https://u:{secret}@mirror.example/"}))
log.warning("Retrying in 1s [Retry 1/5]: https://u:%s@mirror.example/api", secret)
log.error("failed", exc_info=RuntimeError(f"the password {secret}"))
warnings.warn(f"endpoint {secret} is slow")
"""


def test_third_party_log_records_and_warnings_are_masked_once_installed():
    secret = "s3cretPLANTEDvalue"
    done = subprocess.run([sys.executable, "-c", THIRD_PARTY, secret], cwd=REPO, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    before, _, after = done.stderr.partition("Retrying")
    assert secret in before  # the search finds a planted one
    assert "Retry 1/5" in after and "the password" in after and "is slow" in after, done.stderr
    assert secret not in after


# -- bounds, read by the Hub's reader directly with small bounds (the fetch's are minutes) -------------

@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(hub_client, "API_DEADLINE_S", 2.0)
    monkeypatch.setattr(hub_client, "DOWNLOAD_BASE_S", 2.0)
    monkeypatch.setattr(hub_client, "IDLE_S", 1.0)
    monkeypatch.setattr(hub_client, "API_CAP", 2**20)


def hub_refusal(call, peer, monkeypatch) -> tuple[Problem, float]:
    monkeypatch.setenv("HF_ENDPOINT", peer.url)
    monkeypatch.setattr(hub_client, "_endpoint", lambda: peer.url)
    started = time.monotonic()
    with pytest.raises(Problem) as caught:
        call()
    took = time.monotonic() - started
    assert "\n" not in str(caught.value) and caught.value.fix
    return caught.value, took


CONTENT = bytes(range(256)) * 8
FILE = HubFile("model.safetensors", len(CONTENT), hashlib.sha256(CONTENT).hexdigest(), "0" * 40)
COMMIT = "c" * 40
RESOLVE = rf"/{HUB_REPO}/resolve/{COMMIT}/model.safetensors"


@pytest.mark.parametrize("behaviour", [hostile.stall_after_headers(declared=len(CONTENT)),
                                       hostile.trickle(hostile.answer(CONTENT), every_s=0.5)],
                         ids=["stall-after-headers", "trickle"])
def test_a_weight_that_stalls_or_trickles_ends_by_its_deadline(tmp_path, small_bounds, monkeypatch, behaviour):
    with HubPeer().route(RESOLVE, behaviour) as peer:
        problem, took = hub_refusal(lambda: hub_client.download(HUB_REPO, COMMIT, FILE, str(tmp_path)), peer, monkeypatch)
    assert "model.safetensors" in str(problem) and not isinstance(problem, UsageError)
    assert took < hub_client.download_deadline_s(FILE.size) + SCHEDULING_SLACK_S < hostile.HOLD_S
    assert not (tmp_path / "model.safetensors").exists()


def test_a_weight_cut_at_the_same_byte_on_every_request_is_resumed_a_bounded_number_of_times(
        tmp_path, small_bounds, monkeypatch):
    with HubPeer().route(RESOLVE, hostile.file_answer(CONTENT, cut_at=1000)) as peer:
        problem, _ = hub_refusal(lambda: hub_client.download(HUB_REPO, COMMIT, FILE, str(tmp_path)), peer, monkeypatch)
        assert len(peer.requests) <= hub_client.MAX_RESUMES + 1
    assert "ended after" in str(problem) and "given up" in str(problem)
    partial = pathlib.Path(hub_client.partial_path(str(tmp_path), FILE))
    assert partial.read_bytes() == CONTENT[:1000]  # kept for the next run


def test_a_listing_whose_next_page_is_itself_is_refused(small_bounds, monkeypatch):
    entry = hostile.tree_entry("config.json", b"{}", lfs=False)
    with HubPeer().route(rf"/api/models/{HUB_REPO}/tree/", hostile.self_linking([entry])) as peer:
        problem, took = hub_refusal(lambda: hub_client.list_files(HUB_REPO, COMMIT), peer, monkeypatch)
    assert "cycle" in str(problem) and isinstance(problem, UsageError) and took < SCHEDULING_SLACK_S


@pytest.mark.parametrize("behaviour, said", [
    (hostile.lying_length(b"[]" * 1024), "declared 1099511627776 bytes"),
    (hostile.huge_body(200), "declared"),
    (hostile.huge_body(200, declared=False), "more than the"),
    (hostile.huge_body(500), "answered 500"),
    (hostile.huge_body(500, declared=False), "answered 500")],
    ids=["length-2^40-for-2KiB", "8GiB-body", "8GiB-undeclared", "8GiB-error-body", "8GiB-undeclared-error"])
def test_a_listing_or_error_body_past_its_cap_is_refused_before_it_is_read(small_bounds, monkeypatch, behaviour, said):
    with HubPeer().route(rf"/api/models/{HUB_REPO}/revision/", behaviour) as peer:
        problem, took = hub_refusal(lambda: hub_client.resolve_commit(HUB_REPO, "main"), peer, monkeypatch)
    assert said in str(problem) and took < hub_client.API_DEADLINE_S + SCHEDULING_SLACK_S


def test_a_weight_declared_larger_than_the_listing_says_is_refused(tmp_path, small_bounds, monkeypatch):
    with HubPeer().route(RESOLVE, hostile.lying_length(CONTENT)) as peer:
        problem, _ = hub_refusal(lambda: hub_client.download(HUB_REPO, COMMIT, FILE, str(tmp_path)), peer, monkeypatch)
    assert "declared 1099511627776 bytes" in str(problem)


def test_a_rerun_on_a_whole_folder_rewrites_the_manifest_in_place_and_stages_nothing(tmp_path, site):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        before = fetched(peer, tmp_path)
        folder = tmp_path / "models" / "model"
        inode = folder.stat().st_ino
        again = fetch(peer, tmp_path)
    assert again.returncode == 0, again.stderr
    assert folder.stat().st_ino == inode and not (tmp_path / "models" / ".model.staged").exists()
    assert {name for name in state(folder)} == set(before)


def test_sigterm_in_the_middle_of_a_refetch_leaves_the_good_folder_byte_identical(tmp_path, site):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path, fill=1))
        before = fetched(peer, tmp_path)
        moved = model_contents(tmp_path, fill=4)
        commit = peer.publish(HUB_REPO, moved)
        shard = "model-00002-of-00002.safetensors"  # its headers as listed, then silence
        peer.route(rf"/{HUB_REPO}/resolve/{commit}/{shard}", hostile.stall_after_headers(declared=len(moved[shard])))
        clean = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
        clean.update({"HF_ENDPOINT": peer.url, "HF_HOME": str(tmp_path / "hf-home"),
                      "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
                      layout.ENV_FIT_TABLE: str(written_table(tmp_path, FITS))})
        process = subprocess.Popen([sys.executable, "-m", "entrypoint", "fetch", HUB_REPO, "--gpu", "sm75", "--models-dir",
                                    str(tmp_path / "models")], cwd=REPO, env=clean, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not any(seen.path.endswith(f"{commit}/{shard}") for seen in peer.requests):
                assert process.poll() is None and time.monotonic() < deadline, "the re-fetch never asked for the shard"
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=SCHEDULING_SLACK_S) == 128 + signal.SIGTERM
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert state(tmp_path / "models" / "model") == before


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "path", "size", "oid", "lfs"]) | st.text(max_size=5), inner,
                        max_size=5), max_leaves=20))
@example([{"type": "file", "path": "../escape.json", "size": 2, "oid": "0" * 40}])
@example([{"type": "file", "path": "/models/abs.json", "size": 2, "oid": "0" * 40}])
@example([{"type": "file", "path": "a.json", "size": True, "oid": "0" * 40}])
def test_any_listing_is_files_under_the_folder_or_one_line(entries):
    try:
        found = parse_listing(entries, "the Hub's listing")
    except Problem as problem:
        assert "\n" not in str(problem) and str(problem).startswith("the Hub's listing")
        return
    for file in found:
        assert paths.problem(file.path) is None and type(file.size) is int and file.size >= 0


@given(st.none() | st.dictionaries(st.sampled_from(["sha", "id"]), st.none() | st.integers() | st.text(max_size=41)))
def test_any_revision_answer_names_a_commit_or_is_refused_naming_hf_endpoint(doc):
    try:
        commit = hub_client.commit_of(doc, HUB_REPO, "main")
    except Problem as problem:
        assert isinstance(problem, UsageError) and "HF_ENDPOINT" in str(problem) and "\n" not in str(problem)
        return
    assert re.fullmatch(r"[0-9a-f]{40}", commit)


def test_a_fifo_in_a_copy_imported_with_from_is_refused_without_blocking(tmp_path, site):
    with HubPeer() as peer:
        peer.publish(HUB_REPO, model_contents(tmp_path))
        fetched(peer, tmp_path)
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path / "models" / "model", copy)
        (copy / "tokenizer_config.json").unlink()
        os.mkfifo(copy / "tokenizer_config.json")
        done = fetch(peer, tmp_path, HUB_REPO, "--from", str(copy), "--name", "imported")
    one_line(done, 2, "tokenizer_config.json", "named pipe")
    assert not (tmp_path / "models" / "imported").exists()
