"""The launches bench/kernel_inventory_smem records besides fused MoE, the KV-cache write and TRITON_MLA's
decode: Model Runner V2's own kernels (vllm/v1/worker/gpu: input preparation, block tables, staged state
writes, the sampler, the top-k / top-p kernels of v1/sample/ops its sampler calls, and a hybrid model's
per-step num_accepted kernels of model_states/mamba_hybrid.py), MRoPE's kernel
(MRotaryEmbedding.forward_cuda, the Qwen2-VL family) and LoRA's shrink and expand (lora/ops/triton_ops).

Each launch is made by vLLM's own launcher on CPU tensors, with the launched kernel object swapped for the
fit check's recorder (patches/fitcheck/op_recording.recorded: _Recorder for a plain kernel, the autotune
and heuristics recorders where a kernel is decorated so). Nothing runs and nothing is timed. Runs inside the
vLLM image with CUDA_VISIBLE_DEVICES empty (patches/fitcheck/recorder.prepare_cpu_host).

What a CPU host answers otherwise than the GPU, and is therefore set for the recording:
- the platform is CUDA at compute capability 7.5 (recorder.simulated_device). No launcher here asks for more
  than is_cuda / is_cuda_alike / is_rocm and "capability >= 9.0" (LoRA's PDL, the expand's sm_90 stage
  workaround), which 7.5 and 8.6 answer alike, so one recording serves both devices;
- Model Runner V2's pinned / UVA buffers (buffer_utils.UvaBuffer) need a CUDA driver: its own fallback
  (NonUvaBuffer) is used, on "cpu", and async_tensor_h2d does not pin;
- the top-k / top-p launcher picks its tiles by logits.device.type ("cpu" gets 256 / 128, 4 warps): its
  logits are a CPU tensor that reports device cuda:0, and the SM count is a T4's (40; it sets the grid, and
  at Gemma 4's vocab the split count is 32 for any SM count);
- the structured-output bitmask launcher copies on a side CUDA stream: torch.cuda.stream / current_stream
  are no-ops for that call (the launch's arguments are the launcher's own).
"""
from __future__ import annotations

import contextlib
import glob
import os
import types

from contract.devices import TURING
from patches.fitcheck.op_recording import recorded
from patches.fitcheck.recorder import simulated_device, swapped

VOCAB = 262_144  # Gemma 4's vocabulary
MAX_REQS = 256  # max_num_seqs
MAX_MODEL_LEN = 4096
MAX_TOKENS = 8192  # max_num_batched_tokens
SAMPLER_BATCHES = (1, 64, 256)  # rows of logits (one per request without speculative decoding)
T4_SMS = 40

# Legacy rows print their tiles as bare values; these kernels' tiles are printed by name.
EXTRA_TILE_NAMES = ("SPLIT_K", "S", "F", "PADDED_COLS")


def tile_params(launch) -> dict:
    """The tile-setting constexprs of a launch, in the kernel's parameter order: every int argument whose
    name holds BLOCK, the padded extents of MRoPE (pad_*), the split counts and fan-outs."""
    out = {}
    for name, value in launch.params.items():
        value = getattr(value, "value", value)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if "BLOCK" in name or name.startswith("pad_") or name in EXTRA_TILE_NAMES:
            out[name] = value
    return out


class Inventory:
    """Recorded launches, (kernel, case, launch) each, and the launchers that could not be recorded,
    (launcher, case, reason) each."""

    def __init__(self):
        self.cases: list[tuple] = []
        self.unrecorded: list[tuple] = []

    def record(self, launcher: str, case: str, kernels, call) -> None:
        try:
            launches = recorded(kernels, call)
        except Exception as error:  # a launcher that cannot run on CPU tensors is a finding, in one line
            text = (str(error).strip().splitlines() or [""])[0][:200]
            self.unrecorded.append((launcher, case, f"{type(error).__name__}: {text}"))
            return
        if not launches:
            self.unrecorded.append((launcher, case, "the launcher made no launch"))
        import torch

        seen = set()
        for launch in launches:  # one row per distinct launch of a call (a state's writes repeat one)
            for name, value in launch.params.items():  # the compile sees plain tensors (_cuda_looking's undone)
                if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
                    launch.params[name] = value.as_subclass(torch.Tensor)
            key = _compile_key(launch)
            if key not in seen:
                seen.add(key)
                self.cases.append((launch.fn.fn.__name__, case, launch))


