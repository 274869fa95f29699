"""The fetch's pure parts: its words parsed into a typed request (any words: a request or one line
naming the word), the files it takes first, and the judgment refusing before the weights."""
import hashlib
import json
import os

import pytest
from hypothesis import example, given, strategies as st

from contract.devices import TURING
from entrypoint.checks import disk, memory
from entrypoint.fetch import judge, listing, verify
from door.problem import Problem, UsageError
from entrypoint.fetch.request import Request, parse_model_ref, parse_request
from contract import layout
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS
from tests.unit.test_fitcheck_lookup import installed, written_table  # noqa: F401 (a fixture)

WORDS = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["--gpu", "--name", "--models-dir", "sm75",
                                                                   "org/m@main", "org/m", "-x", "=", "@"])),
                 max_size=6)


@given(WORDS)
@example(["org/m", "--gpu"])
@example(["org/m", "--name=.."])
@example(["org/m@"])
@example([])
@example([""])
def test_any_words_are_a_request_or_one_line_naming_the_word(words):
    try:
        request = parse_request(words)
    except UsageError as usage:
        line = str(usage)
        assert "\n" not in line and line.isprintable()
        assert any(name in line for name in ("REPO", "REVISION", "--gpu", "--name", "--models-dir", "fetch"))
        return
    except Problem as nothing:  # nothing to fetch: exit 0
        assert nothing.exit_code == 0 and not [word for word in words if not word.startswith("-")]
        return
    assert isinstance(request, Request)
    assert request.target.startswith(request.models_dir) and ".." not in request.target.split("/")


SETTING_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["org/m", "org/m@v1", "/models/m", "/models/", "/", "sm75",
                                                                 "t4", "models/m", "org/m@"]))


@given(st.fixed_dictionaries({}, optional={"FETCH_MODEL": SETTING_TEXT, "FETCH_GPU": SETTING_TEXT,
                                           "MODEL": SETTING_TEXT}))
@example({"FETCH_MODEL": "org/m", "MODEL": "/"})
@example({"FETCH_MODEL": "org/m", "MODEL": "/models/.."})
def test_the_units_settings_are_a_request_or_one_line_naming_the_setting(env):
    try:
        request = parse_request([], env)
    except UsageError as usage:
        line = str(usage)
        assert "\n" not in line and line.isprintable()
        assert any(name in line for name in ("FETCH_MODEL", "FETCH_GPU", "MODEL"))
        return
    except Problem as nothing:  # nothing to fetch: exit 0
        assert nothing.exit_code == 0 and not env.get("FETCH_MODEL", "").strip()
        return
    assert ".." not in request.target.split("/") and request.target.startswith("/")


def test_the_units_fetch_goes_into_the_folder_model_names():
    request = parse_request([], {"FETCH_MODEL": "org/repo@v2", "FETCH_GPU": "sm75", "MODEL": "/models/served"})
    assert (request.repo, request.revision, request.gpu, request.target) == ("org/repo", "v2", "sm75", "/models/served")


@pytest.mark.parametrize("text, expected", [("org/m", ("org/m", "main")), ("m@v1.0", ("m", "v1.0")),
                                            ("org/m@" + "a" * 40, ("org/m", "a" * 40))])
def test_a_model_reference_is_a_repository_and_a_revision(text, expected):
    assert parse_model_ref(text) == expected


def hub_file(path, size=10, sha256=None):
    return listing.HubFile(path, size, sha256, "0" * 40)


def test_the_small_files_are_everything_but_weights_training_files_and_hidden_ones():
    files = [hub_file(name) for name in ("config.json", "tokenizer.json", "model.safetensors.index.json",
                                         "model-1.safetensors", "pytorch_model.bin", "training_args.bin",
                                         ".gitattributes", "original/consolidated.pth")]
    files.append(hub_file("huge.json", listing.SMALL_FILE_CAP + 1))
    assert [file.path for file in listing.small_files(files)] == ["config.json", "tokenizer.json",
                                                                  "model.safetensors.index.json"]


def test_a_file_of_the_right_size_but_another_content_is_named(tmp_path):
    path = tmp_path / "w"
    path.write_bytes(b"abc")
    expected = hub_file("w", 3, "0" * 64)
    assert verify.file_problem(str(path), expected, check_hash=False) is None
    assert "SHA-256" in verify.file_problem(str(path), expected) and "w:" in verify.file_problem(str(path), expected)
    assert "is 3 bytes" in verify.file_problem(str(path), hub_file("w", 4, "0" * 64))


def model_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BUILTIN_CONFIGS["gemma4-e2b"]))
    return folder


@pytest.fixture
def fits(tmp_path, monkeypatch, installed):  # noqa: F811
    """The fit table's verdict: every launch of the model fits sm_75 (so only the check under test fails)."""
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(written_table(tmp_path, {"sliding": 40000, "global": 61440})))


