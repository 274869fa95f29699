"""The fit table the clamp reads at run time: candidate tiles per launch and their shared memory.

Format (docs/architecture.md): {"format": 1, "vllm_version", "triton_version", "entries": [
{cc, path, head_size_padded, dtype, block_m, num_warps, num_stages, tile_size, shared}],
"verdicts": [{cc, limit, dtype, <SHAPE_FIELDS>, launches, max_shared, all_fit}],
"mixer_verdicts": [{cc, limit, dtype, <the mixer kind's fields>, launches, max_shared, all_fit}]}.

`verdicts` (optional) is the fit check's own judgement of every launch of one layer shape on one
device, so the entrypoint can answer from config.json alone (patches/fitcheck/lookup.py).
"""
from __future__ import annotations

from door.problem import UsageError
import json
import os
from pathlib import Path

from patches.fitcheck.attention import LayerShape
from patches.fitcheck.family import DEFAULT_DTYPE
from patches.fitcheck.family import fields_by_kind
from patches.fitcheck.swap_and_write import write_atomically
from door import files
from door.problem import Problem

FORMAT = 1
SMALLEST_TILE = 16
ENTRY_KEYS = ("cc", "path", "head_size_padded", "dtype", "block_m", "num_warps", "num_stages", "tile_size")
ATTENTION_PATHS = ("2d", "3d", "encoder")  # "encoder": context_attention_fwd's _fwd_kernel
# The fields of a layer shape that size its kernels' shared memory: which kernel runs it (attention:
# decoder, encoder, mm-encoder), and the tiles follow head size, the query-per-KV ratio (BLOCK_M,
# BLOCK_Q; the encoder kernel's kv_group_num), window, softcap and block size. Head counts only index
# the grid, and the model's KV heads only move the split-K threshold (which path a batch takes; the
# matrix runs both), so a verdict recorded for these fields holds for any model with such a layer
# (tests/image/test_fitcheck.py compiles real family configs against it). One rank of a tensor-parallel
# model is a model with that rank's heads (attention.rank_heads).
SHAPE_FIELDS = ("attention", "head_size", "queries_per_kv", "sliding_window", "softcap", "block_size")
VERDICT_KEYS = ("cc", "limit", "dtype") + SHAPE_FIELDS
CHECKED_DTYPE = DEFAULT_DTYPE  # the dtype of the launches a run records unless it says another (--dtype)


# A shape recorded by its family (a mixer, latent attention): its verdicts sit in `mixer_verdicts`, keyed
# by the fields that size its kernels, which follow its kind, the verdict's `mixer` (its class's FIELDS).
def mixer_verdict_keys(mixer: object) -> tuple | None:
    """The keys of a mixer verdict of kind `mixer`; None for a kind this release does not know. The kinds
    are those of the RecordedShape classes imported: whatever merges or looks verdicts up (proof.py,
    lookup.py) imports the registry first, which imports every family's module."""
    fields = fields_by_kind().get(mixer) if isinstance(mixer, str) else None
    return ("cc", "limit", "dtype") + fields if fields else None


def mixer_fields(shape) -> dict:
    """The fields that size a mixer's (or latent attention's) kernels, by its class's FIELDS."""
    return {name: getattr(shape, name) for name in type(shape).FIELDS}


def verdict_key(verdict: dict, section: str) -> tuple | None:
    """A recorded verdict's key in its table section ("verdicts" or "mixer_verdicts"), None when it
    cannot be keyed (a mixer kind not known here)."""
    keys = VERDICT_KEYS if section == "verdicts" else mixer_verdict_keys(verdict.get("mixer"))
    return None if keys is None else tuple(verdict.get(k) for k in keys)


def launch_key(launch, cc: int, tile: int | None = None) -> dict:
    """The table fields of an attention launch at `tile` (its own by default), tile and shared left
    out. An encoder launch's head size is BLOCK_DMODEL and its block_m the BLOCK_M that goes with the
    tile (BLOCK_N): the clamp sets both to vLLM's BLOCK."""
    encoder = launch.path == "encoder"
    query = launch.params.get("Q" if encoder else "query_ptr")
    dtype = str(getattr(query, "dtype", "unknown")).replace("torch.", "")
    return {
        "cc": cc,
        "path": launch.path,
        "head_size_padded": launch.param("BLOCK_DMODEL" if encoder else "HEAD_SIZE_PADDED"),
        "dtype": dtype,
        "block_m": tile if encoder and tile is not None else launch.param("BLOCK_M"),
        "num_warps": launch.options.get("num_warps"),
        "num_stages": launch.options.get("num_stages"),
    }


