"""Compiles recorded launches for a GPU the host does not have and reads their shared memory.

Each launch is turned into a compile exactly as Triton's own JIT does at launch time (its
binder for signature, constexprs and specialization attributes; its option parsing), then
`triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`. Identical compiles run once;
distinct ones run in forked worker processes. Triton's on-disk cache makes reruns cheap.
"""
from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass

WARP_SIZE = 32


@dataclass(frozen=True)
class CompileResult:
    shared: int | None  # bytes of shared memory per block; None when the compile failed
    num_warps: int | None  # what Triton compiled with (its default when the launch passed none)
    num_stages: int | None
    error: str | None = None


@dataclass
class _Job:
    source: object  # triton ASTSource
    options: dict
    key: str


def _target(cc: int):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", cc, WARP_SIZE)


def _prepare(fn, params: dict, launch_options: dict, target, backend) -> _Job:
    """What JITFunction.run computes before compiling, for these arguments on `target`."""
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature

    kwargs = dict(params, **launch_options)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(**kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    source = ASTSource(fn, signature, constexprs, attrs)
    key = f"{target.arch}:{source.hash()}:{sorted(options.__dict__.items())!r}"
    return _Job(source, options.__dict__, key)


# Results of this process by compile key: a launch compiled for the fit table is not
# compiled again when the check meets it.
_DONE: dict[str, CompileResult] = {}
# Filled before the worker pool forks, so workers find the jobs without pickling Triton objects.
_JOBS: list[_Job] = []
_TARGET = None


def _compile_one(index: int) -> CompileResult:
    import triton

    job = _JOBS[index]
    try:
        compiled = triton.compile(job.source, target=_TARGET, options=job.options)
    except Exception as error:  # a compile error is a finding about this launch, not a crash
        first_line = (str(error).strip().splitlines() or [""])[0]
        return CompileResult(None, None, None, f"{type(error).__name__}: {first_line}"[:300])
    metadata = compiled.metadata
    return CompileResult(metadata.shared, metadata.num_warps, metadata.num_stages)


def compile_launches(requests: list[tuple], cc: int, workers: int | None = None) -> list[CompileResult]:
    """requests: (JITFunction, params by name, launch options). One result per request."""
    global _TARGET
    from triton.compiler.compiler import make_backend

    target = _target(cc)
    backend = make_backend(target)
    keys = []
    jobs: dict[str, _Job] = {}
    for fn, params, launch_options in requests:
        job = _prepare(fn, params, launch_options, target, backend)
        keys.append(job.key)
        if job.key not in _DONE:
            jobs.setdefault(job.key, job)

    _JOBS[:] = jobs.values()
    _TARGET = target
    workers = min(len(_JOBS), workers or os.cpu_count() or 1)
    try:
        if workers <= 1:
            results = [_compile_one(i) for i in range(len(_JOBS))]
        else:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                results = pool.map(_compile_one, range(len(_JOBS)), chunksize=1)
    finally:
        _JOBS.clear()
    _DONE.update(zip(jobs, results))
    return [_DONE[key] for key in keys]