def _compile_key(launch) -> tuple:
    """What sets a launch's compile, as Triton's JIT specializes it: constexprs by value, other ints by
    "== 1" and "divisible by 16", tensors by dtype (a state's writes, or the top-p search's rounds, repeat
    one compile with other pointers and round numbers)."""
    fn = launch.fn
    constexprs = {param.name for param in getattr(fn, "params", ()) if getattr(param, "is_constexpr", False)}
    parts = []
    for name, value in launch.params.items():
        if hasattr(value, "dtype"):
            parts.append((name, str(value.dtype)))
        elif name in constexprs or not isinstance(value, int) or isinstance(value, bool):
            parts.append((name, repr(getattr(value, "value", value))))
        else:
            parts.append((name, value == 1, value % 16 == 0))
    return fn.fn.__name__, tuple(sorted(launch.options.items())), tuple(parts)


_REPORTS_CUDA: list = []  # the torch.Tensor subclass, made once torch is imported


def _cuda_looking(tensor):
    """`tensor` (on the CPU) answering .device as cuda:0, as the top-k / top-p launcher sees a GPU's logits."""
    import torch

    if not _REPORTS_CUDA:
        class ReportsCuda(torch.Tensor):
            @property
            def device(self):
                return torch.device("cuda", 0)
        _REPORTS_CUDA.append(ReportsCuda)
    return tensor.as_subclass(_REPORTS_CUDA[0])


@contextlib.contextmanager
def _cpu_host():
    """The simulated CUDA device, and Model Runner V2's buffers on the CPU (its NonUvaBuffer fallback)."""
    import vllm.utils.torch_utils as torch_utils
    import vllm.v1.worker.gpu.buffer_utils as buffer_utils
    from vllm.platforms import current_platform

    with contextlib.ExitStack() as stack:
        stack.enter_context(simulated_device(types.ModuleType("no_clamp"), TURING.cc, TURING.limit))
        stack.enter_context(swapped(buffer_utils, "is_uva_available", lambda: False))
        stack.enter_context(swapped(torch_utils, "PIN_MEMORY", False))
        stack.enter_context(swapped(current_platform, "device_type", "cpu"))
        yield


