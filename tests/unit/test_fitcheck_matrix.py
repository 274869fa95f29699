"""Which calls the fit check makes per layer shape, and the built-in Gemma 4 classes."""
import dataclasses

from patches.fitcheck import DEVICES, FitOptions, UsageError, resolve_device
from patches.fitcheck.families.gemma4 import BUILTIN_MODELS
from patches.fitcheck.attention import ENCODER_KINDS, HYBRID_BLOCK_SIZE, HYBRID_LAUNCH_BLOCK_SIZES, LayerShape, MAX_3D_QUERY_LEN_UPSTREAM, PREFILL_QUERY_LEN, SPEC_QUERY_LENS, build_matrix, seq_threshold_3d
from patches.fitcheck.families import builtin_shapes

import pytest


def test_builtin_gemma4_classes_have_both_widths():
    assert set(BUILTIN_MODELS) == {"gemma4-e2b", "gemma4-e4b", "gemma4-12b", "gemma4-26b-a4b", "gemma4-31b"}
    for shapes in BUILTIN_MODELS.values():
        layers = {s.layer: s for s in shapes}
        assert layers["sliding"].head_size == 256 and layers["sliding"].sliding_window in (512, 1024)
        assert layers["global"].head_size == 512 and layers["global"].sliding_window is None
        for s in shapes:
            assert s.num_query_heads % s.num_kv_heads == 0


def test_matrix_covers_every_path_per_shape():
    shape = LayerShape("m", "global", 32, 4, 512, None)
    cases = build_matrix([shape], mm_prefix=True)
    kinds = [c.kind for c in cases]
    assert kinds.count("prefill") == kinds.count("decode") == kinds.count("mm-prefix") == 1
    assert sorted(c.query_len for c in cases if c.kind == "spec") == list(range(2, 9))
    assert [c.query_len for c in cases if c.kind == "decode"] == [1]
    prefill = next(c for c in cases if c.kind == "prefill")
    assert prefill.query_len > MAX_3D_QUERY_LEN_UPSTREAM == max(SPEC_QUERY_LENS)  # 2D, not split-K
    batch = next(c for c in cases if c.kind == "decode-batch")
    assert batch.num_seqs == seq_threshold_3d(shape.num_kv_heads) + 1 == 128 // 4 + 1  # over the 3D threshold
    assert [c.mm_prefix for c in cases].count(True) == 1


def test_the_12b_global_layers_16_to_1_decode_threshold_is_the_models_not_the_layers():
    # vLLM sizes its Triton backend by the whole model's KV heads (8, from the sliding layers):
    # the 16:1 global layer (one KV head, BLOCK_M 16, so BLOCK_Q 1) takes the 2D path above 16
    # sequences, not above 128 as its own KV head count would say.
    layers = {s.layer: s for s in BUILTIN_MODELS["gemma4-12b"]}
    glob = layers["global"]
    assert (glob.num_query_heads, glob.num_kv_heads, glob.head_size) == (16, 1, 512)
    assert glob.seq_threshold_3d == layers["sliding"].seq_threshold_3d == 128 // 8
    batch = next(c for c in build_matrix([glob], mm_prefix=False) if c.kind == "decode-batch")
    assert batch.num_seqs == 17
    # Every speculative length stays within the threshold with BLOCK_Q 1 (one query row per
    # KV head group), so those calls take the 3D path vLLM takes on this layer.
    block_q = 16 // (glob.num_query_heads // glob.num_kv_heads)
    assert block_q == 1 and max(SPEC_QUERY_LENS) // block_q <= glob.seq_threshold_3d


def test_matrix_without_mm_prefix_and_over_all_builtins():
    shapes = [s for s in builtin_shapes() if isinstance(s, LayerShape)]  # the mixers are not attention cases
    cases = build_matrix(builtin_shapes(), mm_prefix=False)
    assert not any(c.mm_prefix for c in cases)
    encoders = [s for s in shapes if s.attention in ENCODER_KINDS]
    hybrids = [s for s in shapes if s.block_size == HYBRID_BLOCK_SIZE]
    assert encoders and hybrids, "the built-in matrix holds encoder layers and hybrids' attention layers"
    # a decoder layer: prefill, decode, decode-batch and the speculative lengths (a hybrid's at each launch
    # block size); an encoder layer: one batch
    decoders = len(shapes) - len(encoders) + len(hybrids) * (len(HYBRID_LAUNCH_BLOCK_SIZES) - 1)
    assert len(cases) == decoders * (3 + len(SPEC_QUERY_LENS)) + len(encoders)
    assert [c.kind for c in cases if c.shape in encoders] == [s.attention for s in encoders]
    assert {c.shape for c in cases} == {s for s in shapes if s not in hybrids} | {
        dataclasses.replace(s, block_size=b) for s in hybrids for b in HYBRID_LAUNCH_BLOCK_SIZES}
    assert PREFILL_QUERY_LEN in {c.query_len for c in cases}


def test_device_presets_and_overrides():
    assert resolve_device(FitOptions("sm75")) == {"name": "sm75", "cc": 75, "limit": 65536}
    assert resolve_device(FitOptions("sm90"))["limit"] == DEVICES["sm90"][1] == 232448
    assert resolve_device(FitOptions(None, 89, 101376)) == {"name": "sm89", "cc": 89, "limit": 101376}
    with pytest.raises(UsageError):
        resolve_device(FitOptions(None, 75, None))
    with pytest.raises(UsageError):
        resolve_device(FitOptions("sm75", None, -1))
