"""Runs vLLM's real attention launchers on CPU tensors and records the kernel launches they make:
unified_attention() for decoder layers, context_attention_fwd() for encoder (bidirectional) layers.

Nothing runs on a GPU: the launched kernel objects are swapped for recorders, and the device
the launcher consults (capability, shared-memory limit) is simulated at the edge.
"""
from __future__ import annotations

from door.problem import Problem
import atexit
import contextlib
import importlib
import importlib.util
import inspect
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from contract import clamp_paths as layout
from patches.fitcheck.attention import CONTEXT_LEN, ENCODER, ENCODER_KINDS, Case
from patches.fitcheck.swap_and_write import swapped  # noqa: F401 (tooling takes it from here too)

LAUNCHER_MODULE = "vllm.v1.attention.ops.triton_unified_attention"
# Kernel objects the launcher indexes with a grid, across releases 0.19 to 0.33.
LAUNCHED_KERNELS = (
    "kernel_unified_attention",
    "kernel_unified_attention_2d",
    "kernel_unified_attention_3d",
    "reduce_segments",
)
ENCODER_MODULE = "vllm.v1.attention.ops.triton_prefill_attention"
ENCODER_KERNELS = ("_fwd_kernel",)  # what context_attention_fwd launches, releases 0.19 to 0.33
NUM_PAR_SOFTMAX_SEGMENTS = 16  # vLLM's Triton backend
# The clamp caches decisions and tables per process, keyed without the limit: a new
# simulated device must start from nothing.
CLAMP_CACHES = ("_vllm_turing_clamp_cache", "_vllm_turing_fit_tables", "_vllm_turing_stepped",
                "_vllm_turing_decode_tile")
# What recording cost, for the breakdown by family (bench/fitcheck): (shape, wall seconds) per recorded case of
# an attention launcher and per mixer or latent shape its family recorded, in order.
RECORDING: list[tuple[object, float]] = []


@dataclass
class Launch:
    """One recorded kernel launch: the kernel, its grid, arguments by name, launch options."""

    case: Case  # or op_recording.MixerCase
    kernel_name: str
    fn: object  # triton JITFunction
    grid: tuple
    params: dict
    options: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        if getattr(getattr(self.case, "shape", None), "mixer", None):
            return "mamba"  # a Mamba-2 mixer's kernel (families/mamba2/launches.py)
        if self.kernel_name in ENCODER_KERNELS:
            return "encoder"
        if self.kernel_name == "reduce_segments":
            return "reduce"
        if self.kernel_name.endswith("_3d") or self.params.get("IS_3D"):
            return "3d"
        return "2d"

    @property
    def tile(self):
        """The tile the clamp sizes: TILE_SIZE of the unified kernels; BLOCK_N of the encoder kernel,
        whose BLOCK_M the clamp sets to the same value (vLLM's BLOCK)."""
        return self.param("BLOCK_N" if self.path == "encoder" else "TILE_SIZE")

    def retiled(self, tile: int) -> dict:
        """The launch's arguments at another tile (for the encoder kernel, BLOCK_M and BLOCK_N)."""
        if self.path == "encoder":
            return dict(self.params, BLOCK_M=tile, BLOCK_N=tile)
        return dict(self.params, TILE_SIZE=tile)

    def param(self, name):
        value = self.params.get(name)
        return getattr(value, "value", value)  # tl.constexpr defaults


def prepare_cpu_host() -> None:
    """vLLM disables Triton when no GPU driver is active unless CUDA_VISIBLE_DEVICES is ''."""
    if "CUDA_VISIBLE_DEVICES" not in os.environ and not os.path.exists("/dev/nvidiactl"):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def installed_launcher(name: str = LAUNCHER_MODULE):
    """The launcher module vLLM serves with (patched or not): the unified one, or ENCODER_MODULE."""
    prepare_cpu_host()
    try:
        module = importlib.import_module(name)
    except Exception as error:  # any import failure of vLLM is one line for the user
        raise Problem(
            f"cannot import {name} ({type(error).__name__}: {error}); "
            "run the fit check inside the vLLM image"
        ) from None
    _require_real_triton(module)
    return module


_scratch_dirs: list[str] = []


def remove_scratch() -> None:
    """Removes the launchers' scratch folders: at exit, and in a forked child (which ends without
    running atexit's functions) before it ends."""
    for directory in _scratch_dirs:
        shutil.rmtree(directory, ignore_errors=True)
    _scratch_dirs.clear()


