"""The model check reads the fetch manifest beside the mounted model: it names the repository and
commit, finds a file missing or of another size by its size alone, hashes every byte only when
VERIFY_HASHES_SECONDS asks (within that time), and a Hub id given as MODEL is pointed to `fetch`."""
import hashlib
import json
import time

from hypothesis import example, given, strategies as st

from contract.verdict import Status
from entrypoint import preflight
from entrypoint.checks import fetched, model
from entrypoint.fetch import manifest, verify
from entrypoint.fetch.listing import HubFile
from entrypoint.settings import parse_settings
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS
from tests.support.model_files import write_tensors
from door.problem import Problem

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "org/fetched"


def hub_file(folder, path: str) -> HubFile:
    content = (folder / path).read_bytes()
    lfs = path.endswith(".safetensors")
    return HubFile(path, len(content), hashlib.sha256(content).hexdigest() if lfs else None,
                   hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest())


def fetched_folder(tmp_path):
    folder = tmp_path / "fetched"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BUILTIN_CONFIGS["gemma4-e2b"]))
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 8192}\n')
    write_tensors(folder / "model.safetensors", {"w": ("F16", [4096])})
    listed = [hub_file(folder, name) for name in ("config.json", "tokenizer_config.json", "model.safetensors")]
    manifest.write(str(folder), manifest.document(REPO, "main", COMMIT, listed, [], "2026-01-01T00:00:00+00:00",
                                                  "sm75"))
    return folder


def checked(folder, hash_seconds=None):
    resolved = model.resolve(model.MODEL, "MODEL", str(folder), str(folder / "no-hub"), True)
    return fetched.check_fetched(model.check_model(resolved), resolved, hash_seconds)


def flip_last_byte(path):
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_a_fetched_model_is_named_by_its_repository_and_commit(tmp_path):
    result = checked(fetched_folder(tmp_path))
    assert result.status is Status.PASS
    assert f"{REPO}@{COMMIT[:12]}" in result.message and "3 files of the manifest's sizes" in result.message


def test_a_file_of_another_size_fails_naming_it_and_the_commit_to_fetch_again(tmp_path):
    folder = fetched_folder(tmp_path)
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 4096, "more": 1}\n')
    result = checked(folder)
    assert result.status is Status.FAIL and "tokenizer_config.json is" in result.message
    assert f"fetch {REPO}@{COMMIT}" in result.fix


def test_a_missing_file_fails_naming_it(tmp_path):
    folder = fetched_folder(tmp_path)
    (folder / "tokenizer_config.json").unlink()
    result = checked(folder)
    assert result.status is Status.FAIL and "tokenizer_config.json is missing" in result.message


def test_without_the_setting_only_sizes_are_read_and_with_it_a_flipped_byte_fails(tmp_path):
    folder = fetched_folder(tmp_path)
    flip_last_byte(folder / "model.safetensors")
    assert checked(folder).status is Status.PASS  # same size: the stat-only check cannot see it
    result = checked(folder, hash_seconds=60)
    assert result.status is Status.FAIL and "model.safetensors: SHA-256" in result.message


def test_hashing_that_runs_out_of_its_time_warns_with_how_far_it_got(tmp_path, monkeypatch):
    folder = fetched_folder(tmp_path)
    ticks = iter(range(0, 10**6, 100))  # each reading of the clock 100 s after the last
    monkeypatch.setattr(time, "monotonic", lambda: next(ticks))
    result = checked(folder, hash_seconds=5)
    assert result.status is Status.WARN
    assert "the hashes of 0 of them verified" in result.message and "VERIFY_HASHES_SECONDS=5" in result.message


def test_a_deadline_already_past_stops_the_hash(tmp_path):
    folder = fetched_folder(tmp_path)
    listed = hub_file(folder, "model.safetensors")
    try:
        verify.file_problem(str(folder / "model.safetensors"), listed, deadline=time.monotonic() - 1)
    except Problem as unfinished:
        assert str(unfinished) == "model.safetensors"
    else:
        raise AssertionError("the hash ran past its deadline")


