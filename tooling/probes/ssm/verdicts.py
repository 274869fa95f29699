"""The hybrid families' Mamba-2 mixer shapes and the fit verdict over measured launches, one row per
configuration compiled (tooling/probes/ssm/probe.py compiles what patches/fitcheck/families/mamba2/launches.py
records; the gated delta net probe's verdicts build on these)."""
from collections import defaultdict

from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS

# The matrix's hybrids (patches/fitcheck/families/mamba2.py BUILTIN_HYBRIDS): their Mamba-2 mixers are measured.
FAMILIES = tuple(BUILTIN_HYBRIDS)


def verdicts(rows: list[dict]) -> list[dict]:
    """Per (device, family, kind, kernel): configurations measured, how many fit, the smallest need,
    and the verdict (an autotuned kernel fits when one configuration does; a plain one must)."""
    groups = defaultdict(list)
    for row in rows:
        if "device" in row:
            groups[(row["device"], row["limit"], row["family"], row["kind"], row["kernel"])].append(row)
    out = []
    for (device, limit, family, kind, kernel), members in groups.items():
        needs = [m["shared"] for m in members if m["shared"] is not None]
        fitting = [n for n in needs if n <= limit]
        autotuned = members[0]["config"] is not None
        out.append({"device": device, "limit": limit, "family": family, "kind": kind, "kernel": kernel,
                    "autotuned": autotuned, "configs": len(members), "compiled": len(needs), "fitting": len(fitting),
                    "smallest": min(needs, default=None), "largest": max(needs, default=None),
                    "fits": bool(fitting) and (autotuned or len(fitting) == len(members))})
    return out
