"""Compiles recorded launches for a GPU the host does not have and reads their shared memory.

Each launch is turned into a compile exactly as Triton's own JIT does at launch time (its
binder for signature, constexprs and specialization attributes; its option parsing), then
`triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`. Identical compiles run once;
distinct ones run in forked worker processes. Triton's on-disk cache makes reruns cheap.

Shared memory only: Triton fixes a kernel's shared memory in its TTGIR -> LLVM step, at the
shared-memory allocation pass (the module's `ttg.shared`, which becomes `metadata.shared`). What
follows that pass (the lowering to LLVM, LLVM's O3, PTX, ptxas) changes nothing in the number and
took 90 % of the compile time here (Triton 3.8.0, the Gemma 4 matrix on sm_75: 99.7 of 110 CPU
seconds). So by default the pipeline is Triton's own, through its stage hook
(`knobs.runtime.add_stages_inspection_hook`, its cache kept apart by the hook's key), with the LLVM
stage cut after the allocation and no PTX or cubin made. `cross_check()` then compiles the launch of
largest need of each kernel in full and fails when a number differs, so a Triton that lowers
otherwise cannot pass unnoticed. A launch whose cut compile fails is compiled in full, so an error
is always Triton's whole pipeline's (and a Triton the cut does not fit is only slower). FULL compiles
everything in full.

A compile record (contract/compile_record.py, use_record()) answers shared-memory-only compiles by
Triton's own cache key, as Triton's on-disk cache would; what it answers still has its kernel's largest
need compiled in full by cross_check(). RECORDABLE holds every shared-memory-only answer of this process, for the next
record.
"""
from __future__ import annotations

from door.problem import Problem
import contextlib
import gc
import hashlib
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from contract.compile_record import Answer, Record, usable_answers

WARP_SIZE = 32
SHARED_ONLY = "shared-only"
FULL = "full"
RECORDED = "recorded"  # the LEDGER's mode of a shared-memory-only compile the record answered
# Part of Triton's cache key for the cut pipeline: change it when _allocate_shared_memory changes.
SHARED_ONLY_KEY = "vllm-turing-fitcheck-shared-memory-only-1"


@dataclass(frozen=True)
class CompileResult:
    shared: int | None  # bytes of shared memory per block; None when the compile failed
    num_warps: int | None  # what Triton compiled with (its default when the launch passed none)
    num_stages: int | None
    error: str | None = None
    cpu_s: float = field(default=0.0, compare=False)  # what the compile cost its process (0 for a table answer)


class Request(NamedTuple):
    """One launch to compile. `case` is the case the launch was recorded in, opaque here: the ledger keeps
    it, so the cost breakdown charges the compile to the model family that asked for it first."""

    fn: object  # triton JITFunction
    params: dict  # its arguments by name
    options: dict  # its launch options (num_warps, num_stages)
    case: object = None


class Compiled(NamedTuple):
    """One entry of LEDGER: a compile this process ran (or took from the record, mode RECORDED)."""

    mode: str
    cc: int
    kernel: str
    result: CompileResult
    case: object = None  # the case of the first request for it (Request.case)


@dataclass
class _Job:
    source: object  # triton ASTSource
    options: dict
    key: str
    target: object  # triton GPUTarget
    case: object = None  # Request.case
    # Triton's own cache key of the shared-memory-only compile (the record's key), set by compile_launches
    # once the job is new to this process; "" in FULL mode or on a Triton without get_cache_key
    cache_key: str = ""

    @property
    def kernel(self) -> str:
        return self.source.fn.__name__


def _target_and_backend(cc: int):
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", cc, WARP_SIZE)
    return target, make_backend(target)


_BINDERS: dict[tuple, object] = {}


