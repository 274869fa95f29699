"""The code the fp16 upcast inserts into vLLM's model_executor/models/gemma4_unified.py.

Everything between the two marker lines is copied verbatim before the class Gemma4UnifiedVisionEmbedder
by patches/fp16_upcast (placement.py); this module exists so that the very same text can be imported
and tested without vLLM. Names start with `_vllm_turing_` so that they cannot collide with vLLM's own.
"""
# >>> vllm-turing fp16: the 12B vision embedder's patch_dense and patch_ln2 in fp32 under fp16 (patches/fp16_upcast)
_VLLM_TURING_FP16_VERSION = 1


def _vllm_turing_fp16_upcast(embedder):
    """True when the embedder runs in fp16 (its pos_embedding holds the engine dtype) and patch_dense's
    weight is unquantized (vLLM's UnquantizedLinearMethod): then patch_dense and patch_ln2 run in fp32.
    Under bf16 or fp32, and for a quantized patch_dense (its kernel takes fp16 input only), vLLM's own
    two lines run unchanged."""
    import torch

    method = getattr(embedder.patch_dense, "quant_method", None)
    return (embedder.pos_embedding.dtype == torch.float16
            and (method is None or type(method).__name__ == "UnquantizedLinearMethod"))


def _vllm_turing_fp16_dense_norm(embedder, hidden_states):
    """patch_dense then patch_ln2 in fp32, cast back to hidden_states' dtype after the norm. A
    6,912-wide reduction over a high-contrast 48x48x3 patch leaves fp16's range (65,504), and the
    LayerNorm turns that inf into NaN. patch_dense is a ColumnParallelLinear: each rank holds its
    output columns, so its fp32 product is gathered across the ranks as the layer's own forward does
    (gather_output), and its bias is added unless the layer hands it back (skip_bias_add)."""
    import torch.nn.functional as F

    dense, norm = embedder.patch_dense, embedder.patch_ln2
    bias = None if dense.bias is None or getattr(dense, "skip_bias_add", False) else dense.bias.float()
    out = F.linear(hidden_states.float(), dense.weight.float(), bias)
    if getattr(dense, "gather_output", False) and getattr(dense, "tp_size", 1) > 1:
        from vllm.distributed import tensor_model_parallel_all_gather

        out = tensor_model_parallel_all_gather(out)
    weight = None if norm.weight is None else norm.weight.float()
    shift = None if norm.bias is None else norm.bias.float()
    out = F.layer_norm(out, norm.normalized_shape, weight, shift, norm.eps)
    return out.to(hidden_states.dtype)
# <<< vllm-turing fp16
