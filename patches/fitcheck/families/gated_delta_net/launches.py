"""The Triton launches of one gated delta net layer (Qwen3-Next, Qwen3.5: vLLM 0.33.0's
QwenGatedDeltaNetAttention, model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py), made by vLLM's
real ops on CPU tensors with the fit check's recorder in place of each kernel (op_recording.py).

What the layer runs on a Turing or Ampere GPU (forward_cuda -> _forward_core), per case recorded:
  prefill      causal_conv1d_fn; fused_post_conv_prep (split, L2 norm of q and k, gating); FLA's
               chunk_gated_delta_rule on its Triton path (_resolve_gdn_prefill_backend picks FlashInfer
               only on sm_90 / sm_10x / sm_12x and CuteDSL only on sm_10x): chunk_local_cumsum,
               chunk_scaled_dot_kkt, solve_tril (64 x 64 merge), recompute_w_u, chunk_gated_delta_rule_fwd_h,
               chunk_fwd_o, all six @triton.autotune under @triton.heuristics
  mixed        a batch of decodes and a prefill: the decodes' state update, fused_sigmoid_gating_delta_rule_update
  decode       a decode-only batch: causal_conv1d_update and the packed recurrent update
               (VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE, on by default)
  spec-decode  with speculative decoding (MTP; opt-in): causal_conv1d_update over the draft tokens and
               fused_sigmoid_gating_delta_rule_update; the fused CUDA kernel that replaces them needs bf16
               and sm_80, so an fp16 model stays on these
  norm-eager   the gated RMS norm after the core (RMSNormGated.forward_cuda, FLA's layer_norm_fwd_kernel):
               a custom op only with --enforce-eager; compiled, vLLM runs forward_native through Inductor
Each autotuned kernel is recorded once per configuration of its list; the verdict is op_recording.judged's.

FLA decides some lists at import from the device: chunk_fwd_o's BK/BV and the vector cumsum's BS from
check_shared_mem() (opt-in shared memory >= 102,400 bytes: False on sm_75 at 65,536 and sm_86 at
101,376), chunk_fwd_o's warps from is_nvidia_hopper. A CPU host answers those as sm_75 and sm_86 do;
host_choices_differ says where it would not. The norm's ROWS_PER_BLOCK follows the device's SM count at
run time (at most 4, a power of two), so every value is recorded.
"""
from __future__ import annotations

import importlib
from types import SimpleNamespace

from door.problem import Problem
from patches.fitcheck.family import RecordedShape
from patches.fitcheck.op_recording import DTYPE_NAME, record_calls
from patches.fitcheck.recorder import Launch, prepare_cpu_host, simulated_device
from patches.fitcheck.swap_and_write import swapped

FLA_OPS = "vllm.third_party.flash_linear_attention.ops"
CONV_OPS = "vllm.model_executor.layers.mamba.ops.causal_conv1d"
LAYER_MODULE = "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn"

DECODE_BATCH = 4
DRAFT_TOKENS = 2  # speculative tokens per sequence in the spec-decode case
NORM_ROWS_PER_BLOCK = (1, 2, 4)  # every value layernorm_guard.calc_rows_per_block can return
CHUNK_SIZE = 64  # FLA_CHUNK_SIZE; the prefill is two chunks


def imported_ops(names: dict, what: str) -> dict:
    """vLLM's op modules by name (Problem when they do not import here), FLA's chunk size checked."""
    prepare_cpu_host()
    try:
        ops = {name: importlib.import_module(module) for name, module in names.items()}
        utils = importlib.import_module(f"{FLA_OPS}.utils")
    except Exception as error:  # the ops import vLLM's runtime
        raise Problem(f"cannot import vLLM's {what} ops ({type(error).__name__}: {error}); "
                       "run inside the vLLM image") from None
    if utils.FLA_CHUNK_SIZE != CHUNK_SIZE:
        raise Problem(f"FLA_CHUNK_SIZE is {utils.FLA_CHUNK_SIZE}, the check records two chunks of {CHUNK_SIZE}")
    return ops


