"""Model and drafter checks against real model directories: config.json and safetensors files
written by the tests, as a local directory and in the huggingface_hub cache layout."""
import pytest

from contract.verdict import Status
from door.problem import Problem
from entrypoint.checks.model import DRAFTER, MODEL, check_drafter, check_model, resolve, staged_bytes

from tests.support.model_files import write_hf_cache_model, write_model_dir

def model_result(model, hub, offline=False, download_allowed=False):
    return check_model(resolve(MODEL, "MODEL", model, hub, offline, download_allowed=download_allowed))


def drafter_result(drafter, hub, offline=True):
    return check_drafter(resolve(DRAFTER, "DRAFTER", drafter, hub, offline))


def weight_bytes(model, hub):
    return staged_bytes([resolve(MODEL, "MODEL", model, hub, False)])


COMPRESSED_TENSORS = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}}


def test_local_model_dir_passes_with_its_size(tmp_path):
    size = write_model_dir(tmp_path / "m", shards=3)
    result = model_result(str(tmp_path / "m"), str(tmp_path / "hub"), offline=False)
    assert result.status is Status.PASS and "3 safetensors" in result.message
    assert weight_bytes(str(tmp_path / "m"), str(tmp_path / "hub")) == size


def test_model_in_hf_cache_is_found_offline(tmp_path):
    snapshot = write_hf_cache_model(tmp_path / "hub", "google/gemma-4-E2B-it")
    result = model_result("google/gemma-4-E2B-it", str(tmp_path / "hub"), offline=True)
    assert result.status is Status.PASS and str(snapshot) in result.message
    assert weight_bytes("google/gemma-4-E2B-it", str(tmp_path / "hub")) == (snapshot / "model.safetensors").stat().st_size


def test_model_missing_from_hf_cache_is_pointed_to_fetch_and_warns_only_when_downloading_at_start(tmp_path):
    offline = model_result("google/gemma-4-E2B-it", str(tmp_path / "hub"), offline=True)
    assert offline.status is Status.FAIL and "fetch google/gemma-4-E2B-it" in offline.fix
    online = model_result("google/gemma-4-E2B-it", str(tmp_path / "hub"), offline=False)
    assert online.status is Status.FAIL and "fetch google/gemma-4-E2B-it" in online.fix
    allowed = model_result("google/gemma-4-E2B-it", str(tmp_path / "hub"), offline=False, download_allowed=True)
    assert allowed.status is Status.WARN


def test_missing_local_dir_fails_with_the_mount_fix(tmp_path):
    result = model_result(str(tmp_path / "absent"), str(tmp_path / "hub"), offline=False)
    assert result.status is Status.FAIL and "mount" in result.fix


def test_truncated_safetensors_fails(tmp_path):
    write_model_dir(tmp_path / "m", elements=100_000)
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    result = model_result(str(tmp_path / "m"), str(tmp_path / "hub"), offline=False)
    assert result.status is Status.FAIL and "truncated" in result.message
    assert weight_bytes(str(tmp_path / "m"), str(tmp_path / "hub")) is None


def test_shard_listed_in_index_but_absent_fails(tmp_path):
    write_model_dir(tmp_path / "m", shards=2)
    (tmp_path / "m" / "model-00002-of-00002.safetensors").unlink()
    result = model_result(str(tmp_path / "m"), str(tmp_path / "hub"), offline=False)
    assert result.status is Status.FAIL and "model-00002-of-00002.safetensors" in result.message


@pytest.mark.parametrize("breakage", ["no_config", "bad_config", "no_weights"])
def test_incomplete_model_dir_fails(tmp_path, breakage):
    write_model_dir(tmp_path / "m")
    if breakage == "no_config":
        (tmp_path / "m" / "config.json").unlink()
    elif breakage == "bad_config":
        (tmp_path / "m" / "config.json").write_text("{")
    else:
        (tmp_path / "m" / "model.safetensors").unlink()
    assert model_result(str(tmp_path / "m"), str(tmp_path / "hub"), offline=False).status is Status.FAIL