def identity(entry: dict) -> tuple:
    """An entry's key fields in ENTRY_KEYS order: entries with equal identities describe one compile."""
    return tuple(entry[k] for k in ENTRY_KEYS)


def tile_search(launches: list, cc: int, limit: int, compile_requests) -> list[dict]:
    """Table entries for the attention launches: each launch's own tile, then halvings of it
    while the compiled kernel exceeds `limit`, down to the smallest tile the kernel takes.

    compile_requests([(fn, params, options, case)]) -> [CompileResult]. Launches that share a table
    key keep the largest need, so the entry holds for every one of them.
    """
    pending = [(launch, launch.tile) for launch in launches if launch.path in ATTENTION_PATHS]
    entries = []
    while pending:
        results = compile_requests(
            [(launch.fn, launch.retiled(tile), launch.options, launch.case) for launch, tile in pending])
        smaller = []
        for (launch, tile), result in zip(pending, results):
            if result.shared is None:
                continue
            entries.append(dict(launch_key(launch, cc, tile), tile_size=tile, shared=result.shared))
            if result.shared > limit and tile // 2 >= SMALLEST_TILE:
                smaller.append((launch, tile // 2))
        pending = smaller
    return _largest_needs(entries)


def launch_entries(launches: list, shareds: list, cc: int) -> list[dict]:
    """Table entries for launches already compiled at their own tile (the clamped launches, with the
    warps and stages a ranked configuration gave them), so that the table holds every launch the
    clamp makes and a preflight answers it without compiling. Shared keys keep the largest need."""
    return _largest_needs([dict(launch_key(launch, cc), tile_size=launch.tile, shared=shared)
                           for launch, shared in zip(launches, shareds)
                           if launch.path in ATTENTION_PATHS and shared is not None])


def _largest_needs(entries: list[dict]) -> list[dict]:
    """One entry per identity, the one with the largest need, so it holds for every launch of that key."""
    needs: dict[tuple, dict] = {}
    for entry in entries:
        key = identity(entry)
        if key not in needs or needs[key]["shared"] < entry["shared"]:
            needs[key] = entry
    return list(needs.values())


TABLE_CAP = 256 * files.MiB  # the largest tables (every family, three passes) are a few MiB


def read_table(path: Path, option: str = "--write-table") -> dict | None:
    """The existing table at path, None when there is none; a UsageError (exit 2, nothing written) when it is not one
    (naming `option`, the command-line option that gave the path)."""
    if not os.path.lexists(path):
        return None
    try:  # a path a user may give (--known-table): a regular file, capped, strict JSON
        document = files.read_json(str(path), str(path), TABLE_CAP, unique_keys=False)
    except Problem as problem:
        raise UsageError(f"{problem}; move it away or pass another {option} path") from None
    try:
        if document.get("format") != FORMAT or not isinstance(document.get("entries"), list):
            raise ValueError(f"format {document.get('format')!r}, expected {FORMAT} with an entries list")
        for entry in document["entries"]:
            missing = [k for k in ENTRY_KEYS + ("shared",) if k not in entry]
            if missing:
                raise ValueError(f"an entry lacks {', '.join(missing)}")
            if not isinstance(entry["shared"], int) or entry["shared"] < 0:
                raise ValueError(f"an entry's shared is {entry['shared']!r}, expected bytes as an integer")
    except (ValueError, AttributeError, TypeError) as error:
        raise UsageError(
            f"{path} is not a fit table ({error}); move it away or pass another {option} path"
        ) from None
    return document


def _merged(kept: list[dict], new: list[dict], key) -> list[dict]:
    merged = {key(e): e for e in kept}
    merged.update((key(e), e) for e in new)
    return sorted(merged.values(), key=lambda e: tuple(map(str, key(e))))


def merge(existing: dict | None, entries: list[dict], versions: dict, verdicts: list[dict] = (),
          mixer_verdicts: list[dict] = ()) -> dict:
    """New entries (and verdicts) replace existing ones with the same key; other existing ones stay
    when the existing table was written by these vLLM and Triton versions. A table of other versions
    starts fresh: its numbers were compiled from another kernel, and stamping them with these
    versions would make the known-table check and the lookup trust them."""
    kept = existing if existing is not None and table_mismatch(existing, versions) is None else {}
    document = {"format": FORMAT, "vllm_version": versions["vllm"], "triton_version": versions["triton"],
                "entries": _merged(kept.get("entries", []), entries, identity)}
    for name, new in (("verdicts", verdicts), ("mixer_verdicts", mixer_verdicts)):
        keyed = [v for v in kept.get(name, []) if verdict_key(v, name) is not None]
        merged_verdicts = _merged(keyed, list(new), lambda v, name=name: verdict_key(v, name))
        if merged_verdicts:
            document[name] = merged_verdicts
    return document


def shape_fields(shape) -> dict:
    """A layer shape's SHAPE_FIELDS (a mixer's fields, mixer_fields)."""
    if not isinstance(shape, LayerShape):
        return mixer_fields(shape)
    fields = {name: getattr(shape, name) for name in SHAPE_FIELDS}
    fields["softcap"] = float(shape.softcap)
    return fields


def verdict_fields(shape, cc: int, limit: int, dtype: str = CHECKED_DTYPE) -> tuple[dict, tuple]:
    """A shape's verdict fields on (cc, limit) in `dtype` and its key: their values under the keys a
    verdict of its kind is recorded by (verdict_key's)."""
    fields = dict({"cc": cc, "limit": limit, "dtype": dtype}, **shape_fields(shape))
    return fields, verdict_key(fields, "verdicts" if isinstance(shape, LayerShape) else "mixer_verdicts")


def shape_verdicts(rows: list[dict], shapes, cc: int, limit: int, dtype: str = CHECKED_DTYPE) -> list[dict]:
    """One verdict per distinct SHAPE_FIELDS from the fit check's report rows of the patched
    launches; layer shapes that share the fields share one verdict (the largest need, fits only
    if every launch of each does)."""
    fields_by_key: dict[tuple, dict] = {}
    rows_by_key: dict[tuple, list[list[dict]]] = {}
    for shape in shapes:
        own = [row for row in rows if (row["model"], row["layer"]) == (shape.model, shape.layer)]
        if own:
            fields, key = verdict_fields(shape, cc, limit, dtype)
            fields_by_key.setdefault(key, fields)
            rows_by_key.setdefault(key, []).append(own)
    return [dict(fields_by_key[key], launches=max(len(own) for own in owns),
                 max_shared=max((row["shared"] for own in owns for row in own if row["shared"] is not None), default=None),
                 all_fit=all(row["fits"] for own in owns for row in own))
            for key, owns in rows_by_key.items()]


def write_table(path: Path, document: dict) -> None:
    """Atomic replace, so a reader never sees half a table (swap_and_write.write_atomically). Compact, as the image
    keeps it (a quarter smaller): `python3 -m json.tool` shows it to a person."""
    write_atomically(path, json.dumps(document, separators=(",", ":")) + "\n")


# Known needs: which recorded launches the fit check must compile, given a fit table. The build's
# table holds the compiler's own `shared` per key (cc, path, head size, dtype, BLOCK_M, warps,
# stages, tile), the largest over the build's launches sharing the key. Under the same vLLM and
# Triton the run-time check takes a launch's need from its key, as the clamp does when it picks
# the tile, and compiles only the launches the table lacks. The table holds attention launches
# only: the split-K reduction is always compiled (its need also depends on the head count).


def table_mismatch(document: dict, versions: dict) -> str | None:
    """Why the table's numbers do not hold for this vLLM and Triton; None when they do."""
    found = (document.get("vllm_version"), document.get("triton_version"))
    running = (versions["vllm"], versions["triton"])
    if found == running:
        return None
    return (f"written for vLLM {found[0]} / Triton {found[1]}, running vLLM {running[0]} / "
            f"Triton {running[1]}")


def table_key(launch, cc: int) -> tuple:
    """The launch's identity in the table, its own tile included."""
    return identity(dict(launch_key(launch, cc), tile_size=launch.tile))


def known_needs(launches: list, cc: int, document: dict) -> list[int | None]:
    """Per launch: the table's `shared` for its key on this cc, or None when it must be compiled
    (no entry, or not an attention launch: the table holds only those)."""
    needs: dict[tuple, int] = {}
    for entry in document["entries"]:
        key = identity(entry)
        needs[key] = max(entry["shared"], needs.get(key, 0))
    return [needs.get(table_key(launch, cc)) if launch.path in ATTENTION_PATHS else None
            for launch in launches]
