"""The Triton launches of one Kimi Linear KDA layer (vLLM 0.33.0's KimiGatedDeltaNetAttention,
model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py), made by vLLM's real ops on CPU tensors with
the fit check's recorder in place of each kernel (op_recording.py), as the gated delta net's launches.py does for the
gated delta net.

What the layer runs on an Ampere GPU (_forward), per case recorded; the KDA ops are vLLM's NVIDIA copy
(vllm.models.kimi_k3.nvidia.ops.third_party.kda), and the prefill backend is Triton on every device
(the layer accepts no other):
  prefill      q, k and v each through causal_conv1d_fn (strided views of the projection, fp32 conv
               weights: the layer's conv1d parameter), gather_initial_states, then
               chunk_kda_with_fused_gate: l2norm_fwd of q and k, kda_gate_chunk_cumsum_vector_kernel,
               the intra-chunk kernel (token-parallel, or the sub-chunk one with a gate lower bound),
               chunk_kda_fwd_kernel_inter_solve_fused, recompute_w_u_fwd_kernel, FLA's
               chunk_gated_delta_rule_fwd_kernel_h_blockdim64 (with the gate), chunk_gla_fwd_kernel_o
  mixed        a batch of decodes and a prefill: without speculation the layer runs them all through the
               prefill path, the decodes as sequences of one token with a state
  decode       a decode-only batch: causal_conv1d_update over the packed q/k/v and
               fused_recurrent_kda_packed_decode
  spec-decode  with speculative decoding (opt-in): causal_conv1d_update over the draft tokens and
               fused_recurrent_kda with the gate fused; its BV and stages follow heads x sequences (four
               choices, fused_recurrent_kda_fwd), so it is recorded at a batch in each
  norm-eager   the output's gated RMS norm (FusedRMSNormGated.forward_cuda, FLA's kda.py): a custom op
               only with --enforce-eager; compiled, vLLM runs forward_native through Inductor
Each autotuned kernel is recorded once per configuration of its list; the verdict is op_recording.judged's.

The host decides as the device would: the programmatic-dependent-launch flag and FLA's import-time lists
are checked by the gated delta net's launches.host_choices_differ; the intra-chunk solve's dot precision follows
has_device_capability(80) per call ("tf32" on sm_86, "ieee" below 8.0), so the prefill is recorded with
vLLM's platform answering as the device (recorder.simulated_device).
"""
from __future__ import annotations

import functools

from door.problem import Problem
from patches.fitcheck.family import RecordedShape
from patches.fitcheck.families.gated_delta_net.launches import (CHUNK_SIZE, DECODE_BATCH, DRAFT_TOKENS, FLA_OPS,
                                                               imported_ops)
from patches.fitcheck.families.kda import KDA_GATE_LOWER_BOUND_MIN
from patches.fitcheck.op_recording import DTYPE_NAME, record_calls
from patches.fitcheck.recorder import Launch, simulated_device
from patches.fitcheck.swap_and_write import swapped

KDA_OPS = "vllm.models.kimi_k3.nvidia.ops.third_party.kda"
MAMBA_OPS = "vllm.model_executor.layers.mamba.ops"
NORM_EPS = 1e-5  # FusedRMSNormGated's default, which the layer keeps
# fused_recurrent_kda_fwd's choices of BV and stages by heads x sequences: at most 48, 96, 192, above
HEAD_SEQUENCE_BOUNDS = (48, 96, 192)


def _ops() -> dict:
    return imported_ops({
        "conv": f"{MAMBA_OPS}.causal_conv1d", "gather": f"{MAMBA_OPS}.gather_initial_states",
        "chunk": f"{KDA_OPS}.chunk", "chunk_intra": f"{KDA_OPS}.chunk_intra",
        "token_parallel": f"{KDA_OPS}.chunk_intra_token_parallel", "recurrent": f"{KDA_OPS}.fused_recurrent",
        "l2norm": f"{FLA_OPS}.l2norm", "chunk_delta_h": f"{FLA_OPS}.chunk_delta_h", "norm": f"{FLA_OPS}.kda"}, "KDA")


