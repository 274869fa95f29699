"""Ranked launch configurations: which (TILE_SIZE, num_warps, num_stages) the clamp prefers for a
launch, ordered by time measured on a proxy of the GPU (bench/clamp_gpu --ranked-out); for the
encoder kernel (path "encoder") the tile is its BLOCK (tooling/encoder_sweep, rank_encoder).

The data file (RANKED_FILE, patches/turing_clamp/ranked-configs.json, beside the clamp that reads it;
the image has it at /opt/vllm-turing/patches/turing_clamp/ranked-configs.json) holds, per capability and launch as
vLLM makes it (LAUNCH_KEYS, vLLM's own tile included), the configurations
that were timed there, best first, each with its shared memory under that lowering and its score:
the largest, over the cases of that launch, of its time over the fastest time measured for the
case. The clamp (runtime.py, `_vllm_turing_ranked_pick`) takes the best one that fits the limit,
and keeps its fail-safe choice (vLLM's own launch where it fits) while that scores within KEEP_MARGIN
of the fastest measured, or, where nothing that fits does, within KEEP_MARGIN of the best that fits.
Rankings of several runs merge (`merged`): a configuration scores its worst run, so a launch whose
timings sit at the noise floor is held to the margin in every run it was measured in. `provenance`
says which proxy ranked them, with what, and when.

Host-only, so it stays out of the image (the clamp's runtime.py reads the file with its own few lines):
bench/clamp_gpu writes the file on the GPU machine, the unit tier reads it.
"""
from __future__ import annotations

from pathlib import Path

from contract.devices import DEVICES
from door import files

FORMAT = 2  # 2: launches carry "windowed"
RANKED_FILE = Path(__file__).resolve().parents[1] / "patches" / "turing_clamp" / "ranked-configs.json"
ENV_RANKED = "TURING_CLAMP_RANKED_CONFIGS"
KEEP_MARGIN = 1.05  # the fail-safe choice stays while its score is within this of the fastest
# The launch as vLLM makes it, its own tile included: vLLM picks tile 32 or 16 by the layer's
# window (its Gemma 3 rule), and the layers so told apart rank differently; so do layers with and
# without a sliding window at the same tile (on the Ampere proxy Gemma 4's windowed head-256 prefill
# and Gemma 3's global one want other warps: 1.18x when one ranking served both).
LAUNCH_KEYS = ("cc", "path", "head_size_padded", "dtype", "block_m", "num_warps", "num_stages", "vllm_tile_size",
               "windowed")
CONFIG_KEYS = ("tile_size", "num_warps", "num_stages")
# Triton's defaults for CUDA launches that name none; a configuration naming them is vLLM's own.
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}
# What each proxy lowering stands for: the capability the ranking is keyed by.
PROXY_CC = {low: DEVICES[low].cc for low in ("sm75", "sm86")}


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
            "vllm_tile_size": default["TILE_SIZE"], "windowed": bool(default["SLIDING_WINDOW"])}


def rank(sweeps: dict, source: str, measured_at: str | None = None) -> dict:
    """The ranked-configurations document from bench/clamp_gpu's sweeps ({lowering: sweep})."""
    groups: dict[tuple, dict] = {}
    for low, sweep in _proxy_sweeps(sweeps):
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
    return _document(groups, _provenance(sweeps), source, measured_at)


def _proxy_sweeps(sweeps: dict):
    """(lowering, sweep) of the proxy lowerings (native times rank nothing)."""
    return ((low, sweep) for low, sweep in sweeps.items() if low in PROXY_CC)


def _provenance(sweeps: dict) -> dict:
    return {low: {k: sweep.get(k) for k in ("gpu", "cc", "triton", "torch", "vllm", "override", "device_limit")}
            for low, sweep in _proxy_sweeps(sweeps)}


