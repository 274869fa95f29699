"""`entrypoint fetch` against a real Hub-compatible server (olah, offline, serving git repositories with
LFS objects made here): the revision pinned to a commit, the model judged from its small files before
any weight byte, every file verified, the manifest written; re-runs verify, interrupted ones resume."""
import hashlib
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import time

import pytest

from contract import layout
from entrypoint.fetch.hub_client import partial_path as hub_partial_path
from entrypoint.fetch.listing import HubFile
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS
from tests.support.cutting_proxy import CuttingProxy
from tests.support.gated_standin import GatedStandin
from tooling.hub_mirror import HubMirror
from tests.support.range_standin import RangeStandin
from tooling.standins.standin_driver import build_standin_driver
from tests.support.model_files import write_tensors
from tests.unit.test_fitcheck_lookup import installed, written_table  # noqa: F401 (a fixture)
from tests import REPO

FITS = {"sliding": 40000, "global": 61440}
GLOBAL_HEAD_TOO_BIG = {"sliding": 40000, "global": 98304}
MANIFEST = "vllm-turing-fetch.json"
TIMEOUT_S = 180


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    server = HubMirror(tmp_path_factory.mktemp("hub")).start()
    yield server
    server.stop()


@pytest.fixture
def site(tmp_path, installed):  # noqa: F811
    """vLLM and Triton as package metadata (what the fit table's lookup reads, not their code)."""
    return tmp_path / "site"


def shard_bytes(tmp_path, name: str, elements: int, fill: int = 0) -> bytes:
    path = write_tensors(tmp_path / name, {f"{name}.weight": ("F16", [elements])})
    raw = bytearray(path.read_bytes())
    header_end = len(raw) - 2 * elements
    raw[header_end:] = bytes([fill]) * (2 * elements)  # distinct content per commit
    return bytes(raw)


