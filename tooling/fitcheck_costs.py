"""The fit check's cost by model family (bench/fitcheck --build-step), from the ledgers one run of the
Dockerfile's fit step leaves in its process: the compiler's (patches.fitcheck.compiler.LEDGER: each compile
with the case of the first launch that asked for it) and the recorder's (recorder.RECORDING: each recorded
case or family shape with its wall time).

A compile two families share is charged to the first that asked for it: the second finds it done.
"""
from __future__ import annotations

from dataclasses import dataclass, field

UNCHARGED = "(no case: a tooling probe's compile)"


@dataclass
class FamilyCost:
    name: str
    recording_s: float = 0.0  # wall: vLLM's launcher or the family's ops run on CPU tensors, launches recorded
    calls: int = 0  # recording calls: an attention case or a family shape (a pass records a case up to three times)
    compiles: dict[str, int] = field(default_factory=dict)  # by the compiler's mode (recorded, shared-only, full)
    compile_cpu_s: float = 0.0  # what its compiles cost their processes (a recorded answer costs nothing)

    def as_dict(self) -> dict:
        return {"family": self.name, "recording_s": round(self.recording_s, 1), "recording_calls": self.calls,
                "compiles": dict(sorted(self.compiles.items())), "compile_cpu_s": round(self.compile_cpu_s, 1)}


def by_family(ledger, recording, charge) -> list[FamilyCost]:
    """Costs per family, most expensive first (recording plus compile CPU). ledger: compiler.Compiled
    entries; recording: (shape, seconds); charge: shape -> family name (families.charged_to)."""
    costs: dict[str, FamilyCost] = {}

    def cost_of(shape) -> FamilyCost:
        name = UNCHARGED if shape is None else charge(shape)
        return costs.setdefault(name, FamilyCost(name))

    for entry in ledger:
        cost = cost_of(getattr(entry.case, "shape", None))
        cost.compiles[entry.mode] = cost.compiles.get(entry.mode, 0) + 1
        cost.compile_cpu_s += entry.result.cpu_s
    for shape, seconds in recording:
        cost = cost_of(shape)
        cost.recording_s += seconds
        cost.calls += 1
    return sorted(costs.values(), key=lambda cost: (-(cost.recording_s + cost.compile_cpu_s), cost.name))