def rank_encoder(sweeps: dict, source: str, measured_at: str | None = None) -> dict:
    """The ranked-configurations document of the encoder kernel from tooling/encoder_sweep's sweeps
    ({lowering: sweep}; its cases are named encoder-h<head>). A launch is keyed by vLLM's own BLOCK
    (vllm_tile_size, block_m) and warps and stages; its configurations are (BLOCK, num_warps, num_stages)
    as launched, each explicit (vLLM passes both options)."""
    groups: dict[tuple, dict] = {}
    for low, sweep in _proxy_sweeps(sweeps):
        for name, case in sweep["cases"].items():
            head, own = int(name.rsplit("-h", 1)[1]), case["default"]
            launch = {"cc": PROXY_CC[low], "path": "encoder", "head_size_padded": 1 << (head - 1).bit_length(),
                      "dtype": sweep.get("dtype", "float16"), "block_m": own["BLOCK_M"], "num_warps": own["num_warps"],
                      "num_stages": own["num_stages"], "vllm_tile_size": own["BLOCK_M"], "windowed": False}
            group = groups.setdefault(tuple(launch[k] for k in LAUNCH_KEYS), {"launch": launch, "cases": {}})
            group["cases"][name] = {(r["block"], r["num_warps"], r["num_stages"]): (r["ms"], r["shared"])
                                    for r in case["configs"] if "ms" in r}
    return _document(groups, _provenance(sweeps), source, measured_at)


def regrouped(document: dict, windowed_of, source: str) -> dict:
    """A ranking of format 1 (no "windowed" in its key) ranked anew from the medians it stores per case
    (each configuration's `ms`), its launches split by windowed_of(case name); no GPU needed. Each launch
    keeps when it was measured; the provenance says how it was re-ranked."""
    groups: dict[tuple, dict] = {}
    for old in document["launches"]:
        for name in old["cases"]:
            launch = {k: old[k] for k in LAUNCH_KEYS if k != "windowed"}
            launch["windowed"] = bool(windowed_of(name))
            key = tuple(launch[k] for k in LAUNCH_KEYS)
            group = groups.setdefault(key, {"launch": dict(launch, measured_at=old.get("measured_at")), "cases": {}})
            group["cases"][name] = {tuple(r[k] for k in CONFIG_KEYS): (r["ms"][name], r["shared"])
                                    for r in old["ranked"] if name in r["ms"]}
    provenance = document["provenance"]
    ranked = _document(groups, provenance["lowerings"], source, provenance.get("measured_at"))
    ranked["vllm_version"] = document["vllm_version"]
    ranked["provenance"]["earlier"] = provenance.get("earlier", [])
    return ranked


def _document(groups: dict, lowerings: dict, source: str, measured_at: str | None) -> dict:
    """The document of groups {launch key: {"launch", "vllm", "cases": {case: {config: (ms, shared)}}}}."""
    import datetime

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
        "vllm_version": next((p["vllm"] for p in lowerings.values()), None),
        "provenance": {
            "ranked_by": "time on a proxy: Triton lowering the kernel for the named capability "
                         "(TRITON_OVERRIDE_ARCH) on the GPU below, PTX and cubin for that GPU; a proxy, "
                         "not that capability's speed",
            "script": source,
            "measured_at": measured_at or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
            "lowerings": lowerings,
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
    new's own earlier runs then kept's under `earlier`, its lowerings those of both (a lowering both name:
    new's)."""
    def key(launch):
        return tuple(launch[k] for k in LAUNCH_KEYS)

    def stamped(document):
        when = document["provenance"].get("measured_at")
        return {key(launch): dict({"measured_at": when}, **launch) for launch in document["launches"]}

    launches = stamped(kept)
    for identity, launch in stamped(new).items():
        launches[identity] = _combined(launches[identity], launch) if identity in launches else launch
    earlier = new["provenance"].get("earlier", []) + [
        dict((k, v) for k, v in kept["provenance"].items() if k != "earlier")] + kept["provenance"].get("earlier", [])
    lowerings = dict(kept["provenance"].get("lowerings", {}), **new["provenance"].get("lowerings", {}))
    return dict(new, provenance=dict(new["provenance"], lowerings=lowerings, earlier=earlier),
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
    document = files.own_json(files.read_own(path))
    if document.get("format") != FORMAT:
        raise ValueError(f"{path}: format {document.get('format')!r}, expected {FORMAT}")
    return document


def write(path: Path, document: dict) -> None:
    """Atomic replace, as the fit table is written (the same writer)."""
    from patches.fitcheck.fit_table import write_table

    write_table(Path(path), document)
