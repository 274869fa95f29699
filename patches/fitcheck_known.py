"""Which recorded launches the fit check must compile, given a fit table of known needs (pure).

The build's fit table holds the compiler's own `shared` per key (cc, path, head size, dtype,
BLOCK_M, warps, stages, tile), the largest over the build's launches sharing the key. Under the
same vLLM and Triton the run-time check takes a launch's need from its key, as the clamp does
when it picks the tile, and compiles only the launches the table lacks. The table holds attention
launches only: the split-K reduction is always compiled (its need also depends on the head count).
"""
from __future__ import annotations

from patches.fitcheck_table import ATTENTION_PATHS, identity, launch_key


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
    return identity(dict(launch_key(launch, cc), tile_size=launch.param("TILE_SIZE")))


def known_needs(launches: list, cc: int, document: dict) -> list[int | None]:
    """Per launch: the table's `shared` for its key on this cc, or None when it must be compiled
    (no entry, or not an attention launch: the table holds only those)."""
    needs: dict[tuple, int] = {}
    for entry in document["entries"]:
        key = identity(entry)
        needs[key] = max(entry["shared"], needs.get(key, 0))
    return [needs.get(table_key(launch, cc)) if launch.path in ATTENTION_PATHS else None
            for launch in launches]