def test_a_weight_file_the_manifest_does_not_list_fails(tmp_path):
    folder = fetched_folder(tmp_path)
    doc = json.loads((folder / manifest.NAME).read_text())
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    (folder / "model.safetensors").symlink_to(folder / "model-00001-of-00002.safetensors")
    (folder / manifest.NAME).write_text(json.dumps(doc))
    result = checked(folder)
    assert result.status is Status.FAIL and "model-00001-of-00002.safetensors" in result.message


def test_an_unreadable_manifest_warns_naming_it(tmp_path):
    folder = fetched_folder(tmp_path)
    (folder / manifest.NAME).write_text('{"version": 1, "repo": "x"}')
    result = checked(folder)
    assert result.status is Status.WARN and manifest.NAME in result.message


def test_the_setting_without_a_manifest_warns(tmp_path):
    folder = fetched_folder(tmp_path)
    (folder / manifest.NAME).unlink()
    result = checked(folder, hash_seconds=60)
    assert result.status is Status.WARN and "VERIFY_HASHES_SECONDS" in result.message


def test_the_preflight_hashes_in_the_background_when_the_setting_asks(tmp_path):
    folder = fetched_folder(tmp_path)
    flip_last_byte(folder / "model.safetensors")
    settings = parse_settings({"MODEL": str(folder), "VERIFY_HASHES_SECONDS": "60", "HF_HUB_OFFLINE": "1"})
    models = preflight.resolve_models(settings)
    check = preflight.model_check(models, settings, {})
    assert isinstance(check, preflight.Background)
    [result] = preflight.run_checks({"model": check}, ())
    assert result.status is Status.FAIL and "SHA-256" in result.message


def test_a_hub_id_as_model_is_pointed_to_fetch_unless_download_at_start_is_set(tmp_path):
    env = {"MODEL": "org/some-model", "HF_HUB_CACHE": str(tmp_path / "hub")}
    refused = preflight.resolve_models(parse_settings(env), env).model.problem
    assert refused.status is Status.FAIL and "fetch org/some-model" in refused.fix
    assert "MODEL=/models/some-model" in refused.fix and "DOWNLOAD_AT_START=true" in refused.fix
    allowed = model.resolve(model.MODEL, "MODEL", "org/some-model", str(tmp_path / "hub"), False,
                            download_allowed=True).problem
    assert allowed.status is Status.WARN and "DOWNLOAD_AT_START is set" in allowed.message


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=50),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                    max_leaves=20)


@given(JSON | st.fixed_dictionaries({"version": st.just(1), "repo": st.text(max_size=20), "commit": st.just(COMMIT),
                                     "files": st.lists(JSON, max_size=3)}))
@example({"version": 1, "repo": "a/b", "commit": COMMIT, "files": [{"path": "../x", "size": 1, "sha256": None,
                                                                    "blob_id": "0" * 40}]})
def test_any_json_is_a_manifest_or_a_refusal_naming_the_file(doc):
    try:
        found = manifest.parse(doc, "the-manifest")
    except Problem as problem:
        assert "the-manifest" in str(problem)
    else:
        assert all(".." not in file.path.split("/") and not file.path.startswith("/") for file in found.files)


def test_a_tokenizer_the_fetch_verified_is_not_parsed_again_and_a_torn_one_still_fails_by_its_size(tmp_path, monkeypatch):
    folder = tmp_path / "fetched"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BUILTIN_CONFIGS["gemma4-e2b"]))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {str(i): i for i in range(2000)}}}))
    write_tensors(folder / "model.safetensors", {"w": ("F16", [4096])})
    listed = [hub_file(folder, name) for name in ("config.json", "tokenizer.json", "model.safetensors")]
    manifest.write(str(folder), manifest.document(REPO, "main", COMMIT, listed, [], "2026-01-01T00:00:00+00:00", "sm75"))
    parsed = []
    monkeypatch.setattr(model, "_object_problem", lambda *args: parsed.append(args[0]))
    assert checked(folder).status is Status.PASS and parsed == []
    (folder / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes()[:-40])
    result = checked(folder)
    assert result.status is Status.FAIL and "tokenizer.json" in result.message and parsed == []
    (folder / manifest.NAME).unlink()
    checked(folder)
    assert parsed == [str(folder / "tokenizer.json")], "without a manifest the file is parsed"