def judged(folder, weight_bytes, missing_bytes, meminfo):
    """The judgment of one shard of `weight_bytes` (`missing_bytes` of it not yet on disk, as a second
    shard's index-less name so both load) beside config.json."""
    sizes = {"config.json": 10, "model-1.safetensors": weight_bytes, "model-2.safetensors": missing_bytes}
    return judge.judge(str(folder), sizes, {"model-2.safetensors"}, TURING, meminfo, lambda method: None)


def test_weights_larger_than_the_free_disk_are_refused_by_the_disk_check(tmp_path, fits):
    vfs = os.statvfs(tmp_path)
    free = vfs.f_bavail * vfs.f_frsize
    plenty = f"MemAvailable: {16 * free // 1024} kB\n"  # RAM to stage them, whatever the disk holds
    results, loaded = judged(model_folder(tmp_path), 1, 4 * free, plenty)
    refusal = judge.refusal(results)
    assert loaded == ["model-1.safetensors", "model-2.safetensors"]
    assert refusal.name == disk.NAME and judge.MODELS_FOLDER in refusal.message and refusal.fix


def test_weights_beyond_ram_and_swap_are_refused_by_the_memory_check(tmp_path, fits):
    results, _ = judged(model_folder(tmp_path), 64 * 2**30, 0, "MemAvailable: 1048576 kB\nSwapFree: 0 kB\n")
    assert judge.refusal(results).name == memory.NAME


def test_strays_are_the_local_weight_files_the_commit_does_not_list():
    files = [hub_file("model.safetensors"), hub_file("config.json")]
    local = ["model.safetensors", "config.json", "notes.txt", "old.safetensors", "sub/pytorch_model.bin"]
    assert listing.strays(local, files) == ["old.safetensors", "sub/pytorch_model.bin"]


def test_only_the_weights_vllm_loads_count_against_memory(tmp_path, fits):
    """A repository with both safetensors and a PyTorch copy: the .bin is not loaded, so not staged."""
    sizes = {"config.json": 10, "model.safetensors": 1, "pytorch_model.bin": 64 * 2**40}
    results, loaded = judge.judge(str(model_folder(tmp_path)), sizes, set(), TURING,
                                  "MemAvailable: 100000000 kB\n", lambda method: None)
    assert loaded == ["model.safetensors"] and judge.refusal(results) is None


@given(st.binary(max_size=300), st.binary(max_size=300), st.booleans())
@example(b"weights", b"weights", True)
@example(b"weights", b"weights", False)
@example(b"weights", b"weighty", True)
def test_a_file_passes_verification_only_when_its_bytes_are_the_hubs(tmp_path_factory, local, hub, lfs):
    path = tmp_path_factory.mktemp("verify") / "f"
    path.write_bytes(local)
    expected = listing.HubFile("f", len(hub), hashlib.sha256(hub).hexdigest() if lfs else None,
                               hashlib.sha1(b"blob %d\0" % len(hub) + hub).hexdigest())
    problem = verify.file_problem(str(path), expected)
    assert (problem is None) == (local == hub)
    assert problem is None or (problem.startswith("f") and "\n" not in problem)


@pytest.mark.parametrize("quantization, status", [(None, "pass"), ({"quant_method": "compressed-tensors"}, "fail"),
                                                  ({"quant_method": "awq"}, "warn")])
def test_a_drafter_is_judged_by_the_preflights_drafter_check_before_its_weights(tmp_path, fits, quantization,
                                                                                status):
    folder = model_folder(tmp_path)
    if quantization:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "quantization_config": quantization}))
    results, _ = judge.judge(str(folder), {"config.json": 10, "model.safetensors": 1}, set(), TURING,
                             "MemAvailable: 100000000 kB\n", lambda method: 75, drafter=True)
    assert {result.name: result.status.value for result in results}["drafter"] == status


def test_the_drafter_flag_is_typed_once():
    assert parse_request(["org/d", "--drafter"]).drafter and not parse_request(["org/d"]).drafter


def test_a_named_card_is_its_device_and_its_memory_from_the_one_table():
    from contract.devices import CARDS, DEVICES

    request = parse_request(["org/m", "--gpu", "t4"])
    assert request.device == DEVICES["sm75"] and request.gpu_memory == CARDS["t4"].memory
    assert parse_request(["org/m", "--gpu", "sm75"]).gpu_memory is None
    assert all(card.device in DEVICES for card in CARDS.values())


def test_weights_that_leave_no_kv_cache_on_the_named_card_are_refused_and_a_small_model_passes():
    from contract.devices import CARDS
    from contract.verdict import Status

    t4 = CARDS["t4"].memory
    refused = memory.judge_card_memory(15 * 2**30, "t4", t4)
    assert refused.status is Status.FAIL and "t4" in refused.message and "TENSOR_PARALLEL_SIZE" in refused.fix
    assert memory.judge_card_memory(15 * 2**30, "t4", t4, cards=2).status is Status.PASS
    assert memory.judge_card_memory(2**30, "t4", t4).status is Status.PASS
