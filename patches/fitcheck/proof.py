"""One fit check: options resolved once into a plan, then launches recorded, compiled and judged."""
from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass
from pathlib import Path

from contract import clamp_paths as layout, compile_record
from contract.compile_record import Record
from contract.devices import DEVICES
from patches.fitcheck import attention as shapes_, families, fit_report as report_
from contract.model_config import ConfigProblem
from patches.fitcheck.family import DEFAULT_DTYPE, DTYPES, TENSOR_PARALLEL_SIZES, UnprovenLayers
from door import files
from door.problem import Problem, UsageError


@dataclass
class FitOptions:
    device: str | None = "sm75"
    cc: int | None = None
    limit: int | None = None
    model_config: str | None = None
    compare_unpatched: bool = False
    write_table: str | None = None
    workers: int | None = None
    launcher: str | None = None  # another release's triton_unified_attention.py
    known_table: str | None = None  # a fit table whose entries stand in for compiles
    matrix: str = "all"  # without model_config: families.MATRICES
    tensor_parallel: int = 1  # with model_config: check one rank's shapes of this tensor-parallel size
    full_compile: bool = False  # compile to cubin instead of up to the shared-memory allocation (compiler.py)
    dtype: str = DEFAULT_DTYPE  # the activations' dtype of the recorded launches (family.DTYPES)
    compile_record: str | None = None  # a compile record whose answers stand for the same compiles


def resolve_device(options: FitOptions) -> dict:
    """{name, cc, limit} from a preset, overridden by --cc / --limit."""
    if options.device is not None and options.device not in DEVICES:
        raise UsageError(f"--device {options.device!r} is unknown; use one of {', '.join(DEVICES)} "
                         "or give --cc and --limit")
    cc, limit = DEVICES.get(options.device, (None, None))
    cc = options.cc if options.cc is not None else cc
    limit = options.limit if options.limit is not None else limit
    if cc is None or limit is None:
        raise UsageError("no device: pass --device NAME, or both --cc N and --limit BYTES")
    if cc < 70 or limit <= 0:
        raise UsageError(f"cc {cc} / limit {limit}: expected cc >= 70 (Volta and newer) and limit > 0 bytes")
    name = options.device if options.cc is None and options.limit is None else f"sm{cc}"
    return {"name": name, "cc": cc, "limit": limit}


def check_combination(options: FitOptions) -> None:
    """Options that cannot go together (UsageError)."""
    if options.known_table and options.write_table:
        raise UsageError("--known-table and --write-table exclude each other: the table is written from "
                         "compiles, so pass only --write-table")
    if options.compile_record and options.full_compile:
        raise UsageError("--compile-record answers compiles cut at the shared-memory allocation, and --full-compile "
                         "compiles everything in full: leave out one of them")
    if options.known_table and options.launcher:
        raise UsageError("--known-table holds the installed launcher's needs, not those of --launcher FILE; "
                         "leave out --known-table")


def resolve_shapes(options: FitOptions, cc: int) -> list:
    if options.matrix not in families.MATRICES:
        raise UsageError(f"--matrix {options.matrix!r} is unknown; use one of {', '.join(families.MATRICES)}")
    if options.dtype not in DTYPES:
        raise UsageError(f"--dtype {options.dtype!r} is unknown; use one of {', '.join(DTYPES)}")
    if options.tensor_parallel < 1:
        raise UsageError(f"--tensor-parallel-size {options.tensor_parallel}: expected a positive integer")
    if options.model_config:
        path = Path(options.model_config)
        config, model = shapes_.read_config(path), path.parent.name or path.stem
        refusal = families.config_refused_on(config, model, str(path), options.tensor_parallel, cc)
        if refusal is not None:
            raise ConfigProblem(f"{refusal.reason}: {refusal.fix}")
        return families.model_layers(config, model, str(path), options.tensor_parallel, options.dtype)
    if options.tensor_parallel != 1:
        raise UsageError("--tensor-parallel-size goes with --model-config; the built-in matrix already holds "
                         f"tensor parallel {', '.join(map(str, TENSOR_PARALLEL_SIZES))}")
    return families.builtin_shapes(options.matrix, options.dtype)


