"""The fit check's report: launch rows, verdicts, inertness and the printed table (pure)."""
from __future__ import annotations

import re

# What must match between patched and unpatched launches for the clamp to be inert.
LAUNCH_PARAMETERS = ("kernel", "path", "grid", "tile_size", "block_m", "launch_num_warps", "launch_num_stages")
# Where a row's `shared` came from.
COMPILED = "compiled"  # Triton compiled the launch in this run
TABLE = "table"  # the known fit table (the build's compile of the same key)


def launch_row(launch, result, limit: int, source: str = COMPILED) -> dict:
    """One report entry from a recorded launch (recorder.Launch) and its compile;
    `source` says where `shared` came from (COMPILED or TABLE)."""
    case = launch.case
    shared = result.shared
    return {
        "model": case.shape.model,
        "layer": case.shape.layer,
        "head_size": case.shape.head_size,
        "kind": case.kind,
        "query_len": case.query_len,
        "num_seqs": case.num_seqs,
        "kernel": launch.kernel_name,
        "path": launch.path,
        "grid": None if callable(launch.grid) else list(launch.grid),  # a grid function: sized at launch
        "tile_size": launch.tile,
        "block_m": launch.param("BLOCK_M"),
        "block_q": launch.param("BLOCK_Q"),
        "launch_num_warps": launch.options.get("num_warps"),
        "launch_num_stages": launch.options.get("num_stages"),
        "num_warps": result.num_warps,
        "num_stages": result.num_stages,
        "shared": shared,
        "source": source,
        "limit": limit,
        "headroom": None if shared is None else limit - shared,
        "fits": shared is not None and shared <= limit,
        "error": result.error,
    }


def is_inert(patched: list[dict], unpatched: list[dict]) -> bool:
    """True when every patched launch has the unpatched launcher's parameters."""
    def parameters(rows):
        return [tuple(str(row[key]) for key in LAUNCH_PARAMETERS) for row in rows]

    return parameters(patched) == parameters(unpatched)


def build_report(*, versions: dict, device: dict, launches: list[dict], unpatched: list[dict] | None,
                 elapsed_s: float, table: dict | None = None, known_table: dict | None = None,
                 mixers: list[dict] = ()) -> dict:
    """`mixers`: the Mamba-2 mixers' rows (the clamp does not touch them, so they take no part in
    inertness); the verdict and the largest need cover them."""
    every = list(launches) + list(mixers)
    shared = [row["shared"] for row in every if row["shared"] is not None]
    report = {
        "vllm_version": versions["vllm"],
        "triton_version": versions["triton"],
        "device": device,
        "launches": launches,
        "mixer_launches": list(mixers),
        "max_shared": max(shared, default=None),
        "all_fit": all(row["fits"] for row in every),
        "inert": None if unpatched is None else is_inert(launches, unpatched),
        "unpatched": unpatched,
        "elapsed_s": round(elapsed_s, 2),
    }
    if table is not None:
        report["fit_table"] = table
    if known_table is not None:
        sources = [row["source"] for row in launches + (unpatched or [])]
        report["known_table"] = dict(known_table, from_table=sources.count(TABLE),
                                     compiled=sources.count(COMPILED))
    return report


def failures(report: dict) -> list[str]:
    """One line per launch that does not fit, naming it."""
    lines = []
    for row in report["launches"] + report.get("mixer_launches", []):
        if row["fits"]:
            continue
        tile = "BLOCK_N" if row["path"] == "encoder" else "TILE_SIZE"
        if row["path"] == "mamba":
            tuned = row.get("autotune")
            configs = f", none of its {tuned['configs']} autotune configurations fits" if tuned else ""
            what = f"{row['model']}/{row['layer']} {row['kind']} (head dim {row['head_size']}, {row['kernel']}{configs})"
        else:
            what = (f"{row['model']}/{row['layer']} {row['kind']} (query_len {row['query_len']}, "
                    f"head {row['head_size']}, {row['kernel']} {row['path']}, {tile} {row['tile_size']}, "
                    f"BLOCK_M {row['block_m']})")
        if row["shared"] is None:
            lines.append(f"{what} did not compile: {row['error']}")
        else:
            lines.append(f"{what} needs {row['shared']} bytes of shared memory, limit {row['limit']}")
    return lines


def _group(rows: list[dict], twins: list[dict] | None) -> list[tuple[list[dict], dict | None]]:
    """Launches of one shape and kind that differ only in query_len (and so grid) print as
    one row, e.g. query_len 2-8; the order of first appearance is kept."""
    def identity(row, twin):
        kept = lambda r: tuple((k, str(v)) for k, v in r.items() if k not in ("query_len", "grid"))
        return kept(row), kept(twin) if twin else None

    groups: dict[tuple, tuple[list[dict], dict | None]] = {}
    for index, row in enumerate(rows):
        twin = twins[index] if twins else None
        groups.setdefault(identity(row, twin), ([], twin))[0].append(row)
    return list(groups.values())


def _text(value) -> str:
    return "-" if value is None else str(value)