def _runner_inputs(inv: Inventory) -> None:
    """Input preparation (input_batch.py), block tables and slot mappings (block_table.py), the staged state
    writes (buffer_utils.py), as model_runner.py's prepare_inputs / prepare_attn / postprocess_sampled call
    them, for decode and prefill batches of a two-group KV cache (Gemma's sliding + full layers) and a
    one-group one."""
    import torch

    from vllm.v1.worker.gpu import block_table as bt
    from vllm.v1.worker.gpu import buffer_utils as bu
    from vllm.v1.worker.gpu import input_batch as ib
    from vllm.v1.worker.gpu.states import RequestState

    i32, i64 = torch.int32, torch.int64
    states = RequestState(MAX_REQS, MAX_MODEL_LEN, MAX_TOKENS, 0, VOCAB, "cpu")
    prompt = list(range(2048))
    for req in range(4):
        states.add_request(f"r{req}", len(prompt), prompt, 0, 256)
    inv.record("RequestState.apply_staged_writes", "4 new requests, 2,048-token prompts",
               ((bu, ("_apply_write_kernel",)),), states.apply_staged_writes)
    output_bin_counts = torch.empty(MAX_REQS, VOCAB, dtype=i32)  # PenaltiesState's
    input_ids = torch.zeros(MAX_TOKENS, dtype=i32)
    positions = torch.zeros(MAX_TOKENS, dtype=i64)
    seq_lens = torch.zeros(MAX_REQS, dtype=i32)
    tables = {"2 KV groups, sliding window": bt.BlockTables([16, 16], MAX_REQS, MAX_TOKENS, [512, 512], "cpu",
                                                           sliding_window_reach=[1024, 0]),
              "1 KV group": bt.BlockTables([16], MAX_REQS, MAX_TOKENS, [512], "cpu")}
    for phase, reqs, query_len in (("decode", 1, 1), ("decode", 256, 1), ("prefill", 1, 2048), ("prefill", 4, 2048)):
        case = f"{phase}, {reqs} x {query_len} token{'s' * (query_len > 1)}"
        idx = torch.arange(reqs, dtype=i64)
        query_start_loc = torch.arange(reqs + 1, dtype=i32) * query_len
        cu_num_logits = torch.arange(reqs + 1, dtype=i32)
        num_computed = states.num_computed_tokens.gpu
        if phase == "prefill":
            inv.record("prepare_prefill_inputs", case, ((ib, ("_prepare_prefill_inputs_kernel",)),),
                       lambda: ib.prepare_prefill_inputs(input_ids, states.next_prefill_tokens, idx, query_start_loc,
                                                         states.all_token_ids.gpu, states.prefill_len.gpu,
                                                         num_computed))
        inv.record("prepare_pos_seq_lens", case, ((ib, ("_prepare_pos_seq_lens_kernel",)),),
                   lambda: ib.prepare_pos_seq_lens(idx, query_start_loc, num_computed, positions, seq_lens))
        inv.record("combine_sampled_and_draft_tokens", case, ((ib, ("_combine_sampled_and_draft_tokens_kernel",)),),
                   lambda: ib.combine_sampled_and_draft_tokens(
                       input_ids, idx, states.last_sampled_tokens, query_start_loc, seq_lens[:reqs],
                       states.prefill_len.gpu, states.draft_tokens, cu_num_logits, reqs, 1))
        num_sampled = seq_lens[:reqs].new_ones(reqs)
        inv.record("get_num_sampled_and_rejected", case, ((ib, ("_get_num_sampled_and_rejected_kernel",)),),
                   lambda: ib.get_num_sampled_and_rejected(num_sampled, seq_lens[:reqs], cu_num_logits, idx,
                                                           states.prefill_len.gpu))
        inv.record("post_update", case, ((ib, ("_post_update_kernel",)),),
                   lambda: ib.post_update(idx, num_computed, states.last_sampled_tokens, output_bin_counts,
                                          torch.zeros(reqs, 1, dtype=i64), num_sampled, torch.zeros_like(num_sampled),
                                          query_start_loc, states.all_token_ids.gpu, states.total_len.gpu, None,
                                          states.draft_tokens))
        for label, table in tables.items():
            def staged(table=table):
                for req in range(reqs):
                    table.append_block_ids(req, tuple([1, 2, 3] for _ in table.block_sizes), overwrite=True)
                table.apply_staged_writes()
            inv.record("BlockTables.apply_staged_writes", f"{case}, {label}", ((bu, ("_apply_write_kernel",)),), staged)
            inv.record("BlockTables.gather_block_tables", f"{case}, {label}", ((bt, ("_gather_block_tables_kernel",)),),
                       lambda table=table: table.gather_block_tables(idx, num_reqs_padded=reqs,
                                                                     num_computed_tokens=num_computed))
            inv.record("BlockTables.compute_slot_mappings", f"{case}, {label}",
                       ((bt, ("_compute_slot_mappings_kernel",)),),
                       lambda table=table: table.compute_slot_mappings(idx, query_start_loc, positions,
                                                                       num_tokens_padded=reqs * query_len))


