"""Ranked launch configurations: which (TILE_SIZE, num_warps, num_stages) the clamp prefers for a
launch, ordered by time measured on a proxy of the GPU (bench/clamp_gpu --ranked-out).

The data file (RANKED_FILE in this package, beside the fit table's code; the image has it at
/opt/vllm-turing/patches/turing_clamp/ranked-configs.json) holds, per capability and launch as
vLLM makes it (LAUNCH_KEYS, vLLM's own tile included), the configurations
that were timed there, best first, each with its shared memory under that lowering and its score:
the largest, over the cases of that launch, of its time over the fastest time measured for the
case. The clamp (runtime.py, `_vllm_turing_ranked_pick`) takes the best one that fits the limit,
and keeps its fail-safe choice (vLLM's own launch where it fits) unless a fitting configuration is
more than KEEP_MARGIN faster. `provenance` says which proxy ranked them, with what, and when.

Standard library only (and the fit table's writer): bench/clamp_gpu writes the file on the GPU
machine, the unit tier reads it.
"""
from __future__ import annotations

import json
from pathlib import Path

FORMAT = 1
RANKED_FILE = Path(__file__).with_name("ranked-configs.json")
ENV_RANKED = "TURING_CLAMP_RANKED_CONFIGS"
KEEP_MARGIN = 1.05  # the fail-safe choice stays unless a fitting configuration beats it by more
# The launch as vLLM makes it, its own tile included: vLLM picks tile 32 or 16 by the layer's
# window (its Gemma 3 rule), and the layers so told apart rank differently.
LAUNCH_KEYS = ("cc", "path", "head_size_padded", "dtype", "block_m", "num_warps", "num_stages", "vllm_tile_size")
CONFIG_KEYS = ("tile_size", "num_warps", "num_stages")
# Triton's defaults for CUDA launches that name none; a configuration naming them is vLLM's own.
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}
# What each proxy lowering stands for: the capability the ranking is keyed by.
PROXY_CC = {"sm75": 75, "sm86": 86}


def normal(config: dict) -> tuple:
    """(tile, warps, stages) with Triton's defaults filled in: equal tuples are the same compile."""
    return (config["tile_size"], config["num_warps"] or TRITON_DEFAULTS["num_warps"],
            config["num_stages"] or TRITON_DEFAULTS["num_stages"])


def as_launched(config: dict, launch_warps, launch_stages) -> dict:
    """The configuration as the launcher would pass it: an option equal to what the launch already
    gets (its own value, or Triton's default when it passes none) stays as the launch has it."""
    warps = config["num_warps"]
    stages = config["num_stages"]
    if (warps or TRITON_DEFAULTS["num_warps"]) == (launch_warps or TRITON_DEFAULTS["num_warps"]):
        warps = launch_warps
    if (stages or TRITON_DEFAULTS["num_stages"]) == (launch_stages or TRITON_DEFAULTS["num_stages"]):
        stages = launch_stages
    return {"tile_size": config["tile_size"], "num_warps": warps, "num_stages": stages}


def _launch_of(sweep: dict, case: dict, cc: int) -> dict:
    default = case["default"]
    return {"cc": cc, "path": "3d" if default["IS_3D"] else "2d", "head_size_padded": default["HEAD_SIZE_PADDED"],
            "dtype": sweep.get("dtype", "float16"), "block_m": default["BLOCK_M"],
            "num_warps": default["num_warps"], "num_stages": default["num_stages"],
            "vllm_tile_size": default["TILE_SIZE"]}