def _versions() -> dict:
    import triton

    try:
        vllm_version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        vllm_version = "unknown"
    return {"vllm": vllm_version, "triton": triton.__version__}


def _unpatched_launcher(launcher, name: str = "vllm_turing_unpatched_attention"):
    """The launcher with the clamp taken out (itself when it carries none)."""
    from patches.fitcheck.recorder import launcher_from_source
    from patches.turing_clamp import strip_clamp

    source = files.read_own(Path(launcher.__file__))
    unpatched = strip_clamp(source)
    return launcher if unpatched == source else launcher_from_source(unpatched, name)


def _encoder_launcher(shapes) -> object | None:
    """The installed encoder launcher (context_attention_fwd) when a shape is an encoder layer."""
    from patches.fitcheck.recorder import ENCODER_MODULE, installed_launcher

    if not any(shape.attention in shapes_.ENCODER_KINDS for shape in shapes):
        return None
    return installed_launcher(ENCODER_MODULE)


def _launcher(options: FitOptions):
    from patches.fitcheck.recorder import installed_launcher, launcher_from_source

    if not options.launcher:
        return installed_launcher()
    try:
        source = files.read_text(options.launcher, f"--launcher {options.launcher}", 16 * files.MiB)
    except Problem as problem:
        raise UsageError(f"{problem}; pass a triton_unified_attention.py") from None
    installed_launcher()  # vLLM's own modules first, as the file imports them
    return launcher_from_source(source, "vllm_turing_checked_attention")


def _write_fit_table(path: Path, default_launches: list, device: dict, versions: dict, workers) -> dict:
    from patches.fitcheck import fit_table as table_
    from patches.fitcheck.compiler import compile_launches

    existing = table_.read_table(path)
    entries = table_.tile_search(default_launches, device["cc"], device["limit"],
                                 lambda requests: compile_launches(requests, device["cc"], workers))
    document = table_.merge(existing, entries, versions)
    table_.write_table(path, document)
    stale = table_.table_mismatch(existing, versions) if existing is not None else None
    return {"path": str(path), "entries_written": len(entries), "entries": len(document["entries"]),
            "started_fresh_because": stale}


def _write_verdicts(path: Path, rows: list[dict], shapes, device: dict, versions: dict,
                    entries: list[dict], mixer_rows: list[dict], mixer_shapes, dtype: str) -> int:
    """Records this run's verdict per layer shape and per mixer shape (lookup.py reads them) and the
    clamped launches' own needs in the table just written."""
    from patches.fitcheck import fit_table as table_

    verdicts = table_.shape_verdicts(rows, shapes, device["cc"], device["limit"], dtype)
    mixer_verdicts = table_.shape_verdicts(mixer_rows, mixer_shapes, device["cc"], device["limit"], dtype)
    table_.write_table(path, table_.merge(table_.read_table(path), entries, versions, verdicts, mixer_verdicts))
    return len(verdicts) + len(mixer_verdicts)


