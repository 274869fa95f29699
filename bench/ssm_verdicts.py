"""The hybrid families' Mamba-2 mixer shapes and the fit verdict over measured SSM launches
(bench/ssm_kernels_smem measures; bench/ssm_kernels_probe.py records and compiles)."""
from collections import defaultdict

# (head dim, state size, groups, chunk size, conv width) of each family's Mamba-2 mixer, from the
# config.json fields vLLM reads (mamba_head_dim / mamba_d_head, ssm_state_size / mamba_d_state,
# n_groups, chunk_size, conv_kernel); heads are kept small: they only set the grid.
FAMILIES = {
    "nemotron-h": dict(heads=8, headdim=64, dstate=128, groups=8, chunk=128, conv_width=4),
    "nemotron-nano-v2": dict(heads=8, headdim=80, dstate=128, groups=8, chunk=128, conv_width=4),
    "granite-4.0-h": dict(heads=8, headdim=64, dstate=128, groups=1, chunk=256, conv_width=4),
    "falcon-h1": dict(heads=8, headdim=64, dstate=256, groups=1, chunk=256, conv_width=4),
    "zamba2": dict(heads=8, headdim=64, dstate=64, groups=1, chunk=256, conv_width=4),
}


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