def _prepare(request: Request, target, backend) -> _Job:
    """What JITFunction.run computes before compiling, for these arguments on `target`."""
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature

    fn = request.fn
    kwargs = dict(request.params, **request.options)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    # One binder per kernel and target, as JITFunction keeps one per device: making it runs exec.
    binder = _BINDERS.get((fn, target.arch))
    if binder is None:
        binder = _BINDERS[fn, target.arch] = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(**kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    source = ASTSource(fn, signature, constexprs, attrs)
    key = f"{target.arch}:{source.hash()}:{sorted(options.__dict__.items())!r}"
    return _Job(source, options.__dict__, key, target, request.case)


def _shared_only_cache_key(source, options: dict, backend) -> str:
    """The hash triton.compile names its cache entry by, for this compile through the cut pipeline; "" on a
    Triton that names it otherwise (then no record answers it and none keeps it)."""
    try:
        from triton.compiler.compiler import get_cache_invalidating_env_vars, get_cache_key
    except ImportError:
        return ""
    parsed = backend.parse_options(dict(options, **source.parse_options()))
    key = get_cache_key(source, backend, parsed, get_cache_invalidating_env_vars()) + SHARED_ONLY_KEY
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _allocation_passes():
    """Triton's passes up to and including the shared-memory allocation, in make_llir's order
    (None when this Triton lacks one of them: then every compile is a full one)."""
    try:
        from triton._C.libtriton import nvidia, passes
        return (passes.ttgpuir.add_combine_tensor_select_and_if, passes.ttgpuir.add_allocate_warp_groups,
                passes.convert.add_scf_to_cf, passes.gluon.add_inliner,
                nvidia.passes.ttgpuir.add_allocate_shared_memory_nv)
    except (ImportError, AttributeError):
        return None


def _allocate_shared_memory(module, metadata: dict, backend, options, capability: int) -> str:
    """The LLVM stage cut after the allocation: the metadata make_llir would have set for shared memory
    and warps, and no LLVM IR."""
    from triton._C.libtriton import ir
    from triton.backends.nvidia.compiler import get_ptx_version_from_options

    combine, warp_groups, scf_to_cf, inliner, allocate = _allocation_passes()
    manager = ir.pass_manager(module.context)
    combine(manager)
    warp_groups(manager, False)
    scf_to_cf(manager)
    inliner(manager)
    allocate(manager, capability, get_ptx_version_from_options(options, backend.target.arch))
    manager.run(module, "vllm_turing_allocate_shared_memory")
    warps = module.get_int_attr("ttg.total-num-warps")
    if warps is not None:
        metadata["num_warps"] = warps
    metadata["shared"] = module.get_int_attr("ttg.shared")
    metadata["name"] = "shared_memory_only"
    return ""


def _shared_only_stages(*args):
    """Triton's add_stages_inspection_hook: called bare for a cache key, else with the stages to edit."""
    if not args:
        return SHARED_ONLY_KEY, SHARED_ONLY_KEY
    backend, stages, options, _language, capability = args
    stages["llir"] = lambda module, metadata: _allocate_shared_memory(module, metadata, backend, options, capability)
    stages.pop("ptx", None)
    stages["cubin"] = lambda _llir, _metadata: b""  # CompiledKernel requires a binary; there is none


def default_mode() -> str:
    return SHARED_ONLY if _allocation_passes() is not None else FULL


# Results of this process by mode and compile key: a launch compiled for the fit table is not
# compiled again when the check meets it.
_DONE: dict[tuple[str, str], CompileResult] = {}
# Per kernel and target capability, the shared-memory-only compile of largest need so far: what
# cross_check() compiles in full.
_WITNESSES: dict[tuple[str, int], tuple[int, _Job]] = {}
# Filled before the worker pool forks, so workers find the jobs without pickling Triton objects.
_JOBS: list[_Job] = []
_MODE = [FULL]
# Every compile this process ran or took from the record (mode RECORDED), in order, for the cost breakdown
# (bench/fitcheck) and the build's progress.
LEDGER: list[Compiled] = []
# The record's answers this process may take, by cache key (use_record), and every shared-memory-only
# answer it gave, compiled or recorded: what the next record holds.
_RECORD: dict[str, Answer] = {}
RECORDABLE: dict[str, Answer] = {}


def compiles_by_mode() -> Counter:
    """How many compiles of LEDGER each mode has (RECORDED, SHARED_ONLY, FULL; 0 for one it lacks)."""
    return Counter(entry.mode for entry in LEDGER)


def use_record(answers: dict) -> None:
    """Answers (contract.compile_record.usable_answers) that stand for shared-memory-only compiles from now on."""
    _RECORD.clear()
    _RECORD.update(answers)


def take_record(record: Record | None, versions: dict) -> tuple[int, str | None]:
    """Hands this process's compiles the answers of `record` when these vLLM and Triton `versions` wrote it:
    (the answers taken, why none were)."""
    answers, why_not = usable_answers(record, versions, SHARED_ONLY_KEY)
    use_record(answers)
    return len(answers), why_not


def _recorded(answer) -> CompileResult:
    return CompileResult(answer.shared, answer.num_warps, answer.num_stages, answer.error)


def _answer(job: _Job, cc: int, result: CompileResult) -> Answer:
    return Answer(job.kernel, cc, result.shared, result.num_warps, result.num_stages, result.error)


@contextlib.contextmanager
def compile_mode(mode: str):
    """Compiles in `mode` (SHARED_ONLY or FULL) for the duration."""
    saved = _MODE[0]
    _MODE[0] = mode
    try:
        yield
    finally:
        _MODE[0] = saved


def _compile_one(index: int) -> CompileResult:
    job = _JOBS[index]
    if _MODE[0] != SHARED_ONLY:
        return _compile(job, None)
    result = _compile(job, _shared_only_stages)
    # A failure is judged by Triton's whole pipeline, as without the cut: the same error for a launch
    # that does not compile, the right number where the cut itself failed (a Triton it does not fit).
    return result if result.error is None else _compile(job, None)


def _compile(job: _Job, hook) -> CompileResult:
    import triton
    from triton import knobs

    from patches.fitcheck.swap_and_write import swapped

    started = time.process_time()
    try:
        with swapped(knobs.runtime, "add_stages_inspection_hook", hook):
            compiled = triton.compile(job.source, target=job.target, options=job.options)
    except Exception as error:  # a compile error is a finding about this launch, not a crash
        first_line = (str(error).strip().splitlines() or [""])[0]
        return CompileResult(None, None, None, f"{type(error).__name__}: {first_line}"[:300],
                             cpu_s=time.process_time() - started)
    metadata = compiled.metadata
    return CompileResult(metadata.shared, metadata.num_warps, metadata.num_stages,
                         cpu_s=time.process_time() - started)


def _compile_jobs(jobs: list[_Job], workers: int | None) -> list[CompileResult]:
    from patches.fitcheck import progress

    _JOBS[:] = jobs
    workers = min(len(_JOBS), workers or os.cpu_count() or 1)
    shown = progress.current()
    try:
        if workers <= 1:
            return _collected(map(_compile_one, range(len(_JOBS))), len(_JOBS), shown)
        # Frozen, the parent's objects are out of the workers' garbage collections, which would
        # otherwise touch (and so copy) every page of the forked heap.
        gc.freeze()
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return _collected(pool.imap(_compile_one, range(len(_JOBS)), chunksize=1), len(_JOBS), shown)
    finally:
        gc.unfreeze()
        _JOBS.clear()


def _collected(results, total: int, shown) -> list[CompileResult]:
    """The results in order, each one reported to the build's progress (when it is on) as it arrives."""
    collected = []
    for result in results:
        collected.append(result)
        if shown:
            shown.compiled(len(collected), total)
    return collected


def compile_launches(requests: list[tuple], cc: int, workers: int | None = None) -> list[CompileResult]:
    """requests: Requests, or their first three fields as a tuple. One result per request."""
    target, backend = _target_and_backend(cc)
    mode = _MODE[0]
    prepared = [_prepare(Request(*request), target, backend) for request in requests]
    fresh: dict[str, _Job] = {}  # one job per key this process has not answered in this mode
    for job in prepared:
        if (mode, job.key) not in _DONE:
            fresh.setdefault(job.key, job)
    jobs: dict[str, _Job] = {}
    for job in fresh.values():
        # Triton's cache key is hashed once per new key, not per request: a pass repeats most of its keys
        job.cache_key = _shared_only_cache_key(job.source, job.options, backend) if mode == SHARED_ONLY else ""
        if job.cache_key and job.cache_key in _RECORD:
            result = _DONE[mode, job.key] = _recorded(_RECORD[job.cache_key])
            LEDGER.append(Compiled(RECORDED, cc, job.kernel, result, job.case))
        else:
            jobs[job.key] = job
    results = _compile_jobs(list(jobs.values()), workers)
    for job, result in zip(jobs.values(), results):
        _DONE[mode, job.key] = result
        LEDGER.append(Compiled(mode, cc, job.kernel, result, job.case))
    for job in fresh.values():  # an answer given earlier in this process is already kept
        if job.cache_key:
            RECORDABLE[job.cache_key] = _answer(job, cc, _DONE[mode, job.key])
    # Witnesses from every request, compiled now or earlier in this process (an earlier check of the
    # image build's passes), so each check cross-checks the kernels it met.
    for job in prepared:
        result = _DONE[mode, job.key]
        if mode == SHARED_ONLY and result.shared is not None:
            largest = _WITNESSES.get((job.kernel, cc))
            if largest is None or result.shared > largest[0]:
                _WITNESSES[job.kernel, cc] = (result.shared, job)
    return [_DONE[mode, job.key] for job in prepared]


def cross_check(workers: int | None = None) -> list[dict]:
    """Compiles in full, per kernel and target capability, the shared-memory-only compile of largest need
    since the last call (one batch whatever the targets); [{kernel, cc, shared}] when every number agrees,
    else a Problem naming the kernel. The image's passes call it once, after all of them: a kernel
    checked in fp16 and bf16 on one target is compiled in full once, at its larger need."""
    witnesses = sorted(_WITNESSES.items())
    _WITNESSES.clear()
    if not witnesses:
        return []
    with compile_mode(FULL):
        results = _compile_jobs([job for _, (_, job) in witnesses], workers)
    checked = []
    for ((kernel, cc), (quick, job)), full in zip(witnesses, results):
        _DONE[FULL, job.key] = full
        LEDGER.append(Compiled(FULL, cc, kernel, full, job.case))
        if full.shared != quick:
            found = f"{full.shared} bytes" if full.error is None else f"an error ({full.error})"
            raise Problem(f"{kernel} (cc {cc}): the shared-memory-only compile says {quick} bytes, Triton's "
                                f"full compile {found}; this Triton lowers otherwise than the check assumes: run "
                                "the check with --full-compile")
        checked.append({"kernel": kernel, "cc": cc, "shared": quick})
    return checked