def _ops() -> dict:
    names = {"conv": CONV_OPS}
    names.update({name: f"{FLA_OPS}.{name}" for name in (
        "utils", "index", "chunk", "cumsum", "chunk_scaled_dot_kkt", "solve_tril", "wy_fast", "chunk_delta_h",
        "chunk_o", "fused_gdn_prefill_post_conv", "fused_recurrent", "fused_sigmoid_gating", "layernorm_guard")})
    return imported_ops(names, "gated delta net")


def host_choices_differ(cc: int, limit: int) -> list[str]:
    """What FLA and vLLM decided on this host (at import, or per call from the platform) that a device
    of compute capability `cc` with `limit` bytes of opt-in shared memory decides otherwise: empty when
    the recorded launches are the device's."""
    ops = _ops()
    utils = ops["utils"]
    from vllm.platforms import current_platform

    on_hopper = cc >= 90
    choices = [  # (what, the device's answer, this host's)
        ("check_shared_mem() (chunk_fwd_o BK/BV, chunk_local_cumsum_vector BS)",
         limit >= utils.Backend.get_shared_memory("none"), utils.check_shared_mem()),
        ("is_nvidia_hopper (chunk_fwd_o warps)", on_hopper, utils.is_nvidia_hopper),
        # FLA_USE_TMA opts in on sm_90 only
        ("is_tma_supported (solve_tril)", on_hopper and utils.is_tma_supported, utils.is_tma_supported),
        ("is_arch_support_pdl() (causal conv launch_pdl)", on_hopper, bool(current_platform.is_arch_support_pdl())),
        ("is_device_capability_family(100) (packed decode BV)", cc // 10 == 10,
         bool(current_platform.is_cuda() and current_platform.is_device_capability_family(100)))]
    return [f"{what}: host {host}, device {device}" for what, device, host in choices if host != device]


def prefill_backend(shape: RecordedShape, cc: int, limit: int) -> str:
    """The chunked prefill backend vLLM's layer picks on a CUDA device of compute capability `cc`
    (its own _resolve_gdn_prefill_backend, default settings): "triton" is what this module records."""
    prepare_cpu_host()
    try:
        layer = importlib.import_module(LAYER_MODULE)
    except Exception as error:
        raise Problem(f"cannot import {LAYER_MODULE} ({type(error).__name__}: {error})") from None
    text = SimpleNamespace(linear_key_head_dim=shape.key_head_dim, linear_value_head_dim=shape.value_head_dim)
    config = SimpleNamespace(additional_config={}, model_config=SimpleNamespace(hf_text_config=text))
    with simulated_device(layer, cc, limit):
        return layer._resolve_gdn_prefill_backend(config)[1]