def _sampler(inv: Inventory) -> None:
    """The sampler's kernels (v1/worker/gpu/sample, and v1/sample/ops/topk_topp_triton.py through
    apply_top_k_top_p) as sampler.py calls them: logits of the model's dtype where they come straight from
    compute_logits (sampling without processing, logprobs in the default raw mode, the grammar bitmask),
    float32 after apply_sampling_params copies them (temperature, min_p, penalties, logit bias / min tokens,
    bad words, top-k / top-p)."""
    import numpy as np
    import torch

    import vllm.envs as envs
    from vllm.v1.sample.ops import topk_topp_sampler as tks
    from vllm.v1.sample.ops import topk_topp_triton as tt
    from vllm.v1.worker.gpu import buffer_utils as bu
    from vllm.v1.worker.gpu import structured_outputs as so
    from vllm.v1.worker.gpu.sample import bad_words as bw
    from vllm.v1.worker.gpu.sample import gumbel, logit_bias, logprob, min_p, penalties, prompt_logprob
    from vllm.v1.worker.gpu.states import RequestState

    i32, i64, f32 = torch.int32, torch.int64, torch.float32
    states = RequestState(MAX_REQS, MAX_MODEL_LEN, MAX_TOKENS, 0, VOCAB, "cpu")
    per_req_f32 = torch.ones(MAX_REQS, dtype=f32)
    prompt_bin_mask = torch.zeros(MAX_REQS, -(-VOCAB // 32), dtype=i32)
    output_bin_counts = torch.empty(MAX_REQS, VOCAB, dtype=i32)
    inv.record("PenaltiesState.apply_staged_writes: bincount", "4 new requests, 2,048-token prompts",
               ((penalties, ("_bincount_kernel",)),),
               lambda: penalties.bincount(torch.arange(4, dtype=i64), states.all_token_ids.gpu, states.prompt_len.gpu,
                                          states.prefill_len.gpu, prompt_bin_mask, output_bin_counts, 2048))
    token_ids_state = logprob.LogprobTokenIdsState(MAX_REQS, "cpu")
    token_ids_state.num_token_ids.np[:4] = 3
    for req in range(4):
        token_ids_state.token_ids.stage_write(req, 0, [1, 2, 3])
    inv.record("LogprobTokenIdsState.apply_staged_writes", "4 requests with logprob_token_ids",
               ((bu, ("_apply_write_kernel",)),), token_ids_state.apply_staged_writes)
    # The top-k / top-p dispatchers hold their kernel (jit_warmup_triton_helper._DecoratedTritonJitKernel.kernel)
    topk_owners = (tt._topk_topp, tt._topp_split_stats, tt._topp_split_step, tt._topp_split_mask)
    for owner in topk_owners:
        owner._kernel_arg_names  # cached from the real kernel before the recorder stands in for it
    topk_kernels = tuple((owner, ("kernel",)) for owner in topk_owners)
    for rows in SAMPLER_BATCHES:
        idx = torch.arange(rows, dtype=i64)
        pos = torch.zeros(rows, dtype=i64)
        local_pos = torch.zeros(rows, dtype=i32)
        input_ids = torch.zeros(rows, dtype=i32)
        sampled = torch.zeros(rows, dtype=i64)
        logits32 = torch.empty(rows, VOCAB, dtype=f32)
        case32 = f"{rows} row{'s' * (rows > 1)} x {VOCAB}, float32"
        inv.record("apply_temperature", case32, ((gumbel, ("_temperature_kernel",)),),
                   lambda: gumbel.apply_temperature(logits32, idx, per_req_f32))
        inv.record("apply_min_p", case32, ((min_p, ("_min_p_kernel",)),),
                   lambda: min_p.apply_min_p(logits32, idx, per_req_f32))
        inv.record("apply_penalties", case32, ((penalties, ("_penalties_kernel",)),),
                   lambda: penalties.apply_penalties(logits32, idx, input_ids, local_pos, per_req_f32, per_req_f32,
                                                     per_req_f32, prompt_bin_mask, output_bin_counts))
        for check in (False, True):
            inv.record("apply_logit_bias", f"{case32}, CHECK_ALL_MASKED_ROWS={check}",
                       ((logit_bias, ("_bias_kernel",)),),
                       lambda check=check: logit_bias.apply_logit_bias(
                           logits32, idx, pos, torch.zeros(MAX_REQS, dtype=i32),
                           torch.zeros(MAX_REQS, logit_bias.MAX_NUM_ALLOWED_TOKEN_IDS, dtype=i32),
                           torch.zeros(MAX_REQS, dtype=i32),
                           torch.zeros(MAX_REQS, logit_bias.MAX_NUM_LOGIT_BIAS_TOKENS, dtype=i32),
                           torch.zeros(MAX_REQS, logit_bias.MAX_NUM_LOGIT_BIAS_TOKENS, dtype=f32),
                           torch.zeros(MAX_REQS, dtype=i32), torch.zeros(MAX_REQS, dtype=i32),
                           torch.zeros(MAX_REQS, dtype=i32),
                           torch.zeros(MAX_REQS, logit_bias.MAX_NUM_STOP_TOKEN_IDS, dtype=i32), check))
        inv.record("apply_bad_words", case32, ((bw, ("_bad_words_kernel",)),),
                   lambda: bw.apply_bad_words(
                       logits32, idx, torch.zeros(MAX_REQS, envs.VLLM_MAX_BAD_WORDS_TOTAL_TOKENS, dtype=i32),
                       torch.zeros(MAX_REQS, envs.VLLM_MAX_NUM_BAD_WORDS + 1, dtype=i32),
                       torch.zeros(MAX_REQS, dtype=i32), states.all_token_ids.gpu, states.prompt_len.gpu,
                       states.total_len.gpu, input_ids, local_pos, envs.VLLM_MAX_NUM_BAD_WORDS))
        # top-k / top-p: apply_top_k_top_p -> apply_top_k_top_p_triton (HAS_TRITON); at most 64 rows a
        # p-only batch takes the split-row pipeline (three kernels), else the monolithic kernel
        modes = [("top-k 64", True, False, False), ("top-k 64 + top-p 0.95, rows without top-k", True, True, True),
                 ("top-p 0.95 only", False, True, True)]
        for label, use_k, use_p, topp_only_rows in modes:
            logits_gpu = _cuda_looking(torch.empty(rows, VOCAB, dtype=f32))
            k = torch.full((rows,), 64, dtype=i32) if use_k else None
            p = torch.full((rows,), 0.95, dtype=f32) if use_p else None
            inv.record("apply_top_k_top_p", f"{case32}, {label}", topk_kernels,
                       lambda logits=logits_gpu, k=k, p=p, only=topp_only_rows:
                       tks.apply_top_k_top_p(logits, k, p, has_topp_only_rows=only))
        for dtype in (torch.float16, torch.bfloat16, f32):
            logits = torch.empty(rows, VOCAB, dtype=dtype)
            case = f"{rows} row{'s' * (rows > 1)} x {VOCAB}, {str(dtype)[6:]}"
            inv.record("gumbel_sample", case, ((gumbel, ("_gumbel_sample_kernel",)),),
                       lambda logits=logits: gumbel.gumbel_sample(logits, idx, per_req_f32,
                                                                  torch.zeros(MAX_REQS, dtype=i64), pos,
                                                                  apply_temperature=False, is_drafting=False))
            inv.record("compute_topk_scores (5 logprobs)", case,
                       ((logprob, ("_topk_log_softmax_kernel", "_ranks_kernel", "_fill_logprob_token_ids_kernel")),),
                       lambda logits=logits: logprob.compute_topk_scores(logits, 5, sampled))
            if rows == 64:
                inv.record("compute_topk_scores (5 logprobs + logprob_token_ids)", case,
                           ((logprob, ("_topk_log_softmax_kernel", "_ranks_kernel",
                                       "_fill_logprob_token_ids_kernel")),),
                           lambda logits=logits: logprob.compute_topk_scores(
                               logits, 5, sampled, logprob_token_ids_state=token_ids_state, expanded_idx_mapping=idx,
                               max_per_req_token_ids=3))
            if dtype != f32:  # the bitmask is applied to compute_logits' output
                stream = types.SimpleNamespace(wait_stream=lambda other: None)
                worker = types.SimpleNamespace(logits_indices=torch.zeros(rows, dtype=i32),
                                               grammar_bitmask=torch.zeros(rows, -(-VOCAB // 32), dtype=i32),
                                               copy_stream=stream, mask_stride=1)
                batch = types.SimpleNamespace(req_ids=[f"r{i}" for i in range(rows)],
                                              cu_num_logits=torch.arange(rows + 1, dtype=i32))
                bitmask = np.zeros((rows, -(-VOCAB // 32)), dtype=np.int32)

                def grammar(logits=logits, worker=worker, batch=batch, bitmask=bitmask, stream=stream):
                    with swapped(torch.cuda, "stream", lambda s: contextlib.nullcontext()), \
                            swapped(torch.cuda, "current_stream", lambda *a: stream), \
                            swapped(so, "PIN_MEMORY", False):
                        so.StructuredOutputsWorker.apply_grammar_bitmask(worker, logits, batch, batch.req_ids, bitmask)
                inv.record("StructuredOutputsWorker.apply_grammar_bitmask", case,
                           ((so, ("_apply_grammar_bitmask_kernel",)),), grammar)
    inv.record("get_prompt_logprobs_token_ids", "1 x 2048 prompt tokens",
               ((prompt_logprob, ("_prompt_logprobs_token_ids_kernel",)),),
               lambda: prompt_logprob.get_prompt_logprobs_token_ids(
                   2048, torch.tensor([0, 2048], dtype=i32), torch.zeros(1, dtype=i64), states.num_computed_tokens.gpu,
                   states.all_token_ids.gpu))


def _hybrid_state(inv: Inventory) -> None:
    """Model Runner V2's per-step kernels of a hybrid (Mamba) model's state: MambaHybridModelState's
    postprocess_state without prefix-cache alignment (num_sampled a tensor, or an int)."""
    import torch

    try:
        from vllm.v1.worker.gpu.model_states import mamba_hybrid as mh
    except Exception as error:
        inv.unrecorded.append(("MambaHybridModelState.postprocess_state", "-", f"{type(error).__name__}: {error}"))
        return
    state = types.SimpleNamespace(num_accepted_tokens_gpu=torch.zeros(MAX_REQS, dtype=torch.int32), recoverssm=None,
                                  _align_mode=False, _mamba_ctx=None)
    idx = torch.arange(64, dtype=torch.int64)
    kernels = ((mh, ("_scatter_num_accepted_kernel", "_fill_num_accepted_kernel")),)
    inv.record("MambaHybridModelState.postprocess_state", "64 reqs, num_sampled a tensor", kernels,
               lambda: mh.MambaHybridModelState.postprocess_state(state, idx, torch.ones(64, dtype=torch.int32)))
    inv.record("MambaHybridModelState.postprocess_state", "64 reqs, num_sampled an int", kernels,
               lambda: mh.MambaHybridModelState.postprocess_state(state, idx, 1))


# (label, query heads, KV heads per GPU, mrope_section, interleaved): head 128, rotary 128, NeoX style
MROPE_MODELS = (
    ("Qwen2.5-VL-3B", 16, 2, (16, 24, 24), False),
    ("Qwen2.5-VL-7B / Qwen2-VL-7B", 28, 4, (16, 24, 24), False),
    ("Qwen2.5-VL-32B", 40, 8, (16, 24, 24), False),
    ("Qwen2.5-VL-72B", 64, 8, (16, 24, 24), False),
    ("Qwen3-VL-8B", 32, 8, (24, 20, 20), True),
)
MROPE_TOKENS = (1, 512, 8192)


def _mrope(inv: Inventory) -> None:
    """MRotaryEmbedding.forward_cuda with 3-row (T/H/W) positions -> triton_mrope -> _triton_mrope_forward,
    and Model Runner V2's M-RoPE position kernel (mm/rope.py RopeState.prepare_positions)."""
    import torch

    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import mrope
    from vllm.v1.worker.gpu.mm import rope as runner_rope

    for label, heads, kv_heads, section, interleaved in MROPE_MODELS:
        for dtype in (torch.float16, torch.bfloat16):
            try:  # a CustomOp is made under a vLLM config (the model loader's); a default one here
                with set_current_vllm_config(VllmConfig()):
                    layer = mrope.MRotaryEmbedding(128, 128, MAX_MODEL_LEN, 1_000_000.0, True, dtype,
                                                   mrope_section=list(section), mrope_interleaved=interleaved)
            except Exception as error:
                inv.unrecorded.append(("MRotaryEmbedding", label, f"{type(error).__name__}: {error}"))
                continue
            for tokens in MROPE_TOKENS:
                case = f"{label}: {heads} / {kv_heads} heads, section {list(section)}"
                case += ", interleaved" if interleaved else ""
                case += f", {tokens} token{'s' * (tokens > 1)}, {str(dtype)[6:]}"
                inv.record("MRotaryEmbedding.forward_cuda", case, ((mrope, ("_triton_mrope_forward",)),),
                           lambda layer=layer, tokens=tokens, heads=heads, kv_heads=kv_heads, dtype=dtype:
                           layer.forward_cuda(torch.zeros(3, tokens, dtype=torch.int64),
                                              torch.empty(tokens, heads * 128, dtype=dtype),
                                              torch.empty(tokens, kv_heads * 128, dtype=dtype)))
    state = runner_rope.RopeState(3, MAX_REQS, MAX_TOKENS, MAX_MODEL_LEN, "cpu")
    for phase, reqs, query_len in (("decode", 256, 1), ("prefill", 4, 2048)):
        inv.record("RopeState.prepare_positions", f"{phase}, {reqs} x {query_len} tokens",
                   ((runner_rope, ("_prepare_rope_positions_kernel",)),),
                   lambda reqs=reqs, query_len=query_len: state.prepare_positions(
                       torch.arange(reqs, dtype=torch.int64), torch.arange(reqs + 1, dtype=torch.int32) * query_len,
                       torch.full((MAX_REQS,), 2048, dtype=torch.int32), torch.zeros(MAX_REQS, dtype=torch.int32)))


LORA_HIDDEN = (2048, 4096)
LORA_RANKS = (8, 16, 64)
LORA_BATCHES = (16, 512)  # get_lora_op_configs' shrink default changes at batch 128


def lora_config_files() -> list[str]:
    """The tuned LoRA config files the installed vLLM ships ({gpu}_SHRINK.json, {gpu}_EXPAND_{add}.json),
    which load_lora_op_config reads only from $VLLM_TUNED_CONFIG_FOLDER."""
    import vllm

    root = os.path.dirname(vllm.__file__)
    return sorted(p for p in glob.glob(os.path.join(root, "**", "*.json"), recursive=True)
                  if "_SHRINK" in os.path.basename(p) or "_EXPAND" in os.path.basename(p))


def _lora(inv: Inventory) -> None:
    """lora_shrink / lora_expand as punica_gpu.py's add_lora_linear calls them: x (fp16) -> a float32 buffer
    [slices, tokens, rank] -> y (fp16) with add_inputs, one LoRA active of max_loras 1; one slice (o_proj,
    down_proj) at every size, three (QKV of a 32 / 8-head GQA layer) at hidden 4096, rank 16."""
    import torch

    from vllm.lora.ops.triton_ops import lora_expand_op as expand_op
    from vllm.lora.ops.triton_ops import lora_shrink_op as shrink_op
    from vllm.lora.ops.triton_ops import utils as lora_utils

    i32, f16 = torch.int32, torch.float16
    shapes = [(hidden, rank, (hidden,)) for hidden in LORA_HIDDEN for rank in LORA_RANKS]
    shapes.append((4096, 16, (4096, 1024, 1024)))
    for hidden, rank, outputs in shapes:
        for tokens in LORA_BATCHES:
            meta = (torch.zeros(tokens, dtype=i32), torch.arange(tokens, dtype=i32),
                    torch.tensor([tokens, 0], dtype=i32),
                    torch.tensor([0, tokens, tokens], dtype=i32), torch.tensor([0, -1], dtype=i32),
                    torch.tensor([False]), torch.tensor([1]))
            x = torch.empty(tokens, hidden, dtype=f16)
            buffer = torch.empty(len(outputs), tokens, rank, dtype=torch.float32)
            lora_a = [torch.empty(1, rank, hidden, dtype=f16) for _ in outputs]
            lora_b = [torch.empty(1, size, rank, dtype=f16) for size in outputs]
            y = torch.empty(tokens, sum(outputs), dtype=f16)
            slices = f"{len(outputs)} slice{'s' if len(outputs) > 1 else ''}"
            case = f"hidden {hidden}, rank {rank}, {slices}, {tokens} tokens"

            def shrink(x=x, lora_a=lora_a, buffer=buffer, meta=meta):
                lora_utils._LORA_A_PTR_DICT.clear()  # keyed by data_ptr, which the CPU allocator reuses
                shrink_op._lora_shrink(x, lora_a, buffer, *meta, 1.0)

            def expand(buffer=buffer, lora_b=lora_b, y=y, meta=meta):
                lora_utils._LORA_B_PTR_DICT.clear()
                expand_op._lora_expand(buffer, lora_b, y, *meta, offset_start=0, add_inputs=True)

            inv.record("lora_shrink", case, ((shrink_op, ("_lora_shrink_kernel", "_lora_shrink_reduce_kernel")),),
                       shrink)
            inv.record("lora_expand", case, ((expand_op, ("_lora_expand_kernel",)),), expand)


def record_all() -> Inventory:
    """Every launch of the three groups, and every launcher that could not be recorded."""
    import triton  # noqa: F401 - the image's Triton, imported before vLLM's modules use it

    from vllm.v1.sample.ops import topk_topp_triton as tt

    inv = Inventory()
    with _cpu_host(), swapped(tt, "num_compute_units", lambda device_id=0: T4_SMS):
        for group in (_runner_inputs, _sampler, _hybrid_state, _mrope, _lora):
            try:
                group(inv)
            except Exception as error:  # a whole group that cannot be set up is reported, the others still run
                text = (str(error).strip().splitlines() or [""])[0][:200]
                inv.unrecorded.append((group.__name__.strip("_"), "set-up", f"{type(error).__name__}: {text}"))
    return inv