def launcher_from_source(source: str, name: str = "vllm_turing_unpatched_attention"):
    """Executes a launcher's source as a separate module (Triton reads kernel source from file)."""
    prepare_cpu_host()
    directory = tempfile.mkdtemp(prefix="vllm-turing-launcher-")
    if not _scratch_dirs:
        atexit.register(remove_scratch)
    _scratch_dirs.append(directory)
    path = Path(directory) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise Problem(
            f"cannot execute the launcher source as {name} ({type(error).__name__}: {error}); "
            "it must be a triton_unified_attention.py of the installed vLLM's release line"
        ) from None
    _require_real_triton(module)
    return module


def _kernel_names(module) -> tuple:
    return ENCODER_KERNELS if hasattr(module, "context_attention_fwd") else LAUNCHED_KERNELS


def _require_real_triton(module) -> None:
    kernels = [getattr(module, name) for name in _kernel_names(module) if hasattr(module, name)]
    if not kernels or not all(hasattr(k, "arg_names") for k in kernels):
        raise Problem(
            f"{module.__name__} has no Triton kernels (vLLM disabled Triton on this host); "
            "set CUDA_VISIBLE_DEVICES= (empty) on hosts without a GPU"
        )


@contextlib.contextmanager
def _environment(values: dict):
    saved = {name: os.environ.get(name) for name in values}
    try:
        os.environ.update({name: value for name, value in values.items() if value is not None})
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def simulated_device(module, cc: int, limit: int, fit_table: str | None = None):
    """The launcher in `module` sees compute capability `cc` and `limit` bytes of shared
    memory per block (and the clamp, if present, the fit table at `fit_table`), on a CUDA device.

    vLLM's platform object answers capability questions; its class methods are replaced for
    the duration (subclass overrides that would ask NVML included) and restored afterwards. On a
    build host without a GPU it is vLLM's UnspecifiedPlatform, so the device is also made CUDA
    (`is_cuda_alike`, `is_cuda`: the encoder launcher's tile follows them) and not ROCm.
    """
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability, Platform

    platform_cls = type(current_platform)
    capability = DeviceCapability(cc // 10, cc % 10)
    replacements = {"get_device_capability": classmethod(lambda cls, device_id=0: capability),
                    "is_cuda_alike": lambda self: True, "is_cuda": lambda self: True,
                    "is_rocm": lambda self: False}
    for name in ("has_device_capability", "is_device_capability", "is_device_capability_family"):
        if name in Platform.__dict__:
            replacements[name] = Platform.__dict__[name]
    saved = {name: platform_cls.__dict__.get(name) for name in replacements}
    # What the clamp reads where no CUDA device answers (patches/turing_clamp/runtime.py).
    environment = {layout.ENV_SMEM_LIMIT: str(limit), layout.ENV_CC: str(cc), layout.ENV_FIT_TABLE: fit_table}
    try:
        for name, value in replacements.items():
            setattr(platform_cls, name, value)
        for name in CLAMP_CACHES:
            getattr(module, name, {}).clear()
        with _environment(environment):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(platform_cls, name)
            else:
                setattr(platform_cls, name, value)
        for name in CLAMP_CACHES:
            getattr(module, name, {}).clear()


def _clamp_table(fit_table: str | None) -> dict | None:
    """The fit table the clamp reads (None when there is none)."""
    from patches.fitcheck import fit_table as table_

    path = Path(fit_table or os.environ.get(layout.ENV_FIT_TABLE) or layout.FIT_TABLE)
    return table_.read_table(path, f"${layout.ENV_FIT_TABLE}")


def device_judge(cc: int, limit: int, fit_table: str | None):
    """What the simulated device does at launch, as Triton does on a real one before the kernel
    runs: raise OutOfResources when the compiled kernel needs more than `limit`. The need is the
    fit table's (the one the clamp reads) where it holds the launch, else the compiler's for `cc`."""
    from triton.runtime.errors import OutOfResources

    from patches.fitcheck import fit_table as table_
    from patches.fitcheck.compiler import compile_launches

    document = _clamp_table(fit_table)

    def judge(launch: Launch) -> None:
        shared = table_.known_needs([launch], cc, document)[0] if document else None
        if shared is None:
            shared = compile_launches([(launch.fn, launch.params, launch.options, launch.case)], cc, 1)[0].shared
        if shared is not None and shared > limit:
            error = OutOfResources(shared, limit, "shared memory")
            error.launch = launch
            raise error

    return judge


def _compile_ahead(launches: list[Launch], cc: int, fit_table: str | None, workers: int | None) -> None:
    """Compiles, in parallel, the launches the judge would otherwise compile one at a time: those of
    a recording without the judge that the fit table lacks. The judge then finds them compiled
    (compiler.compile_launches keeps each result); a launch a refusal adds is compiled by the judge
    itself. (Serial, the judge's compiles took half of a cold sm_86 pass on two cores.)"""
    from patches.fitcheck import fit_table as table_
    from patches.fitcheck.compiler import compile_launches

    document = _clamp_table(fit_table)
    known = table_.known_needs(launches, cc, document) if document else [None] * len(launches)
    compile_launches([(launch.fn, launch.params, launch.options, launch.case)
                      for launch, shared in zip(launches, known) if shared is None], cc, workers)


class _Recorder:
    """Stands where a launched kernel stands: `kernel[grid](...)` records instead of running
    (and, with a judge, refuses what the simulated device would)."""

    def __init__(self, name: str, fn, sink: list, judge=None):
        self.name, self.fn, self.sink, self.judge = name, fn, sink, judge
        self.signature = inspect.signature(fn.fn)
        self.case = None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            options = {k: kwargs.pop(k) for k in list(kwargs) if k not in self.signature.parameters}
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            grid_ = grid if callable(grid) else tuple(grid)  # a grid function (META) is kept as is
            recorded = Launch(self.case, self.name, self.fn, grid_, dict(bound.arguments), options)
            if self.judge is not None:
                self.judge(recorded)
            self.sink.append(recorded)

        return launch


@contextlib.contextmanager
def recording(module, judge=None):
    """Swaps the module's launched kernels for recorders; yields (recorders, launches list)."""
    launches: list[Launch] = []
    # The clamp routes kernels it guards through a wrapper that names the kernel it wraps.
    originals = {name: getattr(getattr(module, name), "_vllm_turing_kernel", getattr(module, name))
                 for name in _kernel_names(module) if hasattr(module, name)}
    recorders = [_Recorder(name, fn, launches, judge) for name, fn in originals.items()]
    try:
        for recorder in recorders:
            setattr(module, recorder.name, recorder)
        yield recorders, launches
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)


