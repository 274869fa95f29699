"""config.json -> attention shapes: Gemma 4 configs written by transformers' own classes (both the
per_layer_config and the older form), hand-written configs of other shapes; bad files exit 2
before vLLM loads."""
from contract.model_config import ConfigProblem, parse_config
import json
import subprocess
import sys

import pytest

from patches.fitcheck.attention import run_dtype
from patches.fitcheck.families.gemma4 import BUILTIN_MODELS
from patches.fitcheck.families import attention_layers, load_model_config
from tests.support import gemma4_configs
from tests import REPO

PATTERN = ["sliding_attention"] * 4 + ["full_attention"]


def write(tmp_path, name, content):
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def by_layer(shapes):
    return {s.layer: s for s in shapes}


def test_e2b_like_flat_config(tmp_path):
    path = write(tmp_path, "gemma-4-E2B-it", {
        "model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 1,
        "head_dim": 256, "global_head_dim": 512, "sliding_window": 512, "layer_types": PATTERN * 7,
    })
    layers = by_layer(load_model_config(path))
    assert set(layers) == {"sliding", "global"}
    assert (layers["sliding"].head_size, layers["sliding"].sliding_window) == (256, 512)
    assert (layers["global"].head_size, layers["global"].sliding_window) == (512, None)
    assert layers["global"].num_kv_heads == 1 and layers["global"].num_query_heads == 8
    assert layers["sliding"].model == "gemma-4-E2B-it"
    # One KV page size for both kinds: the narrower layer gets the larger block.
    assert layers["sliding"].block_size == 2 * layers["global"].block_size


@pytest.mark.parametrize("form", gemma4_configs.FORMS)
@pytest.mark.parametrize("variant", sorted(gemma4_configs.VARIANTS))
def test_each_builtin_model_is_what_transformers_classes_make_of_it(variant, form):
    config = gemma4_configs.config_dict(variant, form)
    assert ("per_layer_config" in config["text_config"]) == (form == "per_layer_config")
    assert attention_layers(parse_config(config, "transformers"), variant, "transformers") == BUILTIN_MODELS[variant]


def test_the_old_form_is_the_same_config_to_transformers():
    import transformers

    for variant, (unified, _) in gemma4_configs.VARIANTS.items():
        text = gemma4_configs.config_dict(variant, "old")["text_config"]
        cls = transformers.Gemma4UnifiedTextConfig if unified else transformers.Gemma4TextConfig
        reread = json.loads(json.dumps(cls(**text).to_dict()))
        assert reread["per_layer_config"] == gemma4_configs.config_dict(variant)["text_config"]["per_layer_config"]


@pytest.mark.parametrize("form", gemma4_configs.FORMS)
def test_12b_saved_by_save_pretrained_has_one_global_kv_head_at_width_512(tmp_path, form):
    path = gemma4_configs.save_model_dir("gemma4-12b", tmp_path / "gemma-4-12B-it", form)
    layers = by_layer(load_model_config(path))
    assert (layers["sliding"].num_query_heads, layers["sliding"].num_kv_heads) == (16, 8)
    assert (layers["global"].num_query_heads, layers["global"].num_kv_heads, layers["global"].head_size) == (16, 1, 512)
    assert layers["sliding"].sliding_window == 1024 and layers["global"].model == "gemma-4-12B-it"


def test_per_layer_overrides_that_differ_make_kinds_of_their_own():
    text = {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128, "sliding_window": 256,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            "per_layer_config": {"1": {"head_dim": 256}, "3": {"head_dim": 256, "num_key_value_heads": 2}}}
    shapes = attention_layers(parse_config({"text_config": text}, "config.json"), "m", "config.json")
    assert [(s.layer, s.num_kv_heads, s.head_size, s.sliding_window) for s in shapes] == [
        ("sliding", 4, 128, 256), ("global", 4, 256, None), ("global-2", 2, 256, None)]


