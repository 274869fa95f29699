"""bench/ceiling on safetensors files written here, against byte counts worked out by hand."""
import json
import struct
import subprocess
import sys

import pytest

from tooling import safetensors_ceiling as sc
from tests.support.model_files import write_tensors
from tests import REPO

CEILING = REPO / "bench" / "ceiling"

# A Gemma-4-like text stack, tiny: hidden 64, vocab 256, MLP 128, 2 layers,
# q 128 wide, k/v 32 wide, per-layer inputs 16 wide.
LM = "model.language_model"
LINEARS = {  # name: (out, in)
    "self_attn.q_proj": (128, 64), "self_attn.k_proj": (32, 64), "self_attn.v_proj": (32, 64),
    "self_attn.o_proj": (64, 128), "mlp.gate_proj": (128, 64), "mlp.up_proj": (128, 64),
    "mlp.down_proj": (64, 128),
}
LAYER_SMALL = {  # bf16 in every variant
    "input_layernorm.weight": [64], "post_attention_layernorm.weight": [64],
    "pre_feedforward_layernorm.weight": [64], "post_feedforward_layernorm.weight": [64],
    "per_layer_input_gate.weight": [16, 64], "per_layer_projection.weight": [64, 16],
    "post_per_layer_input_norm.weight": [64],
}
TOP = {
    f"{LM}.embed_tokens.weight": ("BF16", [256, 64]),
    f"{LM}.embed_tokens_per_layer.weight": ("BF16", [256, 32]),
    f"{LM}.per_layer_model_projection.weight": ("BF16", [32, 64]),
    f"{LM}.per_layer_projection_norm.weight": ("BF16", [16]),
    f"{LM}.norm.weight": ("BF16", [64]),
    "model.vision_tower.encoder.layers.0.self_attn.q_proj.weight": ("BF16", [32, 32]),
    "model.embed_vision.embedding_projection.weight": ("BF16", [64, 32]),
    "model.audio_tower.layers.0.feed_forward.weight": ("F32", [32, 32]),
    "model.embed_audio.embedding_projection.weight": ("BF16", [64, 32]),
}


def write_safetensors(path, tensors, truncate_by=0):
    return write_tensors(path, tensors, truncate_by=truncate_by, metadata={"format": "pt"})