def release_features(module) -> dict:
    """What this release's launcher accepts, for building the matrix."""
    parameters = inspect.signature(module.unified_attention).parameters
    return {"mm_prefix": "mm_prefix_range" in parameters}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def case_arguments(case: Case, dtype_name: str = "float16") -> dict:
    """unified_attention() keyword arguments for a case, shaped as vLLM's Triton backend passes
    them (KV cache view of [blocks, kv_heads, block, 2*head], split-K scratch buffers)."""
    import torch

    shape = case.shape
    dtype = getattr(torch, dtype_name)
    tokens = case.num_seqs * case.query_len
    seq_len = CONTEXT_LEN + case.query_len
    blocks_per_seq = _cdiv(seq_len, shape.block_size)
    num_blocks = case.num_seqs * blocks_per_seq + 1
    head_padded = 1 << (shape.head_size - 1).bit_length()

    kv_cache = torch.empty(num_blocks, shape.num_kv_heads, shape.block_size, 2 * shape.head_size, dtype=dtype)
    key_cache, value_cache = kv_cache.transpose(1, 2).split(shape.head_size, dim=-1)
    descale = torch.ones(1, dtype=torch.float32).expand(case.num_seqs, shape.num_kv_heads)
    window = shape.sliding_window
    arguments = dict(
        q=torch.empty(tokens, shape.num_query_heads, shape.head_size, dtype=dtype),
        k=key_cache,
        v=value_cache,
        out=torch.empty(tokens, shape.num_query_heads, shape.head_size, dtype=dtype),
        cu_seqlens_q=torch.arange(case.num_seqs + 1, dtype=torch.int32) * case.query_len,
        max_seqlen_q=case.query_len,
        seqused_k=torch.full((case.num_seqs,), seq_len, dtype=torch.int32),
        max_seqlen_k=seq_len,
        softmax_scale=shape.head_size**-0.5,
        causal=True,
        window_size=(window - 1, 0) if window else (-1, -1),
        block_table=torch.arange(case.num_seqs * blocks_per_seq, dtype=torch.int32).view(case.num_seqs, -1),
        softcap=shape.softcap,
        q_descale=None,
        k_descale=descale,
        v_descale=descale,
        seq_threshold_3D=shape.seq_threshold_3d,
        num_par_softmax_segments=NUM_PAR_SOFTMAX_SEGMENTS,
        softmax_segm_output=torch.empty(tokens, shape.num_query_heads, NUM_PAR_SOFTMAX_SEGMENTS, head_padded),
        softmax_segm_max=torch.empty(tokens, shape.num_query_heads, NUM_PAR_SOFTMAX_SEGMENTS),
        softmax_segm_expsum=torch.empty(tokens, shape.num_query_heads, NUM_PAR_SOFTMAX_SEGMENTS),
        sinks=None,
    )
    if case.mm_prefix:
        # One bidirectional image span per sequence: [seqs, ranges, (start, end)].
        arguments["mm_prefix_range"] = torch.tensor([[[0, 8]]] * case.num_seqs, dtype=torch.int32)
        arguments["mm_prefix_clamp_sliding_window"] = window is not None
    return arguments


