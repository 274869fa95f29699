"""The fp16 upcast on the GPU (patches/fp16_upcast): the Gemma 4 12B's vision embedder, lifted from the GPU
tier's staged vLLM (its gemma4_unified.py, unpatched and patched by the build's own placement;
tooling/fp16_upcast.py says why it is lifted), at the 12B's shapes (48x48x3 = 6,912-wide patches, 3,840
outputs) with high-contrast patches and weights that take the fp32 reduction past fp16's 65,504.

Unpatched fp16 gives NaN (the test sees the bug); patched fp16 is finite and within tolerance of fp32;
under bf16 the patched file computes the very same tensor as vLLM's own."""
from __future__ import annotations

import pytest

from tooling.fp16_upcast import FP16_MAX, PATCH_DIM, prove

# Patched fp16 against fp32 on the same fp16-rounded weights: the upcast leaves patch_ln1, the position
# embedding and pos_norm in fp16, whose outputs (LayerNorm-scaled, of order 1) round at about 1e-3.
MAX_ABS_ERROR = 2e-2
MEAN_ABS_ERROR = 2e-3


@pytest.fixture(scope="module")
def proof(vllm_site, figures):
    from patches.fp16_upcast.placement import TARGET_IN_PACKAGE

    source = (vllm_site / "vllm" / TARGET_IN_PACKAGE).read_text(encoding="utf-8")
    found = prove(source, "cuda", patches=256)
    figures["fp16_upcast"] = found.to_dict()
    print(f"\nfp16 upcast proof: {found.to_dict()}")
    return found


def test_the_inputs_take_the_reduction_past_fp16s_range(proof):
    assert PATCH_DIM == 6912
    assert proof.reduction_max > FP16_MAX, proof


def test_unpatched_fp16_gives_nan(proof):
    assert proof.unpatched_nan > 0, f"the unpatched embedder gave no NaN: the test does not see the bug ({proof})"


def test_patched_fp16_is_finite_and_within_tolerance_of_fp32(proof):
    print(f"patched fp16 vs fp32: max abs {proof.max_abs_error:.4g}, max rel {proof.max_rel_error:.4g}, "
          f"mean abs {proof.mean_abs_error:.4g}")
    assert proof.patched_finite, proof
    assert proof.max_abs_error <= MAX_ABS_ERROR and proof.mean_abs_error <= MEAN_ABS_ERROR, proof


def test_bf16_is_untouched(proof):
    assert proof.bf16_identical, proof