def rank(sweeps: dict, source: str, measured_at: str | None = None) -> dict:
    """The ranked-configurations document from bench/clamp_gpu's sweeps ({lowering: sweep})."""
    import datetime

    groups: dict[tuple, dict] = {}
    provenance = {}
    for low, sweep in sweeps.items():
        if low not in PROXY_CC:
            continue
        provenance[low] = {k: sweep.get(k) for k in ("gpu", "cc", "triton", "torch", "vllm", "override", "device_limit")}
        for name, case in sweep["cases"].items():
            launch = _launch_of(sweep, case, PROXY_CC[low])
            key = tuple(launch[k] for k in LAUNCH_KEYS)
            group = groups.setdefault(key, {"launch": launch, "vllm": sweep.get("vllm"), "cases": {}})
            times: dict[tuple, list] = {}
            shared: dict[tuple, int] = {}
            for row in case["configs"]:
                if "ms" not in row:
                    continue
                config = as_launched(row, launch["num_warps"], launch["num_stages"])
                identity = tuple(config[k] for k in CONFIG_KEYS)
                times.setdefault(identity, []).append(row["ms"])
                shared[identity] = row["shared"]
            group["cases"][name] = {identity: (sum(ms) / len(ms), shared[identity]) for identity, ms in times.items()}
    launches = []
    for key, group in sorted(groups.items(), key=lambda item: tuple(str(v) for v in item[0])):
        cases = group["cases"]
        common = set.intersection(*(set(c) for c in cases.values()))
        fastest = {name: min(c[i][0] for i in common) for name, c in cases.items()}
        ranked = []
        for identity in common:
            ratios = {name: c[identity][0] / fastest[name] for name, c in cases.items()}
            ranked.append(dict(zip(CONFIG_KEYS, identity), shared=max(c[identity][1] for c in cases.values()),
                               score=round(max(ratios.values()), 4),
                               ms={name: round(c[identity][0], 5) for name, c in cases.items()}))
        ranked.sort(key=lambda r: (r["score"], -r["tile_size"]))
        launches.append(dict(group["launch"], cases=sorted(cases), ranked=ranked))
    return {
        "format": FORMAT,
        "vllm_version": next((p["vllm"] for p in provenance.values()), None),
        "provenance": {
            "ranked_by": "time on a proxy: Triton lowering the kernel for the named capability "
                         "(TRITON_OVERRIDE_ARCH) on the GPU below, PTX and cubin for that GPU; a proxy, "
                         "not that capability's speed",
            "script": source,
            "measured_at": measured_at or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
            "lowerings": provenance,
            "score": "per configuration, the largest over the launch's cases of its median time over the "
                     "fastest median measured for that case; lower is better",
        },
        "launches": launches,
    }


def merged(kept: dict, new: dict) -> dict:
    """`new` with `kept`'s launches; a launch both rank (same LAUNCH_KEYS, e.g. a family layer and a
    Gemma 4 layer that vLLM launches alike) keeps the cases of both, its configurations those timed in
    both, each scored by the worse of its two scores (a score is already per case, relative to that
    case's fastest, so runs combine). Each launch names when it was measured; the provenance is new's,
    kept's under `earlier`."""
    def key(launch):
        return tuple(launch[k] for k in LAUNCH_KEYS)

    def stamped(document):
        when = document["provenance"].get("measured_at")
        return {key(launch): dict({"measured_at": when}, **launch) for launch in document["launches"]}

    launches = stamped(kept)
    for identity, launch in stamped(new).items():
        launches[identity] = _combined(launches[identity], launch) if identity in launches else launch
    earlier = [dict((k, v) for k, v in kept["provenance"].items() if k != "earlier")] + kept["provenance"].get("earlier", [])
    return dict(new, provenance=dict(new["provenance"], earlier=earlier),
                launches=[launches[k] for k in sorted(launches, key=lambda k: tuple(str(v) for v in k))])


def _combined(old: dict, new: dict) -> dict:
    """One launch ranked by two runs: the configurations both timed, each with the worse score."""
    configs = {tuple(r[k] for k in CONFIG_KEYS): r for r in old["ranked"]}
    ranked = []
    for row in new["ranked"]:
        earlier = configs.get(tuple(row[k] for k in CONFIG_KEYS))
        if earlier is not None:
            ranked.append(dict(row, shared=max(row["shared"], earlier["shared"]),
                               score=max(row["score"], earlier["score"]), ms=dict(earlier["ms"], **row["ms"])))
    ranked.sort(key=lambda r: (r["score"], -r["tile_size"]))
    when = [w for w in (old.get("measured_at"), new.get("measured_at")) if w]
    return dict(new, cases=sorted(set(old["cases"]) | set(new["cases"])), ranked=ranked,
                measured_at=", ".join(dict.fromkeys(when)))


def read(path: Path) -> dict:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if document.get("format") != FORMAT:
        raise ValueError(f"{path}: format {document.get('format')!r}, expected {FORMAT}")
    return document


def write(path: Path, document: dict) -> None:
    """Atomic replace, as the fit table is written (the same writer)."""
    from patches.fitcheck.table import write_table

    write_table(Path(path), document)