def encoder_arguments(case: Case, dtype_name: str = "float16") -> dict:
    """context_attention_fwd() keyword arguments for an encoder case, as vLLM's callers pass them:
    the Triton backend's encoder path (window (w - 1, w - 1), or (-1, -1) without one) for ENCODER
    layers, the multimodal wrapper (vit_attn_wrappers: no window) for MM_ENCODER ones."""
    import torch

    shape = case.shape
    dtype = getattr(torch, dtype_name)
    tokens = case.num_seqs * case.query_len
    q = torch.empty(tokens, shape.num_query_heads, shape.head_size, dtype=dtype)
    k = torch.empty(tokens, shape.num_kv_heads, shape.head_size, dtype=dtype)
    starts = torch.arange(case.num_seqs + 1, dtype=torch.int32) * case.query_len
    if shape.attention == ENCODER:
        window = shape.sliding_window
        windows = (window - 1, window - 1) if window else (-1, -1)
    else:
        windows = (None, None)
    return dict(q=q, k=k, v=torch.empty_like(k), o=torch.empty_like(q), b_start_loc=starts[:-1],
                b_seq_len=starts[1:] - starts[:-1], max_input_len=case.query_len, is_causal=False,
                softmax_scale=shape.head_size**-0.5, sliding_window_q=windows[0], sliding_window_k=windows[1],
                sinks=None)


def record_launches(module, cases: list[Case], cc: int, limit: int, fit_table: str | None = None,
                    device_errors: bool = False, encoder=None, dtype: str = "float16",
                    workers: int | None = None) -> list[Launch]:
    """Calls the module's unified_attention() once per decoder case, and the `encoder` module's
    context_attention_fwd() once per encoder case, under the simulated device (decoder launches
    first). With device_errors the device refuses a launch that needs more than `limit`
    (device_judge); a refusal the launcher does not handle ends that case, its launch recorded for
    the verdict."""
    from triton.runtime.errors import OutOfResources

    judge = None
    if device_errors:
        _compile_ahead(record_launches(module, cases, cc, limit, fit_table, encoder=encoder, dtype=dtype),
                       cc, fit_table, workers)
        judge = device_judge(cc, limit, fit_table)
    decoder_cases = [case for case in cases if case.kind not in ENCODER_KINDS]
    encoder_cases = [case for case in cases if case.kind in ENCODER_KINDS]
    launches: list[Launch] = []
    for launcher, entry, own_cases in ((module, "unified_attention", decoder_cases),
                                       (encoder, "context_attention_fwd", encoder_cases)):
        if not own_cases:
            continue
        if launcher is None:
            raise Problem(f"encoder cases need {ENCODER_MODULE}; none was loaded")
        accepted = inspect.signature(getattr(launcher, entry)).parameters
        with simulated_device(launcher, cc, limit, fit_table):
            with recording(launcher, judge) as (recorders, recorded):
                for case in own_cases:
                    started = time.monotonic()
                    _record_case(launcher, entry, case, recorders, recorded, accepted, OutOfResources, dtype)
                    RECORDING.append((case.shape, time.monotonic() - started))
        launches += recorded
    return launches


def _record_case(module, entry: str, case: Case, recorders, launches: list, accepted, refused,
                 dtype: str = "float16") -> None:
    for recorder in recorders:
        recorder.case = case
    build = encoder_arguments if case.kind in ENCODER_KINDS else case_arguments
    arguments = {k: v for k, v in build(case, dtype).items() if k in accepted}
    try:
        getattr(module, entry)(**arguments)
    except refused as error:
        if not hasattr(error, "launch"):
            raise
        launches.append(error.launch)
    except Exception as error:
        raise Problem(
            f"{module.__name__}.{entry}() failed on {case.shape.label} {case.kind} "
            f"(query_len {case.query_len}): {type(error).__name__}: {error}"
        ) from None
