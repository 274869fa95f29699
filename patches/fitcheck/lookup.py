"""The fit check answered from the build's fit table alone: config.json -> layer shapes -> the
verdicts the build recorded for those shapes on this device (fit_table.py, `verdicts`).

Standard library only, and neither vLLM nor torch nor Triton is imported (their versions come
from package metadata), so the entrypoint decides in milliseconds. A shape, device or version
the table does not hold is a miss: the caller runs the full check and says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contract import distributions
from contract.model_config import ConfigProblem, ModelConfig
from door.problem import Problem
from patches.fitcheck import families, fit_table as table_
from patches.fitcheck.families import encoders
from patches.fitcheck.family import UnprovenLayers


@dataclass(frozen=True)
class Lookup:
    """hit: every layer shape has a verdict (then launches, max_shared, all_fit and the shape that
    does not fit, if any); otherwise `miss` says why the full check must run."""

    hit: bool
    miss: str | None = None
    launches: int = 0
    max_shared: int | None = None
    all_fit: bool = False
    worst: dict | None = None
    unproven: bool = False  # the model has layers whose kernels no fit check proves (the miss says which)
    unreadable: bool = False  # config.json lacks what the fit check needs to know its layers (the miss says what)
    refused: str | None = None  # vLLM cannot serve the model on this device (the miss says why): what to do


def installed_versions() -> dict | None:
    """{vllm, triton} from package metadata; None when either is not installed."""
    versions = distributions.installed_versions(("vllm", "triton"))
    return None if None in versions.values() else versions


def decide(document: dict, shapes: list, cc: int, limit: int, versions: dict | None,
           dtype: str = table_.CHECKED_DTYPE) -> Lookup:
    """The verdicts of `document` for `shapes` on (cc, limit) in `dtype` under `versions` (pure)."""
    if versions is None:
        return Lookup(False, "vLLM or Triton is not installed as a package")
    mismatch = table_.table_mismatch(document, versions)
    if mismatch:
        return Lookup(False, f"fit table {mismatch}")
    recorded = {table_.verdict_key(v, name): v for name in ("verdicts", "mixer_verdicts")
                for v in document.get(name) or [] if isinstance(v, dict)}
    unrecorded = families.unrecorded_on(shapes, cc)
    if unrecorded:
        return Lookup(False, unrecorded, unproven=True)
    found = []
    for shape in shapes:
        verdict = recorded.get(table_.verdict_fields(shape, cc, limit, dtype)[1])
        if verdict is None:
            rank = f" per rank at tensor parallel {shape.tensor_parallel}" if shape.tensor_parallel > 1 else ""
            return Lookup(False, f"no verdict in the fit table for {shape.label} ({families.describe(shape)}{rank}) on cc "
                                 f"{cc} at {limit} bytes in {dtype}")
        found.append(verdict)
    needs = [v["max_shared"] for v in found if v.get("max_shared") is not None]
    failing = [v for v in found if not v.get("all_fit")]
    return Lookup(True, None, sum(v.get("launches", 0) for v in found), max(needs, default=None),
                  not failing, max(failing, key=lambda v: v.get("max_shared") or 0) if failing else None)


def lookup(table_path: str | Path, config: ModelConfig, cc: int, limit: int, where: str = "config.json",
           tensor_parallel: int = 1, dtype: str = table_.CHECKED_DTYPE, towers: bool = False) -> Lookup:
    """decide() for one rank's shapes of a model's parsed config.json (as the entrypoint's model check
    read it) under `tensor_parallel` ranks in `dtype` (attention.run_dtype), over the table file, with its
    multimodal towers when they run the encoder kernel (`towers`: --mm-encoder-attn-backend TRITON_ATTN);
    an unreadable table or an unusable config is a miss (the full check reports it). The config is the fit
    check's from here on, its messages naming `where`."""
    config = config.at(where)
    # Before the layers are read: a model vLLM cannot run here is refused even beside layers the check
    # does not know (Kimi Linear's KDA next to its latent attention, DeepSeek V4's compressed layers)
    refusal = families.config_refused_on(config, Path(where).parent.name or "model", where, tensor_parallel, cc)
    if refusal is not None:
        return Lookup(False, refusal.reason, refused=refusal.fix)
    try:
        document = table_.read_table(Path(table_path), "--known-table")
        shapes = families.model_layers(config, Path(where).parent.name or "model", where, tensor_parallel, dtype)
    except UnprovenLayers as error:
        return Lookup(False, str(error), unproven=True)
    except ConfigProblem as error:
        return Lookup(False, str(error), unreadable=True)
    except Problem as error:  # the table's (a UsageError)
        return Lookup(False, str(error))
    if document is None:
        return Lookup(False, f"no fit table at {table_path}")
    versions = installed_versions()
    if not towers:
        return decide(document, shapes, cc, limit, versions, dtype)
    try:
        tower_shapes = encoders.tower_shapes(config, Path(where).parent.name or "model", where)
    except UnprovenLayers as error:
        return Lookup(False, str(error), unproven=True)
    found = decide(document, shapes + tower_shapes, cc, limit, versions, dtype)
    # A miss the language model's layers alone do not have is a tower's, which the full check does not
    # compile: not proven. Any other miss (another table, a layer without a verdict) goes to the full check.
    if not found.hit and tower_shapes and decide(document, shapes, cc, limit, versions, dtype).hit:
        heads = ", ".join(map(str, encoders.BUILTIN_TOWER_HEADS))
        return Lookup(False, f"{found.miss}: a multimodal tower under --mm-encoder-attn-backend TRITON_ATTN (the "
                             f"build proves tower heads {heads})", unproven=True)
    return found