def spec_batches(heads: int) -> tuple[int, ...]:
    """Sequence counts of the spec-decode batches that reach each of fused_recurrent_kda_fwd's choices a
    rank of `heads` heads can reach (vLLM's own warm-up profiles, get_fused_recurrent_kda_fwd_warmup_profiles,
    and one above 192 head-sequences)."""
    return tuple(sorted({1, *(bound // heads + 1 for bound in HEAD_SEQUENCE_BOUNDS)}))


@functools.cache
def _device_tensor():
    """A CPU tensor class that says it is on the device, for an op that asserts so (gather_initial_states)."""
    import torch

    return type("DeviceTensor", (torch.Tensor,), {"is_cuda": property(lambda self: True)})


def _calls(shape: RecordedShape, ops: dict, cc: int, limit: int, dtype_name: str = DTYPE_NAME) -> list[tuple]:
    """(kind, query_len, num_seqs, kernels, call) for each op the layer runs, called as
    KimiGatedDeltaNetAttention._forward calls it."""
    import torch

    dtype, int32 = getattr(torch, dtype_name), torch.int32
    heads, dim, width = shape.heads, shape.head_dim, shape.conv_width
    projection, conv_dim = heads * dim, shape.conv_dim
    lower_bound = KDA_GATE_LOWER_BOUND_MIN if shape.safe_gate else None
    seqlen = 2 * CHUNK_SIZE
    most_seqs = max(spec_batches(heads))
    cache_lines = 1 + max(DECODE_BATCH, most_seqs) * (DRAFT_TOKENS + 1)  # line 0 is vLLM's null block
    # the conv1d parameter is fp32 (params_dtype), viewed (dim, width); the states: conv in the model's
    # dtype, layout "SD" viewed (dim, state_len); recurrent fp32 (kda_state_dtype)
    weight = torch.empty(conv_dim, 1, width, dtype=torch.float32).view(conv_dim, width)
    A_log, dt_bias = torch.empty(heads, dtype=torch.float32), torch.empty(projection, dtype=torch.float32)
    recurrent_state = torch.empty(cache_lines, heads, dim, dim, dtype=torch.float32)

    def conv_state(draft_tokens=0):
        return torch.empty(cache_lines, width - 1 + draft_tokens, conv_dim, dtype=dtype).transpose(-1, -2)

    def projected(tokens):
        """in_proj_qkvgfab's split: mixed q/k/v, beta (1, tokens, heads) and the gate g1 (1, tokens, heads,
        dim) after f_b_proj; q/k/v and beta are views of one projection."""
        out = torch.empty(tokens, 3 * projection + heads + dim, dtype=dtype)
        mixed_qkv, beta, _ = out.split([3 * projection, heads, dim], dim=-1)
        return mixed_qkv, beta.unsqueeze(0), torch.empty(tokens, projection, dtype=dtype).view(1, tokens, heads, dim)

    def heads_view(x):  # rearrange "n (h d) -> 1 n h d"
        return x.view(x.shape[0], heads, dim).unsqueeze(0)

    def chunked(lengths, initial):
        tokens = sum(lengths)
        mixed_qkv, beta, g1 = projected(tokens)
        starts = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=int32)
        lines = torch.arange(1, len(lengths) + 1, dtype=int32)
        has_initial = torch.tensor(initial)
        states = conv_state().split(projection, dim=-2)
        weights = weight.split(projection, dim=0)
        q, k, v = (heads_view(ops["conv"].causal_conv1d_fn(
            x.transpose(0, 1), w, None, activation="silu", conv_states=state, has_initial_state=has_initial,
            cache_indices=lines, query_start_loc=starts).transpose(0, 1))
            for x, state, w in zip(mixed_qkv.split(projection, dim=-1), states, weights))
        initial_state = ops["gather"].gather_initial_states(recurrent_state.as_subclass(_device_tensor()), lines, has_initial)
        with simulated_device(ops["chunk_intra"], cc, limit):
            ops["chunk"].chunk_kda_with_fused_gate(
                q=q, k=k, v=v, raw_g=g1, raw_beta=beta, A_log=A_log, g_bias=dt_bias, lower_bound=lower_bound,
                initial_state=initial_state.as_subclass(torch.Tensor), output_final_state=True,
                use_qk_l2norm_in_kernel=True, cu_seqlens=starts)

    def prefill():
        chunked([seqlen], [False])

    def mixed():
        chunked([1] * DECODE_BATCH + [seqlen], [True] * DECODE_BATCH + [False])

    def decode():
        mixed_qkv, beta, g1 = projected(DECODE_BATCH)
        lines = torch.arange(1, DECODE_BATCH + 1, dtype=int32)
        qkv = ops["conv"].causal_conv1d_update(mixed_qkv, conv_state(), weight, None, activation="silu",
                                               conv_state_indices=lines, validate_data=True,
                                               out=torch.empty(mixed_qkv.shape, dtype=dtype))
        ops["recurrent"].fused_recurrent_kda_packed_decode(
            mixed_qkv=qkv, raw_g=g1, raw_beta=beta, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound,
            initial_state=recurrent_state, state_indices=lines)

    def spec_decode():
        per_seq = DRAFT_TOKENS + 1
        for seqs in spec_batches(heads):
            tokens = seqs * per_seq
            mixed_qkv, beta, g1 = projected(tokens)
            lines = torch.arange(1, 1 + tokens, dtype=int32).view(seqs, per_seq)
            starts = torch.arange(seqs + 1, dtype=int32) * per_seq
            accepted = torch.ones(seqs, dtype=int32)
            qkv = ops["conv"].causal_conv1d_update(
                mixed_qkv, conv_state(DRAFT_TOKENS), weight, None, activation="silu", conv_state_indices=lines[:, 0],
                num_accepted_tokens=accepted, query_start_loc=starts, max_query_len=per_seq, validate_data=False,
                out=torch.empty(mixed_qkv.shape, dtype=dtype))
            q, k, v = (heads_view(x) for x in qkv.split(projection, dim=-1))
            ops["recurrent"].fused_recurrent_kda(
                q=q, k=k, v=v, raw_g=g1, raw_beta=beta, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound,
                initial_state=recurrent_state, cu_seqlens=starts, ssm_state_indices=lines,
                num_accepted_tokens=accepted)

    def norm():
        # o_norm(core_attn_out (1, tokens, heads, dim), g2 (tokens, heads, dim)), weight in the model's dtype
        ops["norm"].rms_norm_gated(torch.empty(1, seqlen, heads, dim, dtype=dtype),
                                   torch.empty(seqlen, heads, dim, dtype=dtype), torch.empty(dim, dtype=dtype), None,
                                   "sigmoid", eps=NORM_EPS)

    conv, chunk = ops["conv"], ops["chunk"]
    chunk_kernels = (
        (conv, ("_causal_conv1d_fwd_kernel",)), (ops["gather"], ("_gather_initial_states_kernel",)),
        (ops["l2norm"], ("l2norm_fwd_kernel", "l2norm_fwd_kernel1", "l2norm_fwd_kernel2")),
        (chunk, ("kda_gate_chunk_cumsum_vector_kernel", "recompute_w_u_fwd_kernel", "chunk_gla_fwd_kernel_o")),
        (ops["chunk_intra"], ("chunk_kda_fwd_kernel_intra_sub_chunk", "chunk_kda_fwd_kernel_inter_solve_fused")),
        (ops["token_parallel"], ("chunk_kda_fwd_kernel_intra_token_parallel",)),
        (ops["chunk_delta_h"], ("chunk_gated_delta_rule_fwd_kernel_h_blockdim64",)))
    recurrent = (ops["recurrent"], ("fused_recurrent_kda_fwd_kernel", "fused_recurrent_kda_packed_decode_kernel",
                                    "_kda_gate_beta_fwd_kernel"))
    return [
        ("prefill", seqlen, 1, chunk_kernels, prefill),
        ("mixed", 1, DECODE_BATCH + 1, chunk_kernels, mixed),
        ("decode", 1, DECODE_BATCH, ((conv, ("_causal_conv1d_update_kernel",)), recurrent), decode),
        ("spec-decode", DRAFT_TOKENS + 1, most_seqs, ((conv, ("_causal_conv1d_update_kernel",)), recurrent),
         spec_decode),
        ("norm-eager", seqlen, 1, ((ops["norm"], ("layer_norm_gated_fwd_kernel", "layer_norm_gated_fwd_kernel1")),),
         norm),
    ]


def record_kda(shape: RecordedShape, cc: int, limit: int, dtype: str = DTYPE_NAME) -> list[Launch]:
    """Every launch one KDA layer's ops make on a device of compute capability `cc` with `limit` bytes
    (autotuned kernels: one per configuration)."""
    ops = _ops()
    from vllm.utils import torch_utils

    # prepare_chunk_indices stages its host tensor in pinned memory, which needs a CUDA driver (as in
    # the gated delta net's record_gdn)
    with swapped(torch_utils, "PIN_MEMORY", False):
        launches = record_calls(shape, _calls(shape, ops, cc, limit, dtype), lambda kind, error: Problem(
            f"vLLM's {kind} ops of the KDA layer failed on {shape.label} ({error}); the check does not know "
            "this release's KDA ops"))
    for launch in launches:
        launch.kernel_name = launch.fn.fn.__name__
    return launches
