"""Sparse attention (an `index_topk` indexer: DeepSeek V3.2, GLM-5 / GlmMoeDsa, HunYuan V4, DeepSeek V4):
vLLM 0.33.0 runs it only on FlashMLA sparse, FlashAttention MLA sparse and FlashInfer sparse backends, each
of compute capability 9.0, 10.0 or 12.0 (supports_compute_capability in v1/attention/backends/mla/
*sparse*.py and models/deepseek_v4/); platforms/cuda.py lists no other for a sparse model. Below 9.0 such
a model is refused whatever its layers; from 9.0 its layers are not proven (mla.py)."""
import reprlib

from patches.fitcheck.family import Family, Refusal

SPARSE_MIN_CC = 90


def config_refused_on(config, model: str, where: str, tensor_parallel: int, cc: int) -> Refusal | None:
    if not config.text.has("index_topk") or cc >= SPARSE_MIN_CC:
        return None
    return Refusal(
        f"{where}: sparse attention (index_topk {reprlib.repr(config.text.value('index_topk'))}, the DeepSeek V3.2 / "
        f"V4 indexer) needs compute capability {SPARSE_MIN_CC // 10}.0 in vLLM: its only sparse attention kernels "
        "are FlashMLA, FlashAttention and FlashInfer sparse, none of which runs below 9.0",
        f"serve it on a GPU of compute capability {SPARSE_MIN_CC // 10}.0 or newer (H100, ...), or pick a model "
        "without sparse attention (DeepSeek V3 / V3.1 on compute capability 8.0 or newer)")


FAMILY = Family(name="sparse", role="refusal", description="sparse attention", config_refused_on=config_refused_on,
                order=10)