def test_bf16_drafter_passes_and_no_drafter_passes(tmp_path):
    write_model_dir(tmp_path / "drafter", config={"model_type": "gemma4_assistant", "torch_dtype": "bfloat16"})
    assert drafter_result(str(tmp_path / "drafter"), str(tmp_path / "hub")).status is Status.PASS
    assert check_drafter(None).status is Status.PASS


def test_compressed_tensors_drafter_is_refused_with_the_acceptance_explanation(tmp_path):
    write_model_dir(tmp_path / "drafter", config={"model_type": "gemma4_assistant",
                                                  "quantization_config": COMPRESSED_TENSORS})
    result = drafter_result(str(tmp_path / "drafter"), str(tmp_path / "hub"))
    assert result.status is Status.FAIL
    assert "acceptance stays at 1.00" in result.message and "bf16 drafter" in result.fix


def test_drafter_quantized_otherwise_is_a_warning(tmp_path):
    write_model_dir(tmp_path / "drafter", config={"model_type": "gemma4_assistant",
                                                  "quantization_config": {"quant_method": "fp8"}})
    result = drafter_result(str(tmp_path / "drafter"), str(tmp_path / "hub"))
    assert result.status is Status.WARN and "fp8" in result.message


def test_drafter_in_hf_cache_missing_offline_fails(tmp_path):
    result = drafter_result("google/gemma-4-12b-it-assistant", str(tmp_path / "hub"))
    assert result.status is Status.FAIL and "fetch google/gemma-4-12b-it-assistant --drafter" in result.fix


def test_a_model_is_read_once_and_its_checks_judge_that_reading(tmp_path):
    # Resolved once, then the files go: the model and memory checks still judge the first reading,
    # so no check reads config.json or a safetensors header a second time.
    size = write_model_dir(tmp_path / "m", shards=2)
    drafter_size = write_model_dir(tmp_path / "d", config={"model_type": "gemma4_assistant"})
    model = resolve(MODEL, "MODEL", str(tmp_path / "m"), str(tmp_path / "hub"), False)
    drafter = resolve(DRAFTER, "DRAFTER", str(tmp_path / "d"), str(tmp_path / "hub"), True)
    assert model.config_file == str(tmp_path / "m" / "config.json")
    for folder in ("m", "d"):
        for path in (tmp_path / folder).iterdir():
            path.unlink()
    assert check_model(model).status is Status.PASS and check_drafter(drafter).status is Status.PASS
    assert staged_bytes([model, drafter]) == size + drafter_size
    assert model.config_file is None  # the fit check's subprocess needs the file itself


def test_staged_bytes_are_unknown_when_one_model_is_not_readable(tmp_path):
    write_model_dir(tmp_path / "m")
    model = resolve(MODEL, "MODEL", str(tmp_path / "m"), str(tmp_path / "hub"), False)
    absent = resolve(DRAFTER, "DRAFTER", str(tmp_path / "absent"), str(tmp_path / "hub"), True)
    assert absent.problem.status is Status.FAIL and staged_bytes([model, absent]) is None


# MAX_MODEL_LEN against the limit vLLM 0.33.0 derives (config/model.py _get_and_verify_max_len)

def typed(config):
    from contract.model_config import parse_config
    return parse_config(config)


@pytest.mark.parametrize("variant", ["gemma4-e2b", "gemma4-12b"])
def test_a_real_gemma4_config_limits_max_model_len_from_its_text_config(variant):
    from contract.model_config import max_len_problem
    from tests.support.gemma4_configs import config_dict

    config = typed(config_dict(variant))
    limit = config_dict(variant)["text_config"]["max_position_embeddings"]
    assert max_len_problem(config, limit) is None and max_len_problem(config, None) is None
    message, fix = max_len_problem(config, limit + 1)
    assert f"MAX_MODEL_LEN={limit + 1}" in message and f"limit of {limit} tokens" in message
    assert f"set MAX_MODEL_LEN to {limit} or less" in fix


