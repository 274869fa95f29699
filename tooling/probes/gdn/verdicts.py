"""The measured gated delta net shapes and the fit verdict per kernel over them (tooling/probes/gdn/probe.py
compiles what patches/fitcheck/families/gated_delta_net/launches.py records). The verdict per (device, shape, phase, kernel) is
tooling/probes/ssm/verdicts.py's."""
from collections import defaultdict

from tooling.probes.ssm.verdicts import verdicts
from patches.fitcheck.families.gated_delta_net import BUILTIN_GDN

FAMILIES = tuple(BUILTIN_GDN)


def _need(verdict: dict) -> int | None:
    """What one (device, shape, phase, kernel) launch needs at least: an autotuned kernel its smallest
    configuration, a plain one its largest launch (None where one did not compile)."""
    if verdict["autotuned"]:
        return verdict["smallest"]
    return verdict["largest"] if verdict["compiled"] == verdict["configs"] else None


def kernel_verdicts(rows: list[dict]) -> list[dict]:
    """Per (device, kernel), over every shape and phase that launches it: the phases, the shared memory
    of every configuration compiled (smallest, largest), `need` (the largest _need: what the tightest
    launch needs at least) and the verdict: it fits when every launch of it does."""
    groups = defaultdict(list)
    for verdict in verdicts(rows):
        groups[(verdict["device"], verdict["limit"], verdict["kernel"])].append(verdict)
    out = []
    for (device, limit, kernel), members in groups.items():
        smallest = [m["smallest"] for m in members if m["smallest"] is not None]
        largest = [m["largest"] for m in members if m["largest"] is not None]
        needs = [_need(m) for m in members]
        out.append({"device": device, "limit": limit, "kernel": kernel, "autotuned": members[0]["autotuned"],
                    "phases": sorted({m["kind"] for m in members}), "shapes": len({m["family"] for m in members}),
                    "configs": max(m["configs"] for m in members), "smallest": min(smallest, default=None),
                    "largest": max(largest, default=None),
                    "need": None if None in needs else max(needs),
                    "fits": all(m["fits"] for m in members)})
    return out