def _mixer_rows(mixer_shapes, cc: int, limit: int, workers, dtype: str) -> list[dict]:
    """The report rows of the hybrids' mixers: one per plain launch and per autotuned call. A gated delta
    net or KDA layer (FLA's kernels) is refused (a Problem) on a host whose FLA import-time choices are not
    the device's."""
    if not mixer_shapes:
        return []
    from patches.fitcheck import op_recording
    from patches.fitcheck.families.gated_delta_net import launches as fla_launches

    fla = [shape for shape in mixer_shapes if families.family_of(shape).host_dependent]
    differ = fla_launches.host_choices_differ(cc, limit) if fla else []
    if differ:
        raise Problem(f"{fla[0].label}: this host decides FLA's kernels otherwise than cc {cc} at "
                      f"{limit} bytes does ({differ[0]}); run the check on a host without a GPU, as the build does")

    from patches.fitcheck.recorder import RECORDING

    launches = []
    for shape in mixer_shapes:
        started = time.monotonic()
        launches += families.record(shape, cc, limit, dtype)
        RECORDING.append((shape, time.monotonic() - started))
    return [dict(report_.launch_row(launch, result, limit), autotune=autotune)
            for launch, result, autotune in op_recording.judged(launches, cc, limit, workers)]


def _known_table(options: FitOptions, versions: dict) -> tuple[dict | None, dict | None]:
    """The --known-table document when its numbers hold for these versions (else None), and the
    report's note on it (None without the option)."""
    from patches.fitcheck import fit_table as table_

    if not options.known_table:
        return None, None
    path = Path(options.known_table)
    document = table_.read_table(path, "--known-table")
    if document is None:
        raise UsageError(f"--known-table {path}: no such file; pass the image's fit table "
                         f"(${layout.ENV_FIT_TABLE}) or leave the option out")
    mismatch = table_.table_mismatch(document, versions)
    return (document if mismatch is None else None), {"path": str(path), "used": mismatch is None,
                                                      "ignored_because": mismatch}


def _needs(launches: list, cc: int, known: dict | None, workers: int | None) -> list[tuple]:
    """Per launch (CompileResult, source): the known table's number where it has the launch,
    else the compiler's."""
    from patches.fitcheck.compiler import CompileResult, compile_launches
    from patches.fitcheck.fit_table import known_needs

    from_table = known_needs(launches, cc, known) if known else [None] * len(launches)
    missing = [launch for launch, shared in zip(launches, from_table) if shared is None]
    compiled = iter(compile_launches([(l.fn, l.params, l.options, l.case) for l in missing], cc, workers))
    return [(next(compiled), report_.COMPILED) if shared is None
            else (CompileResult(shared, None, None), report_.TABLE)
            for shared in from_table]


@dataclass(frozen=True)
class FitPlan:
    """Options validated and parsed once: the device and the layer shapes to check."""

    options: FitOptions
    device: dict
    shapes: tuple
    record: Record | None = None  # the --compile-record file


def plan(options: FitOptions) -> FitPlan:
    """Validates the options and reads the model config, before vLLM is imported (UsageError /
    ConfigProblem on bad input)."""
    check_combination(options)
    device = resolve_device(options)
    shapes = tuple(resolve_shapes(options, device["cc"]))
    if not options.model_config:  # the built-in matrix holds what vLLM serves on the device: a model with a
        # layer vLLM cannot run there is left out whole (Kimi Linear's KDA beside its latent attention)
        refused = {shape.model for shape in shapes if families.refused_on([shape], device["cc"]) is not None}
        shapes = tuple(shape for shape in shapes if shape.model not in refused)
    refusal = families.refused_on(shapes, device["cc"])
    if refusal is not None:
        raise ConfigProblem(f"{refusal.reason}: {refusal.fix}")
    unrecorded = families.unrecorded_on(shapes, device["cc"])
    if unrecorded:
        raise UnprovenLayers(unrecorded)
    return FitPlan(options, device, shapes, _read_record(options.compile_record))


def _read_record(path: str | None) -> Record | None:
    """The --compile-record file as a Record (a UsageError when it is not one), None without the option."""
    if path is None:
        return None
    record = compile_record.read_record(Path(path))
    if record is None:
        raise UsageError(f"--compile-record {path}: no such file; pass a build's record (the repository keeps "
                         "them in contract/compile-records/) or leave the option out")
    return record