@pytest.mark.parametrize("rope, limit", [
    ({"rope_type": "linear", "factor": 4.0}, 16384),            # factor applied
    ({"type": "dynamic", "factor": 2}, 8192),                   # legacy "type" key, int factor
    ({"rope_type": "yarn", "factor": 4.0}, 4096),               # YaRN's limit is already scaled
    ({"rope_type": "llama3", "factor": 8.0}, 4096),
    ({"rope_type": "linear", "factor": None}, 4096),            # null factor: vLLM falls back to 1.0
    ({"rope_type": "default"}, 4096),
])
def test_rope_scaling_changes_the_limit_as_vllm_derives_it(rope, limit):
    from contract.model_config import derived_max_len

    config = typed({"model_type": "llama", "max_position_embeddings": 4096, "rope_scaling": rope})
    assert derived_max_len(config)[1] == limit


def test_the_smallest_limit_key_wins_and_model_max_length_overrides_it():
    from contract.model_config import derived_max_len, max_len_problem

    assert derived_max_len(typed({"max_position_embeddings": 4096, "seq_length": 2048})) == ("seq_length", 2048)
    assert derived_max_len(typed({"max_position_embeddings": 4096, "model_max_length": 8192}))[1] == 8192
    assert derived_max_len(typed({"model_type": "llama"})) is None
    assert max_len_problem(typed({"model_type": "llama"}), 10**6) is None  # vLLM takes MAX_MODEL_LEN then


def test_reads_refuse_what_is_not_a_regular_file_without_blocking(tmp_path):
    import os

    from door import files

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to("loop")
    for name, says in (("fifo", "named pipe"), ("loop", "cannot be read"), (".", "a directory")):
        with pytest.raises(Problem, match=says):
            files.read_bytes(str(tmp_path / name), name)
    (tmp_path / "big").touch()
    os.truncate(tmp_path / "big", 2**33)
    with pytest.raises(Problem, match="8589934592 bytes, more than the 4 MiB"):
        files.read_bytes(str(tmp_path / "big"), "big")


# per-stage vision encoders (lists of heads per stage); vLLM 0.33.0's model registry holds none of them
NOT_SERVED = {"clap_audio_model", "glpn", "levit", "lxmert", "pvt", "pvt_v2", "segformer"}


def test_no_config_transformers_writes_is_refused_but_for_vision_encoders_vllm_does_not_serve():
    # Every configuration class of the installed transformers, with its defaults, as a checkpoint's
    # config.json holds it: the typing refuses wrong shapes, never a real model's.
    import json
    import warnings

    import transformers
    from contract.model_config import ConfigProblem, derived_max_len, parse_config

    transformers.logging.set_verbosity_error()
    refused, read = set(), 0
    for model_type, config_class in transformers.CONFIG_MAPPING.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                written = json.loads(config_class().to_json_string())
        except Exception:  # a class that needs arguments: not a config any checkpoint holds as is
            continue
        read += 1
        try:
            derived_max_len(parse_config(written))
        except ConfigProblem:
            refused.add(model_type)
    assert read > 500 and refused <= NOT_SERVED, refused - NOT_SERVED


def test_bin_weights_are_counted_for_the_memory_check_and_unindexed_safetensors_are_not(tmp_path):
    # vLLM loads *.bin when a folder has no .safetensors, and only the indexed .safetensors when it has an index
    from tests.support.bad_model_folders import BIN_SHARDS, BY_NAME

    BY_NAME["bin-sharded"].build(tmp_path / "bin")
    sizes = sum((tmp_path / "bin" / name).stat().st_size for name in BIN_SHARDS)
    assert weight_bytes(str(tmp_path / "bin"), str(tmp_path / "hub")) == sizes > 0
    size = write_model_dir(tmp_path / "st", shards=2)
    (tmp_path / "st" / "consolidated-copy.bin").write_bytes(bytes(10_000))  # .bin beside .safetensors: not loaded
    (tmp_path / "st" / "stray.safetensors").write_bytes(bytes(10_000))     # not in the index: not loaded
    assert weight_bytes(str(tmp_path / "st"), str(tmp_path / "hub")) == size