def _calls(shape: RecordedShape, ops: dict, dtype_name: str = DTYPE_NAME) -> list[tuple[str, int, int, tuple, object]]:
    """(kind, query_len, num_seqs, kernels, call) for each op the layer runs, called as
    QwenGatedDeltaNetAttention._forward_core calls it."""
    import torch

    dtype, state_dtype, int32 = getattr(torch, dtype_name), getattr(torch, shape.state_dtype), torch.int32
    key_heads, value_heads = shape.key_heads, shape.value_heads
    key_dim, value_dim = shape.key_head_dim, shape.value_head_dim
    dim, width = shape.conv_dim, shape.conv_width
    seqlen = 2 * CHUNK_SIZE
    cache_lines = 1 + DECODE_BATCH * (DRAFT_TOKENS + 1)  # line 0 is vLLM's null block
    weight = torch.empty(dim, 1, width, dtype=dtype).view(dim, width)  # ColumnParallelLinear's, unsqueezed
    A_log, dt_bias = torch.empty(value_heads, dtype=torch.float32), torch.empty(value_heads, dtype=dtype)
    recurrent_state = torch.empty(cache_lines, value_heads, value_dim, key_dim, dtype=state_dtype)

    def mixed_qkv(tokens):
        """The q, k, v projection the layer hands to the convolution: Qwen3.5 splits it off the qkvz
        projection (a view with the z columns beside it), Qwen3-Next concatenates it."""
        if shape.interleaved:
            return torch.empty(tokens, dim, dtype=dtype)
        return torch.empty(tokens, dim + shape.gate_dim, dtype=dtype)[:, :dim]

    def gates(tokens):
        return torch.empty(tokens, value_heads, dtype=dtype), torch.empty(tokens, value_heads, dtype=dtype)

    def conv_state(draft_tokens=0):
        # vLLM's default conv state layout "SD" (VLLM_SSM_CONV_STATE_LAYOUT unset): (state_len, dim) per
        # line, viewed as (dim, state_len)
        return torch.empty(cache_lines, width - 1 + draft_tokens, dim, dtype=dtype).transpose(-1, -2)

    def split_qkv(qkv):  # rearrange_mixed_qkv: contiguous (1, tokens, heads, dim) tensors
        tokens = qkv.shape[0]
        q, k, v = torch.split(qkv, [key_heads * key_dim, key_heads * key_dim, value_heads * value_dim], dim=-1)
        return (q.contiguous().view(1, tokens, -1, key_dim), k.contiguous().view(1, tokens, -1, key_dim),
                v.contiguous().view(1, tokens, -1, value_dim))

    def prefill():
        b, a = gates(seqlen)
        starts = torch.tensor([0, seqlen], dtype=int32)
        qkv = ops["conv"].causal_conv1d_fn(
            mixed_qkv(seqlen).transpose(0, 1), weight, None, activation="silu", conv_states=conv_state(),
            has_initial_state=torch.tensor([False]), cache_indices=torch.tensor([1], dtype=int32),
            query_start_loc=starts).transpose(0, 1)
        q, k, v, g, beta = ops["fused_gdn_prefill_post_conv"].fused_post_conv_prep(
            conv_output=qkv, a=a, b=b, A_log=A_log, dt_bias=dt_bias, num_k_heads=key_heads, head_k_dim=key_dim,
            head_v_dim=value_dim, apply_l2norm=True, output_g_exp=False)
        ops["chunk"].chunk_gated_delta_rule(
            q=q.unsqueeze(0), k=k.unsqueeze(0), v=v.unsqueeze(0), g=g.unsqueeze(0), beta=beta.unsqueeze(0),
            initial_state=recurrent_state[torch.tensor([1])], output_final_state=True, cu_seqlens=starts,
            chunk_indices=ops["index"].prepare_chunk_indices(starts, CHUNK_SIZE),
            chunk_offsets=ops["index"].prepare_chunk_offsets(starts, CHUNK_SIZE), use_qk_l2norm_in_kernel=False)

    def mixed():
        # the decode tokens peeled off a batch that also holds a prefill (split_non_spec)
        b, a = gates(DECODE_BATCH + seqlen)
        q, k, v = split_qkv(mixed_qkv(DECODE_BATCH))
        ops["fused_sigmoid_gating"].fused_sigmoid_gating_delta_rule_update(
            A_log=A_log, a=a[:DECODE_BATCH], b=b[:DECODE_BATCH], dt_bias=dt_bias, q=q, k=k, v=v,
            initial_state=recurrent_state, inplace_final_state=True,
            cu_seqlens=torch.arange(DECODE_BATCH + 1, dtype=int32),
            ssm_state_indices=torch.arange(1, DECODE_BATCH + 2, dtype=int32), use_qk_l2norm_in_kernel=True)

    def decode():
        b, a = gates(DECODE_BATCH)
        lines = torch.arange(1, DECODE_BATCH + 1, dtype=int32)
        qkv = ops["conv"].causal_conv1d_update(mixed_qkv(DECODE_BATCH), conv_state(), weight, None, "silu",
                                               conv_state_indices=lines, validate_data=False)
        ops["fused_recurrent"].fused_recurrent_gated_delta_rule_packed_decode(
            mixed_qkv=qkv, a=a, b=b, A_log=A_log, dt_bias=dt_bias, scale=key_dim**-0.5,
            initial_state=recurrent_state,
            out=torch.empty(DECODE_BATCH, value_heads, value_dim, dtype=dtype).unsqueeze(1),
            ssm_state_indices=lines, use_qk_l2norm_in_kernel=True)

    def spec_decode():
        per_seq = DRAFT_TOKENS + 1
        tokens = DECODE_BATCH * per_seq
        b, a = gates(tokens)
        lines = torch.arange(1, 1 + tokens, dtype=int32).view(DECODE_BATCH, per_seq)
        starts = torch.arange(DECODE_BATCH + 1, dtype=int32) * per_seq
        accepted = torch.ones(DECODE_BATCH, dtype=int32)
        qkv = ops["conv"].causal_conv1d_update(
            mixed_qkv(tokens), conv_state(DRAFT_TOKENS), weight, None, "silu", conv_state_indices=lines[:, 0],
            num_accepted_tokens=accepted, query_start_loc=starts, max_query_len=per_seq, validate_data=False)
        q, k, v = split_qkv(qkv)
        ops["fused_sigmoid_gating"].fused_sigmoid_gating_delta_rule_update(
            A_log=A_log, a=a, b=b, dt_bias=dt_bias, q=q, k=k, v=v, initial_state=recurrent_state,
            inplace_final_state=True, cu_seqlens=starts, ssm_state_indices=lines, num_accepted_tokens=accepted,
            use_qk_l2norm_in_kernel=True)

    def norm():
        layernorm_guard = ops["layernorm_guard"]
        rows = torch.empty(seqlen, value_heads, value_dim, dtype=dtype)
        for rows_per_block in NORM_ROWS_PER_BLOCK:
            with swapped(layernorm_guard, "calc_rows_per_block", lambda M, device, rows=rows_per_block: rows):
                layernorm_guard.rmsnorm_fn(rows, torch.empty(value_dim, dtype=dtype), None, z=torch.empty_like(rows),
                                           eps=1e-6, group_size=None, norm_before_gate=True, activation="silu")

    conv, fla = ops["conv"], ops
    chunked = ((fla["cumsum"], ("chunk_local_cumsum_scalar_kernel", "chunk_local_cumsum_vector_kernel")),
               (fla["chunk_scaled_dot_kkt"], ("chunk_scaled_dot_kkt_fwd_kernel",)),
               (fla["solve_tril"], ("solve_tril_16x16_kernel", "merge_16x16_to_32x32_inverse_kernel",
                                    "merge_16x16_to_64x64_inverse_kernel")),
               (fla["wy_fast"], ("recompute_w_u_fwd_kernel",)),
               (fla["chunk_delta_h"], ("chunk_gated_delta_rule_fwd_kernel_h_blockdim64",)),
               (fla["chunk_o"], ("chunk_fwd_kernel_o",)))
    sigmoid_gating = (fla["fused_sigmoid_gating"], ("fused_sigmoid_gating_delta_rule_update_kernel",))
    packed_decode = (fla["fused_recurrent"], ("fused_recurrent_gated_delta_rule_packed_decode_kernel",))
    return [
        ("prefill", seqlen, 1, ((conv, ("_causal_conv1d_fwd_kernel",)),
                                (fla["fused_gdn_prefill_post_conv"], ("_fused_post_conv_kernel",))) + chunked, prefill),
        ("mixed", 1, DECODE_BATCH, (sigmoid_gating,), mixed),
        ("decode", 1, DECODE_BATCH, ((conv, ("_causal_conv1d_update_kernel",)), packed_decode), decode),
        ("spec-decode", DRAFT_TOKENS + 1, DECODE_BATCH, ((conv, ("_causal_conv1d_update_kernel",)), sigmoid_gating),
         spec_decode),
        ("norm-eager", seqlen, 1, ((fla["layernorm_guard"]._LAYER_NORM_FWD_KERNEL, ("kernel",)),), norm),
    ]


def record_gdn(shape: RecordedShape, dtype: str = DTYPE_NAME) -> list[Launch]:
    """Every launch one gated delta net layer's ops make (autotuned kernels: one per configuration)."""
    ops = _ops()
    from vllm.utils import torch_utils

    # FLA's prepare_chunk_indices stages its host tensor in pinned memory (torch_utils.async_tensor_h2d,
    # PIN_MEMORY), which needs a CUDA driver; a CPU host stages it in plain memory, the values unchanged
    with swapped(torch_utils, "PIN_MEMORY", False):
        launches = record_calls(shape, _calls(shape, ops, dtype), lambda kind, error: Problem(
            f"vLLM's {kind} ops of the gated delta net failed on {shape.label} ({error}); the check does not know "
            "this release's GDN ops"))
    for launch in launches:
        # named by its Triton function: the norm's is the attribute "kernel" of vLLM's LayerNormFwdKernel
        launch.kernel_name = launch.fn.fn.__name__
    return launches