def format_table(report: dict) -> str:
    """The per-launch table; with an unpatched comparison, its tile and bytes side by side."""
    unpatched = report["unpatched"]
    header = ["shape", "kind", "q_len", "kernel", "path", "TILE", "BLOCK_M", "warps", "stages",
              "shared", "source", "limit", "headroom", "fits"]
    if unpatched is not None:
        header += ["unpatched TILE", "unpatched shared"]
    lines = [header]
    mixers = [(rows, None) for rows, _ in _group(report.get("mixer_launches", []), None)]
    for rows, twin in _group(report["launches"], unpatched) + mixers:
        row = rows[0]
        lens = sorted({r["query_len"] for r in rows})
        q_len = str(lens[0]) if len(lens) == 1 else f"{lens[0]}-{lens[-1]}"
        line = [f"{row['model']}/{row['layer']} h{row['head_size']}", row["kind"], q_len,
                row["kernel"].replace("kernel_unified_attention", "attention"), row["path"],
                _text(row["tile_size"]), _text(row["block_m"]), _text(row["num_warps"]),
                _text(row["num_stages"]), _text(row["shared"]), row["source"], str(row["limit"]),
                _text(row["headroom"]), "yes" if row["fits"] else "NO"]
        if unpatched is not None:
            line += [_text(twin["tile_size"]) if twin else "-", _text(twin["shared"]) if twin else "-"]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in lines)


def summary(report: dict) -> str:
    device = report["device"]
    verdict = "every launch fits" if report["all_fit"] else "launches do NOT fit"
    text = (f"vLLM {report['vllm_version']}, Triton {report['triton_version']}, {device['name']} "
            f"(cc {device['cc']}, limit {device['limit']} bytes): "
            f"{len(report['launches']) + len(report.get('mixer_launches', []))} launches, "
            f"max shared {report['max_shared']} bytes, {verdict} ({report['elapsed_s']} s)")
    known = report.get("known_table")
    if known is not None and known["used"]:
        text += f"; {known['from_table']} from the fit table {known['path']}, {known['compiled']} compiled"
    elif known is not None:
        text += f"; fit table {known['path']} ignored ({known['ignored_because']}), every launch compiled"
    if report["inert"] is not None:
        text += "; " + _inertness(report["inert"])
    return text


def _inertness(inert: bool) -> str:
    return "patched launches identical to unpatched" if inert else "the clamp changed launch parameters"


def pass_line(report: dict) -> str:
    """One pass in one line: its launches, its largest need against the limit, its verdict."""
    device = report["device"]
    launches, mixers = len(report["launches"]), len(report.get("mixer_launches", []))
    verdict = "every launch fits" if report["all_fit"] else "launches do NOT fit"
    return (f"{launches + mixers} launches ({launches} attention, {mixers} mixer), largest need "
            f"{report['max_shared']} of {device['limit']} bytes: {verdict}")


def _largest(report: dict) -> dict | None:
    rows = [row for row in report["launches"] + report.get("mixer_launches", []) if row["shared"] is not None]
    return max(rows, key=lambda row: row["shared"], default=None)


def _models(rows: list[dict]) -> list[str]:
    """The models of the rows, each once: a tensor-parallel rank (name-tpN) counts as its model."""
    return sorted({re.sub(r"-tp\d+$", "", row["model"]) for row in rows})


MODELS_SHOWN = 12


def build_summary(reports: list[dict], table_path: str) -> list[str]:
    """The build's fit verdict in a few lines: per device and dtype the launches and the largest need
    against the limit, the models proven, and those of the same matrix proven on another device but
    left out here (vLLM cannot serve them there); where the full reports and the table are. A device's
    dtypes whose verdicts read the same share their lines ("sm86 float16 and bfloat16: ...")."""
    matrices: dict[str, set] = {}
    for report in reports:
        matrices.setdefault(report.get("matrix", "all"), set()).update(
            _models(report["launches"] + report.get("mixer_launches", [])))
    verdicts: dict[tuple, list[str]] = {}  # the lines but the dtype -> the dtypes, in report order
    for report in reports:
        device, rows = report["device"], report["launches"] + report.get("mixer_launches", [])
        largest = _largest(report)
        worst = f" ({largest['model']}/{largest['layer']}, {largest['kernel']})" if largest else ""
        models = _models(rows)
        left_out = sorted(matrices[report.get("matrix", "all")] - set(models))
        lines = (f"{len(rows)} launches, largest need {report['max_shared']} of {device['limit']} bytes{worst}, "
                 f"{'every launch fits' if report['all_fit'] else 'launches do NOT fit'}",
                 f"  proven: {len(models)} models ({_listed(models)})",
                 *([f"  not proven, vLLM cannot serve them here: {_listed(left_out)}"] if left_out else []))
        verdicts.setdefault((device["name"], lines), []).append(report.get("dtype", "float16"))
    summary = []
    for (device, (first, *rest)), dtypes in verdicts.items():
        summary += [f"{device} {' and '.join(dtypes)}: {first}", *rest]
    summary.append(f"the fit table: {table_path}; every launch: the fit-report*.json.gz beside it")
    return summary


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MODELS_SHOWN])
    return shown + (f" and {len(names) - MODELS_SHOWN} more" if len(names) > MODELS_SHOWN else "")