def model_contents(tmp_path, fill: int = 1, elements: int = 262_144) -> dict:
    """A two-shard model (1 MiB of weights in all): config, tokenizer and generation config, an index and
    the shards; {path: content}."""
    contents = {"config.json": json.dumps(BUILTIN_CONFIGS["gemma4-e2b"]).encode(),
                "generation_config.json": b'{"do_sample": true}\n',
                "tokenizer_config.json": b'{"model_max_length": 8192}\n'}
    names = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    weight_map = {f"{name}.weight": name for name in names}
    contents["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    for name in names:
        contents[name] = shard_bytes(tmp_path, name, elements // 2, fill)
    return contents


def make_model(mirror, tmp_path, repo_id: str, fill: int = 1, elements: int = 262_144) -> tuple:
    """model_contents in a mirror repository: the shards and nothing else in LFS; (repo, {path: content})."""
    repo = mirror.repo(repo_id)
    contents = model_contents(tmp_path, fill, elements)
    for path, content in contents.items():
        if path.endswith(".safetensors"):
            repo.put_lfs(path, content)
        else:
            (repo.path / path).write_bytes(content)
    return repo, contents


def fetch(mirror, tmp_path, site, table_shared, *words, **env):
    env = mirror.env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
                     **{layout.ENV_FIT_TABLE: str(written_table(tmp_path, table_shared))}, **env)
    return subprocess.run([sys.executable, "-m", "entrypoint", "fetch", *words, "--gpu", "sm75",
                           "--models-dir", str(tmp_path / "models")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def manifest(tmp_path, name: str) -> dict:
    return json.loads((tmp_path / "models" / name / MANIFEST).read_text())


def weight_files_in(folder: pathlib.Path) -> list[pathlib.Path]:
    return [path for path in folder.rglob("*") if path.suffix in (".safetensors", ".partial")]


def test_a_fetch_pins_the_commit_and_verifies_every_file_into_the_manifest(mirror, tmp_path, site):
    repo, contents = make_model(mirror, tmp_path, "org/pinned")
    commit = repo.commit()
    done = fetch(mirror, tmp_path, site, FITS, "org/pinned")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "models" / "pinned"
    for path, content in contents.items():
        assert (folder / path).read_bytes() == content
    document = manifest(tmp_path, "pinned")
    assert (document["repo"], document["revision"], document["commit"]) == ("org/pinned", "main", commit)
    recorded = {file["path"]: file for file in document["files"]}
    assert set(recorded) == set(contents)
    for path, content in contents.items():
        assert recorded[path]["size"] == len(content)
        if path.endswith(".safetensors"):
            assert recorded[path]["sha256"] == hashlib.sha256(content).hexdigest()
        else:
            assert recorded[path]["blob_id"] == hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    assert document["verdict"]["fit"] == "pass"


def test_a_rerun_only_verifies_and_a_truncated_shard_is_fetched_again(mirror, tmp_path, site):
    repo, contents = make_model(mirror, tmp_path, "org/resumed")
    repo.commit()
    assert fetch(mirror, tmp_path, site, FITS, "org/resumed").returncode == 0
    folder = tmp_path / "models" / "resumed"
    first = manifest(tmp_path, "resumed")
    untouched = folder / "model-00001-of-00002.safetensors"
    truncated = folder / "model-00002-of-00002.safetensors"
    stamp = untouched.stat().st_mtime_ns
    again = fetch(mirror, tmp_path, site, FITS, "org/resumed")
    assert again.returncode == 0, again.stderr
    assert "fetching" not in again.stderr  # nothing downloaded, not even a small file
    with open(truncated, "r+b") as handle:
        handle.truncate(truncated.stat().st_size // 3)
    fixed = fetch(mirror, tmp_path, site, FITS, "org/resumed")
    assert fixed.returncode == 0, fixed.stderr
    assert truncated.read_bytes() == contents[truncated.name]
    assert untouched.stat().st_mtime_ns == stamp
    last = manifest(tmp_path, "resumed")
    assert {**last, "fetched_at": None} == {**first, "fetched_at": None}


def test_a_head_size_that_does_not_fit_sm75_is_refused_before_any_weight_byte(mirror, tmp_path, site):
    make_model(mirror, tmp_path, "org/unfit")[0].commit()
    with CuttingProxy(mirror.port, cut_after=2**62) as counting:  # passes everything, records the requests
        refused = fetch(mirror, tmp_path, site, GLOBAL_HEAD_TOO_BIG, "org/unfit", HF_ENDPOINT=counting.url)
    assert refused.returncode == 1
    asked = b"".join(counting.requests).decode("latin-1")
    assert "config.json" in asked and not re.search(r"GET \S+\.safetensors ", asked)
    last = refused.stderr.strip().splitlines()[-1]
    assert "cannot serve on sm75" in last and "head 512" in last and "no weights were downloaded" in last
    folder, stage = tmp_path / "models" / "unfit", tmp_path / "models" / ".unfit.staged"
    assert not folder.exists()  # nothing but a verified fetch is put in the folder's place
    assert (stage / "config.json").is_file()
    assert weight_files_in(stage) == [] and not (stage / MANIFEST).exists()


def test_a_byte_flipped_in_a_shard_on_the_server_is_refused_naming_the_file(mirror, tmp_path, site):
    repo, contents = make_model(mirror, tmp_path, "org/flipped")
    repo.commit()
    shard = "model-00002-of-00002.safetensors"
    stored = repo.lfs_object(hashlib.sha256(contents[shard]).hexdigest())
    altered = bytearray(stored.read_bytes())
    altered[-1] ^= 0xFF
    stored.write_bytes(bytes(altered))
    refused = fetch(mirror, tmp_path, site, FITS, "org/flipped")
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert shard in last and "SHA-256" in last
    assert not (tmp_path / "models" / "flipped" / shard).exists()
    assert not (tmp_path / "models" / "flipped" / MANIFEST).exists()


def test_a_branch_that_moves_between_two_fetches_stays_pinned_to_the_commit_given(mirror, tmp_path, site):
    repo, first_contents = make_model(mirror, tmp_path, "org/moving", fill=1)
    first = repo.commit("first")
    shard = "model-00001-of-00002.safetensors"
    repo.put_lfs(shard, shard_bytes(tmp_path, shard, 131_072, fill=2))
    second = repo.commit("second")
    pinned = fetch(mirror, tmp_path, site, FITS, f"org/moving@{first}", "--name", "pinned")
    latest = fetch(mirror, tmp_path, site, FITS, "org/moving", "--name", "latest")
    assert pinned.returncode == latest.returncode == 0, pinned.stderr + latest.stderr
    assert manifest(tmp_path, "pinned")["commit"] == first and manifest(tmp_path, "latest")["commit"] == second
    assert (tmp_path / "models" / "pinned" / shard).read_bytes() == first_contents[shard]
    assert (tmp_path / "models" / "latest" / shard).read_bytes() != first_contents[shard]


def test_a_named_card_has_its_memory_judged_and_recorded(mirror, tmp_path, site):
    make_model(mirror, tmp_path, "org/carded")[0].commit()
    env = mirror.env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
                     **{layout.ENV_FIT_TABLE: str(written_table(tmp_path, FITS))})
    done = subprocess.run([sys.executable, "-m", "entrypoint", "fetch", "org/carded", "--gpu", "t4", "--models-dir",
                           str(tmp_path / "models")], cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "gpu memory on t4: pass" in done.stderr
    document = manifest(tmp_path, "carded")
    assert (document["gpu"], document["verdict"]["gpu memory"]) == ("t4", "pass")


@pytest.mark.parametrize("gpu_total, verdict", [(15 * 2**30, "pass"), (2**30, "fail")])
def test_without_gpu_this_hosts_card_has_its_memory_judged(mirror, tmp_path, site, gpu_total, verdict):
    """No --gpu: the weakest CUDA device here and its card's memory as NVML reports it (a standin driver
    of one T4 whose NVML reports `gpu_total`: 1 GiB leaves nothing beside the runtime's allowance)."""
    make_model(mirror, tmp_path, f"org/hosted-{verdict}")[0].commit()
    libs = build_standin_driver(tmp_path / "driver", gpu_total=gpu_total)
    env = mirror.env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), LD_LIBRARY_PATH=str(libs),
                     **{layout.ENV_FIT_TABLE: str(written_table(tmp_path, FITS))})
    done = subprocess.run([sys.executable, "-m", "entrypoint", "fetch", f"org/hosted-{verdict}", "--models-dir",
                           str(tmp_path / "models")], cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    line = next((line for line in done.stderr.splitlines() if "gpu memory on sm75:" in line), "")
    assert f"gpu memory on sm75: {verdict} " in line and "StandIn Tesla T4" in line, done.stderr
    if verdict == "pass":
        assert done.returncode == 0 and manifest(tmp_path, "hosted-pass")["verdict"]["gpu memory"] == "pass"
    else:
        assert done.returncode == 1, done.stderr
        assert not weight_files_in(tmp_path / "models" / "hosted-fail")


def test_a_repository_the_hub_lacks_is_bad_input_in_one_line(mirror, tmp_path, site):
    missing = fetch(mirror, tmp_path, site, FITS, "org/nothing-here")
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "org/nothing-here" in missing.stderr


def leaked(secret: str, *texts: str) -> list[str]:
    """The texts that hold `secret`."""
    return [text for text in texts if secret in text]


def test_the_token_never_reaches_the_output_or_the_manifest(mirror, tmp_path, site):
    planted = "hf_plantedTOKENvalue0123456789abcdef"
    assert leaked(planted, "before", f"Authorization: Bearer {planted}") != []  # the search finds one
    make_model(mirror, tmp_path, "org/tokened")[0].commit()
    token_file = tmp_path / "token"
    token_file.write_text(planted)
    for setting in ({"HF_TOKEN": planted}, {"HF_TOKEN_PATH": str(token_file)}):
        done = fetch(mirror, tmp_path, site, FITS, "org/tokened", **setting)
        assert done.returncode == 0, done.stderr
        folder = tmp_path / "models" / "tokened"
        written = [path.read_text(errors="replace") for path in folder.rglob("*") if path.is_file()]
        assert leaked(planted, done.stdout, done.stderr, *written) == []


def test_a_download_whose_connection_is_killed_mid_shard_resumes_from_where_it_stopped(mirror, tmp_path, site):
    # door.remote keeps every byte it received: two 12 MiB shards, one cut past 11 MiB, resumed from there
    repo, contents = make_model(mirror, tmp_path, "org/cut", elements=12 * 2**20)
    repo.commit()
    with CuttingProxy(mirror.port, cut_after=11 * 2**20) as proxy:
        done = fetch(mirror, tmp_path, site, FITS, "org/cut", HF_ENDPOINT=proxy.url)
        sent = b"".join(proxy.requests).decode("latin-1")
    assert done.returncode == 0, done.stderr
    assert proxy.cuts == 1
    assert re.search(r"(?i)range: bytes=[1-9][0-9]*-", sent), "the client started the cut file over"
    for path, content in contents.items():
        assert (tmp_path / "models" / "cut" / path).read_bytes() == content


def fetch_process(mirror, tmp_path, site, table_shared, *words, **env) -> subprocess.Popen:
    env = mirror.env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
                     **{layout.ENV_FIT_TABLE: str(written_table(tmp_path, table_shared))}, **env)
    return subprocess.Popen([sys.executable, "-m", "entrypoint", "fetch", *words, "--gpu", "sm75", "--models-dir",
                             str(tmp_path / "models")], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_for(condition, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout_s} s"
        time.sleep(0.05)


def test_a_fetch_killed_mid_shard_resumes_from_its_partial_file_in_the_next_run(mirror, tmp_path, site):
    # a 12 MiB shard stalled past 11 MiB leaves 10 MiB and more in the stage beside the folder when the run
    # is killed (the other shard, fetched at the same time, as far as it got)
    repo, contents = make_model(mirror, tmp_path, "org/killed", elements=12 * 2**20)
    repo.commit()
    partials = tmp_path / "models" / ".killed.staged" / ".cache" / "vllm-turing" / "partial"
    shard_of = {pathlib.Path(hub_partial_path("", HubFile(name, len(content), hashlib.sha256(content).hexdigest(),
                                                          "0" * 40))).name: name for name, content in contents.items()}
    with CuttingProxy(mirror.port, cut_after=11 * 2**20, stall=True) as stalling:
        first = fetch_process(mirror, tmp_path, site, FITS, "org/killed", HF_ENDPOINT=stalling.url)
        try:
            wait_for(lambda: any(path.stat().st_size >= 10 * 2**20 for path in partials.glob("*.partial")),
                     "10 MiB of a shard on disk")
        finally:
            first.kill()
            first.wait()
    kept = {shard_of[path.name]: path.stat().st_size for path in partials.glob("*.partial") if path.stat().st_size}
    assert kept and all(0 < size < len(contents[name]) for name, size in kept.items())
    # olah's mirror route answers a Range request with the whole file: the standin answers it as the Hub does
    with RangeStandin(mirror.endpoint) as hub:
        second = fetch(mirror, tmp_path, site, FITS, "org/killed", HF_ENDPOINT=hub.url)
    assert second.returncode == 0, second.stderr
    assert sorted(hub.ranges) == sorted(f"bytes={size}-" for size in kept.values()), "a partial file was not resumed"
    weights = sum(len(content) for name, content in contents.items() if name.endswith(".safetensors"))
    # what the first run left was not sent again (room for the API's and the small files' answers)
    assert hub.answered < weights - sum(kept.values()) + 2**20
    for path, content in contents.items():
        assert (tmp_path / "models" / "killed" / path).read_bytes() == content
    assert list(partials.glob("*.partial")) == []


def test_a_weight_file_the_commit_lacks_in_the_folder_is_refused_before_anything_is_fetched(mirror, tmp_path, site):
    make_model(mirror, tmp_path, "org/stray")[0].commit()
    folder = tmp_path / "models" / "stray"
    folder.mkdir(parents=True)
    (folder / "old-00001.safetensors").write_bytes(b"x")
    refused = fetch(mirror, tmp_path, site, FITS, "org/stray")
    assert refused.returncode == 1 and "old-00001.safetensors" in refused.stderr.splitlines()[-1]
    assert sorted(path.name for path in folder.iterdir() if path.name != ".cache") == ["old-00001.safetensors"]


def offline(mirror) -> dict:
    """No Hub to reach: an endpoint nothing listens on, and huggingface_hub told to stay offline."""
    return {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}


COPIES = itertools.count()


@pytest.fixture
def fetched_copy(mirror, tmp_path, site):
    """A model fetched (elsewhere, as an air-gapped site receives it): its folder, contents and commit,
    of a repository org/carried-N of its own (the mirror serves the whole module)."""
    name = f"carried-{next(COPIES)}"
    repo, contents = make_model(mirror, tmp_path, f"org/{name}")
    commit = repo.commit()
    assert fetch(mirror, tmp_path, site, FITS, f"org/{name}").returncode == 0
    return tmp_path / "models" / name, contents, commit


def test_a_copy_made_elsewhere_is_imported_offline_and_verified_against_its_manifest(mirror, tmp_path, site,
                                                                                      fetched_copy):
    copy, contents, commit = fetched_copy
    archive = tmp_path / "carried.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(copy, arcname=copy.name, filter=lambda info: None if "/.cache" in info.name else info)
    for name, source in (("from-folder", copy), ("from-tarball", archive)):
        done = fetch(mirror, tmp_path, site, FITS, f"org/{copy.name}", "--name", name, "--from", str(source), **offline(mirror))
        assert done.returncode == 0, done.stderr
        for path, content in contents.items():
            assert (tmp_path / "models" / name / path).read_bytes() == content
        assert manifest(tmp_path, name)["commit"] == commit


def test_an_altered_copy_is_refused_naming_the_file_though_its_manifest_is_whole(mirror, tmp_path, site, fetched_copy):
    copy, _, _ = fetched_copy
    shard = copy / "model-00002-of-00002.safetensors"
    altered = bytearray(shard.read_bytes())
    altered[-1] ^= 0xFF
    shard.write_bytes(bytes(altered))
    refused = fetch(mirror, tmp_path, site, FITS, f"org/{copy.name}", "--name", "altered", "--from", str(copy),
                    **offline(mirror))
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert shard.name in last and "SHA-256" in last
    assert not (tmp_path / "models" / "altered" / MANIFEST).exists()


def test_a_copy_without_its_manifest_or_of_another_repository_is_refused(mirror, tmp_path, site, fetched_copy):
    copy, _, _ = fetched_copy
    other = fetch(mirror, tmp_path, site, FITS, "org/another", "--name", "x", "--from", str(copy), **offline(mirror))
    assert other.returncode == 1 and f"holds org/{copy.name}, not org/another" in other.stderr
    (copy / MANIFEST).unlink()
    bare = fetch(mirror, tmp_path, site, FITS, f"org/{copy.name}", "--name", "y", "--from", str(copy), **offline(mirror))
    assert bare.returncode == 2 and MANIFEST in bare.stderr.strip().splitlines()[-1]


def test_a_gated_repository_without_a_token_is_refused_in_one_line_naming_the_token_file(mirror, tmp_path, site):
    # olah cannot gate a repository: the standin answers as the Hub does (401, X-Error-Code: GatedRepo)
    with GatedStandin() as hub:
        refused = fetch(mirror, tmp_path, site, FITS, "org/gated", HF_ENDPOINT=hub.url)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "org/gated is gated" in refused.stderr and "HF_TOKEN_PATH" in refused.stderr
    assert hub.requests and all(authorization is None for _, authorization in hub.requests)
    assert not (tmp_path / "models" / "gated").exists()


def test_a_fetch_pinned_to_the_commit_its_manifest_records_verifies_without_the_hub(mirror, tmp_path, site):
    repo, contents = make_model(mirror, tmp_path, "org/pinned-here")
    commit = repo.commit()
    assert fetch(mirror, tmp_path, site, FITS, f"org/pinned-here@{commit}").returncode == 0
    shard = tmp_path / "models" / "pinned-here" / "model-00002-of-00002.safetensors"
    shard.unlink()
    with GatedStandin() as hub:  # any question to the Hub would be answered with a refusal
        again = fetch(mirror, tmp_path, site, FITS, f"org/pinned-here@{commit}", HF_ENDPOINT=hub.url)
    assert again.returncode == 1 and not [line for line, _ in hub.requests if "/api/" in line]
    assert shard.name in again.stderr  # the one missing file was the only thing asked for
    complete = fetch(mirror, tmp_path, site, FITS, f"org/pinned-here@{commit}")
    assert complete.returncode == 0 and shard.read_bytes() == contents[shard.name]
    with GatedStandin() as hub:
        verified = fetch(mirror, tmp_path, site, FITS, f"org/pinned-here@{commit}", HF_ENDPOINT=hub.url)
    assert verified.returncode == 0, verified.stderr
    assert hub.requests == []


def test_two_paths_of_one_content_are_fetched_at_once_each_whole(mirror, tmp_path, site):
    repo, contents = make_model(mirror, tmp_path, "org/twins")
    twin = "extra/tokenizer_config.json"  # the same content at another path: small files are got together
    (repo.path / "extra").mkdir()
    (repo.path / twin).write_bytes(contents["tokenizer_config.json"])
    contents[twin] = contents["tokenizer_config.json"]
    repo.commit()
    done = fetch(mirror, tmp_path, site, FITS, "org/twins")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "models" / "twins"
    for path, content in contents.items():
        assert (folder / path).read_bytes() == content