def gemma_like(quantized=False, lm_head=False):
    tensors = dict(TOP)
    for i in range(2):
        pre = f"{LM}.layers.{i}"
        for name, (out, inp) in LINEARS.items():
            if quantized:  # compressed-tensors w4a16, group size 32: 8 nibbles per int32
                tensors[f"{pre}.{name}.weight_packed"] = ("I32", [out, inp // 8])
                tensors[f"{pre}.{name}.weight_scale"] = ("BF16", [out, inp // 32])
                tensors[f"{pre}.{name}.weight_shape"] = ("I64", [2])
            else:
                tensors[f"{pre}.{name}.weight"] = ("BF16", [out, inp])
        for name, shape in LAYER_SMALL.items():
            tensors[f"{pre}.{name}"] = ("BF16", shape)
    if lm_head:
        tensors["lm_head.weight"] = ("BF16", [256, 64])
    return tensors


# Hand computation, bf16 checkpoint (elements x 2 bytes):
#   per layer: linears 8192+2048+2048+8192+8192+8192+8192 = 45056 el
#              norms 4*64 = 256, per-layer gate 1024, projection 1024, norm 64 -> 47424 el = 94848 B
#   2 layers                                                  = 189696 B
#   other per-token: norm 64 + per_layer_model_projection 2048 + its norm 16 = 2128 el = 4256 B
#   output layer: tied embed_tokens 256*64 = 16384 el          = 32768 B
#   total                                                      = 226720 B
BF16_LAYERS, OTHER, OUTPUT = 189696, 4256, 32768
BF16_TOTAL = 226720
# Packed int4 (I32 [out, in/8] = out*in/2 bytes) + BF16 scales [out, in/32]:
#   packed per layer: q 4096, k 1024, v 1024, o 4096, gate 4096, up 4096, down 4096 = 22528 B
#   scales per layer: 512, 128, 128, 512, 512, 512, 512                            =  2816 B
#   bf16 small tensors per layer: 512 + 2048 + 2048 + 128                          =  4736 B
#   per layer 30080 B, 2 layers                                                     = 60160 B
#   + other 4256 + output 32768                                                     = 97184 B
#   weight_shape (I64[2] = 16 B x 7 x 2 = 224 B) is metadata, excluded by default
INT4_LAYERS, INT4_TOTAL = 60160, 97184
# Excluded by default in both: embed_tokens_per_layer 256*32*2 = 16384 B, vision 2048 + 4096,
#   audio 32*32*4 = 4096 + 4096 -> 30720 B (+ 224 B weight_shape in the int4 checkpoint)
EXCLUDED_BF16 = 30720


def run_cli(*args):
    return subprocess.run([sys.executable, str(CEILING), *map(str, args)], capture_output=True, text=True)


def test_bf16_checkpoint_matches_hand_count(tmp_path):
    report = sc.analyze_checkpoint(write_safetensors(tmp_path / "model.safetensors", gemma_like()))
    assert report.bytes_by_category[sc.DECODER_LAYERS] == BF16_LAYERS
    assert report.bytes_by_category[sc.OTHER_PER_TOKEN] == OTHER
    assert report.bytes_by_category[sc.OUTPUT_LAYER] == OUTPUT
    assert report.bytes_by_category[sc.EXCLUDED] == EXCLUDED_BF16
    assert report.tied_embedding is True
    assert report.bytes_per_token == BF16_TOTAL


def test_packed_int4_checkpoint_matches_hand_count(tmp_path):
    report = sc.analyze_checkpoint(write_safetensors(tmp_path / "m.safetensors", gemma_like(quantized=True)))
    assert report.bytes_by_category[sc.DECODER_LAYERS] == INT4_LAYERS
    assert report.bytes_per_token == INT4_TOTAL
    assert report.bytes_by_dtype == {"I32": 2 * 22528, "BF16": INT4_TOTAL - 2 * 22528}
    assert report.bytes_by_category[sc.EXCLUDED] == EXCLUDED_BF16 + 224


def test_cli_prints_ceiling_for_bandwidth(tmp_path):
    ckpt = write_safetensors(tmp_path / "m.safetensors", gemma_like())
    done = run_cli(ckpt, "--bandwidth", 277)
    assert done.returncode == 0, done.stderr
    assert f"bytes per decode token: {BF16_TOTAL} " in done.stdout
    assert f"ceiling at 277 GB/s: {277e9 / BF16_TOTAL:.1f} tok/s" in done.stdout
    as_json = json.loads(run_cli(ckpt, "--bandwidth", 277, "--json").stdout)
    assert as_json["bytes_per_token"] == BF16_TOTAL
    assert as_json["ceiling_tok_s"] == pytest.approx(277e9 / BF16_TOTAL)


def test_untied_output_layer_counts_lm_head_not_the_lookup(tmp_path):
    report = sc.analyze_checkpoint(write_safetensors(tmp_path / "m.safetensors", gemma_like(lm_head=True)))
    assert report.tied_embedding is False
    assert report.bytes_by_category[sc.OUTPUT_LAYER] == 32768  # lm_head 256*64*2
    assert report.bytes_by_category[sc.EMBEDDING_LOOKUP] == 32768
    assert report.bytes_per_token == BF16_TOTAL


def test_sharded_folder_sums_every_file(tmp_path):
    tensors = list(gemma_like().items())
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", dict(tensors[: len(tensors) // 2]))
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", dict(tensors[len(tensors) // 2:]))
    (tmp_path / "config.json").write_text("{}")
    report = sc.analyze_checkpoint(tmp_path)
    assert len(report.files) == 2
    assert report.bytes_per_token == BF16_TOTAL


def test_exclusions_are_configurable(tmp_path):
    ckpt = write_safetensors(tmp_path / "m.safetensors", gemma_like())
    one_layer = json.loads(run_cli(ckpt, "--exclude", "*.layers.1.*", "--json").stdout)
    assert one_layer["bytes_per_token"] == BF16_TOTAL - 94848
    everything = json.loads(run_cli(ckpt, "--no-default-excludes", "--json").stdout)
    # per-layer embedding table and the vision/audio towers now count as well
    assert everything["bytes_per_token"] == BF16_TOTAL + EXCLUDED_BF16


def test_every_listed_dtype_is_sized(tmp_path):
    tensors = {f"model.language_model.layers.0.t_{d}": (d, [3, 5]) for d in ("BF16", "F16", "F32", "I8", "U8", "I32", "F8_E4M3")}
    report = sc.analyze_checkpoint(write_safetensors(tmp_path / "m.safetensors", tensors))
    # 15 elements each, at 2+2+4+1+1+4+1 = 15 bytes per element across the seven: 225
    assert report.bytes_per_token == 225


@pytest.mark.parametrize("content, expected", [
    (b"not a checkpoint at all", "header length"),
    (struct.pack("<Q", 5) + b"[1,2]", "expected a JSON object"),
    (b"abc", "expected a safetensors file"),
])
def test_bad_file_is_one_line_exit_2(tmp_path, content, expected):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(content)
    done = run_cli(bad)
    assert done.returncode == 2
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_truncated_download_is_refused(tmp_path):
    ckpt = write_safetensors(tmp_path / "m.safetensors", gemma_like(), truncate_by=10)
    done = run_cli(ckpt)
    assert done.returncode == 2 and "truncated" in done.stderr


def test_offsets_that_disagree_with_shape_are_refused(tmp_path):
    raw = json.dumps({"x.layers.0.w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 16]}}).encode()
    (tmp_path / "m.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(16))
    done = run_cli(tmp_path / "m.safetensors")
    assert done.returncode == 2 and "32 bytes but its data_offsets span 16" in done.stderr


def test_missing_path_and_empty_folder(tmp_path):
    assert run_cli(tmp_path / "nope").returncode == 2
    done = run_cli(tmp_path)
    assert done.returncode == 2 and "no *.safetensors" in done.stderr