def run(fit: FitPlan, cross_check: bool = True) -> dict:
    """The JSON report (docs/architecture.md). Raises a UsageError on bad input, a Problem for a launcher
    or ops it cannot use or a shared-memory-only compile that disagrees with a full one.
    cross_check=False leaves the full compiles of the largest needs to the caller's one
    compiler.cross_check() after several runs (the image's passes)."""
    from patches.fitcheck import compiler

    mode = compiler.FULL if fit.options.full_compile else compiler.default_mode()
    record = _take_record(fit)
    with compiler.compile_mode(mode):
        report = _checked(fit)
        checked = compiler.cross_check(fit.options.workers) if mode == compiler.SHARED_ONLY and cross_check else []
    report["compile"] = {"mode": mode, "cross_checked": checked}
    if record is not None:
        report["compile"]["record"] = dict(record, answered=compiler.compiles_by_mode()[compiler.RECORDED])
    return report


def _take_record(fit: FitPlan) -> dict | None:
    """Hands the compiler the answers of the plan's compile record when this vLLM and Triton wrote it; the
    report's note on it (None without --compile-record)."""
    from patches.fitcheck import compiler

    if fit.options.compile_record is None:
        return None
    _, why_not = compiler.take_record(fit.record, _versions())
    return {"path": fit.options.compile_record, "used": why_not is None, "ignored_because": why_not}


def _checked(fit: FitPlan) -> dict:
    from patches.fitcheck.recorder import record_launches, release_features

    started = time.monotonic()
    options, device = fit.options, fit.device
    shapes = [shape for shape in fit.shapes if not families.is_mixer(shape)]
    mixer_shapes = [shape for shape in fit.shapes if families.is_mixer(shape)]
    cc, limit = device["cc"], device["limit"]
    installed = _launcher(options)
    encoder = _encoder_launcher(shapes)
    versions = _versions()
    known, known_note = _known_table(options, versions)
    cases = shapes_.build_matrix(shapes, release_features(installed)["mm_prefix"])

    defaults = None
    if options.compare_unpatched or options.write_table:
        unpatched_encoder = encoder and _unpatched_launcher(encoder, "vllm_turing_unpatched_prefill_attention")
        defaults = record_launches(_unpatched_launcher(installed), cases, cc, limit, encoder=unpatched_encoder,
                                   dtype=options.dtype)
    table = None
    if options.write_table:
        # Before the patched launches are recorded: the clamp decides from this table.
        table = _write_fit_table(Path(options.write_table), defaults, device, versions, options.workers)
    # The patched launcher meets a device that refuses what does not fit, as a GPU does: a clamp
    # without a table entry must step down on that refusal.
    patched = record_launches(installed, cases, cc, limit, options.write_table, device_errors=True, encoder=encoder,
                              dtype=options.dtype, workers=options.workers)

    compared = defaults if options.compare_unpatched else []
    launches = patched + compared
    needs = _needs(launches, cc, known, options.workers)
    rows = [report_.launch_row(launch, result, limit, source) for launch, (result, source) in zip(launches, needs)]
    mixer_rows = _mixer_rows(mixer_shapes, cc, limit, options.workers, options.dtype)
    if options.write_table:
        from patches.fitcheck.fit_table import launch_entries

        clamped = launch_entries(patched, [result.shared for result, _ in needs[:len(patched)]], cc)
        table["verdicts_written"] = _write_verdicts(Path(options.write_table), rows[:len(patched)], shapes,
                                                    device, versions, clamped, mixer_rows, mixer_shapes, options.dtype)
    report = report_.build_report(
        versions=versions, device=device, launches=rows[:len(patched)],
        unpatched=rows[len(patched):] if options.compare_unpatched else None,
        elapsed_s=time.monotonic() - started, table=table, known_table=known_note, mixers=mixer_rows,
    )
    report["launcher"] = options.launcher or installed.__file__
    report["dtype"] = options.dtype
    if encoder is not None:
        report["encoder_launcher"] = encoder.__file__
    return report