def test_global_kv_heads_ignored_without_k_eq_v(tmp_path):
    path = write(tmp_path, "m", {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 4,
                                 "num_global_key_value_heads": 1, "attention_k_eq_v": False,
                                 "sliding_window": 512, "layer_types": PATTERN, "head_dim": 256})
    assert by_layer(load_model_config(path))["global"].num_kv_heads == 4


def test_model_without_global_layers(tmp_path):
    path = write(tmp_path, "all-sliding", {"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
                                           "sliding_window": 4096, "layer_types": ["sliding_attention"] * 12})
    shapes = load_model_config(path)
    assert [(s.layer, s.head_size, s.sliding_window) for s in shapes] == [("sliding", 256, 4096)]


def test_plain_full_attention_model_derives_head_dim(tmp_path):
    path = write(tmp_path, "llama-like", {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096})
    shapes = load_model_config(path)
    assert [(s.layer, s.head_size, s.num_kv_heads) for s in shapes] == [("global", 128, 8)]


@pytest.mark.parametrize("content, says", [
    ('{"num_attention_heads": 8,', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({"num_key_value_heads": 2}, "'num_attention_heads' is not set"),
    ({"num_attention_heads": 8, "num_key_value_heads": 3, "head_dim": 64}, "not a multiple"),
    ({"num_attention_heads": 8, "head_dim": 64, "layer_types": ["sliding_attention"]}, "without 'sliding_window'"),
    ({"num_attention_heads": 8, "head_dim": 64, "layer_types": ["chunked"]}, "'layer_types'"),
    ({"text_config": "gemma", "num_attention_heads": 8}, "'text_config'"),
    ({"num_attention_heads": 8, "head_dim": 64, "per_layer_config": [1]}, "'per_layer_config' is a list"),
    ({"num_attention_heads": 8, "head_dim": 64, "per_layer_config": {"7": {}}}, "layer index below 1"),
    ({"num_attention_heads": 8, "head_dim": 64, "per_layer_config": {"0": {"head_dim": 0}}}, "'per_layer_config.0.head_dim' is the number 0"),
])
def test_malformed_configs_are_refused_in_one_line(tmp_path, content, says):
    path = write(tmp_path, "bad", content)
    with pytest.raises(ConfigProblem) as raised:
        load_model_config(path)
    assert says in str(raised.value) and str(path) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_cli_exits_2_on_a_malformed_config_without_traceback(tmp_path):
    path = write(tmp_path, "bad", '{"num_attention_heads": 8,')
    done = subprocess.run([sys.executable, "-m", "patches.fitcheck", "--device", "sm75", "--model-config", str(path)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not valid JSON" in done.stderr and "Traceback" not in done.stderr


def test_cli_exits_2_on_a_missing_config(tmp_path):
    done = subprocess.run([sys.executable, "-m", "patches.fitcheck", "--model-config", str(tmp_path / "nope.json")],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("config, cc, setting, expected", [
    ({"dtype": "bfloat16"}, 75, "auto", "float16"),  # Turing: vLLM casts a bf16 checkpoint to fp16
    ({"dtype": "bfloat16"}, 86, "auto", "bfloat16"),  # Ampere runs it as it is
    ({"torch_dtype": "float16"}, 86, "auto", "float16"),  # the name transformers wrote before 5.0
    ({"text_config": {"dtype": "float16"}}, 86, "auto", "float16"),
    ({"dtype": "float32"}, 86, "auto", "bfloat16"),  # vLLM downcasts fp32 to the device's preferred dtype
    ({}, 86, "auto", "bfloat16"),
    (None, 86, "auto", "bfloat16"),
    ({"dtype": "bfloat16"}, 86, "float16", "float16"),  # DTYPE wins
    ({"dtype": "bfloat16"}, 86, "half", "float16"),
    ({"dtype": "bfloat16"}, 75, "float32", "float32"),
])
def test_the_run_dtype_is_what_vllm_runs_the_model_in_on_the_device(config, cc, setting, expected):
    assert run_dtype(None if config is None else parse_config(config), cc, setting) == expected
