"""Prints what the Turing clamp costs vLLM's unified attention, per Gemma 4 case of the GPU tier (or
the --cases given: tooling/attention_cases.py FAMILY_CASE_NAMES are attention-only families' layers),
timed on the GPU at hand under Turing's and Ampere's Triton lowering, and the launch
configurations it tried.

  bench/clamp_gpu [--json PATH] [--ranked-out PATH [--merge-ranked RANKED]] [--lowerings sm75,sm86,native]
                  [--cases A,B] [--kernels unified,encoder] [--dtype float16|bfloat16]

A proxy, not Turing speed: on a GPU that is not Turing (the H200 here) Triton is made to lower the
kernel as for sm_75 (TRITON_OVERRIDE_ARCH=sm75: no asynchronous copies, so no load pipelining;
the PTX and cubin still target the GPU at hand) or sm_86, with the clamp's limit forced to that
GPU's shared memory (Turing 65,536 bytes, Ampere sm_86 101,376). Only ratios between launches
mean anything; absolute proxy times are many times the native ones. The native sm_90 times of
the same launches stand beside them, labelled native.

Per lowering (tooling/clamp_sweep): every configuration (TILE_SIZE 16/32/64 x num_warps 2/4/8,
x num_stages default/1/2 where the lowering pipelines) compiled in parallel, its shared memory
read from the compiled kernel, timed when it fits the lowering's limit (vLLM's own launch is
always timed); then the clamp's own launch in a process with the limit forced and the fit table
of that capability. Times: median over batches of CUDA-graph replays of one unified_attention()
call (kernel, plus the split-K reduction for decode).

Reported per kernel path and case: clamped / default (vLLM's own launch), and clamped / the
fastest fitting configuration measured in the same run. The encoder attention kernel
(context_attention_fwd, tooling/encoder_sweep) is timed the same way per head size (BLOCK x
num_warps 2/4/8 x num_stages where the lowering pipelines), vLLM's platform made to report the
proxy's capability so that its own launch is that GPU's. --ranked-out writes the ranked
configurations the clamp chooses from (tooling/clamp_ranking.py, provenance included).
--dtype bfloat16 runs every launch (the sweeps', the clamp's) in bf16, as an Ampere GPU runs a bf16
checkpoint, with fit tables of bf16 launches, and ranks bf16 launches; Turing has no bf16, so only the
sm86 and native lowerings take it. --json PATH also writes the fit tables the clamp read to
fit-tables-NAME beside PATH (what --replay --fit-tables reads).
Uses $VLLM_TURING_GPU_SITE, $TURING_CLAMP_FIT_TABLE and $VLLM_TURING_GPU_FIT_TABLE_SM86 when set
(tests/gpu/run-on-device sets them), else prepares them from the vLLM release cache.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contract import layout
from contract.devices import DEVICES
from tooling import clamp_ranking as ranking
from tooling.attention_cases import CASE_NAMES, DTYPES, FAMILY_CASE_NAMES
from door.problem import Problem
from tooling.gpu_site import ensure_fit_table, ensure_site, python_env
from door import files
from door import children

REPO = Path(__file__).resolve().parents[1]
RANKED_BY = "bench/clamp_gpu --ranked-out PATH (tests/gpu/run-on-device run), from the sweeps of that run"
LOWERINGS = ("sm75", "native", "sm86")
# proxy lowering -> (the device it stands for, its opt-in shared memory per block, fit-table device)
PROXIES = {"sm75": ("Turing sm_75", DEVICES["sm75"].limit, "sm75"), "sm86": ("Ampere sm_86", DEVICES["sm86"].limit, "sm86")}
# --dtype -> the lowerings whose GPU runs it (the default --lowerings): vLLM casts a bf16 checkpoint to
# fp16 on Turing, which has no bf16
DTYPE_LOWERINGS = {"float16": LOWERINGS, "bfloat16": ("native", "sm86")}


def say(message: str) -> None:
    print(f"[clamp_gpu] {message}", file=sys.stderr, flush=True)


def sweep_env(site: Path, low: str, cache: Path, **extra) -> dict:
    env = python_env(site, **extra)
    env.pop("TRITON_OVERRIDE_ARCH", None)
    if low != "native":
        env["TRITON_OVERRIDE_ARCH"] = low
    env["TRITON_CACHE_DIR"] = str(cache)
    return env


CASES = ",".join(CASE_NAMES)  # --cases: which tooling/attention_cases.py cases the sweeps run
DTYPE = "float16"  # --dtype: what every launch of the sweeps and of the clamp's runs is in


def sweep_command(*args) -> list:
    return [sys.executable, "-m", "tooling.clamp_sweep", *args, "--cases", CASES, "--dtype", DTYPE]


def chosen_lowerings(given: str | None, dtype: str) -> list[str]:
    """--lowerings as a list (None: every lowering whose GPU runs `dtype`); ValueError, one line, when the dtype
    or a lowering is unknown, or a lowering stands for a GPU without that dtype."""
    if dtype not in DTYPE_LOWERINGS:
        raise ValueError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPE_LOWERINGS)}")
    lowerings = list(DTYPE_LOWERINGS[dtype]) if given is None else [low for low in given.split(",") if low]
    unknown = [low for low in lowerings if low not in LOWERINGS]
    if unknown:
        raise ValueError(f"unknown lowering {', '.join(unknown)}; expected some of {', '.join(LOWERINGS)}")
    without = [low for low in lowerings if low not in DTYPE_LOWERINGS[dtype]]
    if without:
        raise ValueError(f"--dtype {dtype} with --lowerings {','.join(lowerings)}: {', '.join(without)} stands for "
                         f"Turing, which has no {dtype} (vLLM runs a bf16 checkpoint in float16 there); use "
                         f"--lowerings {','.join(DTYPE_LOWERINGS[dtype])} or --dtype float16")
    return lowerings


def ranked_by(argv: list[str]) -> str:
    """The ranking's provenance `script`: the command line that ranked it."""
    return f"bench/clamp_gpu {shlex.join(argv)}, from the sweeps of that run"


def run(command: list, env: dict, what: str) -> None:
    done = children.run(command, cwd=REPO, env=env)
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-12:])
        raise Problem(f"{what} exited {done.returncode}:\n{tail}")


def start(command: list, env: dict, what: str):
    """A child process whose stderr (its progress lines, its errors) is this one's: a device call cut off
    mid-compile still shows how far each child got."""
    return what, subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)


def wait(processes) -> None:
    for what, process in processes:
        if process.wait():
            raise Problem(f"{what} exited {process.returncode} (its error is above)")


def clamped_runs(site: Path, tables: dict, lowerings, cache: Path, scratch: Path, ranked, label: str):
    """Processes recording the clamp's launches per proxy lowering, at its limit, with `ranked`
    (a ranked-configurations file; None: none, the fit table alone decides)."""
    runs = []
    for low in lowerings:
        if low in PROXIES:
            _, limit, device = PROXIES[low]
            extra = {layout.ENV_SMEM_LIMIT: str(limit), layout.ENV_FIT_TABLE: str(tables[device]),
                     ranking.ENV_RANKED: str(ranked) if ranked else ""}
            out = scratch / f"clamped-{label}-{low}.json"
            runs.append((low, out, start(sweep_command("clamped", "--out", str(out)),
                                         sweep_env(site, low, cache, **extra), f"clamped ({label}, {low})")))
    return runs


def collect(runs) -> dict:
    wait([process for _, _, process in runs])
    return {low: files.own_json(files.read_own(out)) for low, out, _ in runs}


def measure(site: Path, tables: dict, lowerings, scratch: Path, ranked: Path | None, workers: int,
            checkpoint=lambda measured: None, source: str = RANKED_BY) -> dict:
    """{"sweeps": {lowering: sweep}, "clamped": {"fail-safe" | "ranked": {proxy lowering: the clamp's
    launches}}, "ranked": the ranked-configurations document used, "ranking": the one this run's sweeps
    rank (what --ranked-out writes, --ranked or not)}. Compiles and the fail-safe clamp's
    launches run in parallel first, the sweeps one after the other; then the clamp with the ranked
    configurations (`ranked`, else those this run's sweeps rank). `checkpoint` gets what is
    measured so far after each step (a run cut short still leaves its figures)."""
    cache = Path(os.environ.get("TRITON_CACHE_DIR") or scratch / "triton-cache")
    started = time.monotonic()
    fail_safe = clamped_runs(site, tables, lowerings, cache, scratch, None, "fail-safe")
    wait([start(sweep_command("compile", "--shard", f"{index}/{workers}"), sweep_env(site, low, cache),
                f"compile shard {index} ({low})") for low in lowerings for index in range(workers)])
    measured = {"sweeps": {}, "clamped": {"fail-safe": collect(fail_safe)}}
    say(f"compiled every configuration in {time.monotonic() - started:.0f} s")
    for low in lowerings:
        out = scratch / f"sweep-{low}.json"
        started = time.monotonic()
        wait([start(sweep_command("sweep", "--out", str(out)), sweep_env(site, low, cache), f"sweep ({low})")])
        measured["sweeps"][low] = files.own_json(files.read_own(out))
        say(f"sweep {low} in {time.monotonic() - started:.0f} s")
        checkpoint(measured)
    measured["ranking"] = ranking.rank(measured["sweeps"], source=source)
    if ranked is None:
        ranked = scratch / "ranked-configs.json"
        ranking.write(ranked, measured["ranking"])
    measured["ranked"] = ranking.read(ranked)
    measured["clamped"]["ranked"] = collect(clamped_runs(site, tables, lowerings, cache, scratch, ranked, "ranked"))
    return measured


def measure_encoder(site: Path, tables: dict, lowerings, scratch: Path, workers: int, heads: str) -> dict:
    """{lowering: tooling/encoder_sweep's document}: every configuration compiled in parallel first,
    then timed one lowering after the other (the clamp at each proxy's limit reads that proxy's fit
    table; without one, a table of the needs its sweep compiled)."""
    cache = Path(os.environ.get("TRITON_CACHE_DIR") or scratch / "triton-cache")
    sweeps = {}

    def command(low, *args):
        table = ["--fit-table", str(tables[PROXIES[low][2]])] if low in PROXIES and PROXIES[low][2] in tables else []
        return [sys.executable, "-m", "tooling.encoder_sweep", "--heads", heads, "--dtype", DTYPE, *table, *args]

    started = time.monotonic()
    share = max(1, workers // len(lowerings))  # the lowerings compile side by side
    wait([start(command(low, "--compile-only", "--shard", f"{index}/{share}"), sweep_env(site, low, cache),
                f"encoder compile shard {index} ({low})") for low in lowerings for index in range(share)])
    say(f"encoder: compiled every configuration in {time.monotonic() - started:.0f} s")
    for low in lowerings:
        out = scratch / f"encoder-{low}.json"
        started = time.monotonic()
        wait([start(command(low, "--out", str(out)), sweep_env(site, low, cache), f"encoder sweep ({low})")])
        sweeps[low] = files.own_json(files.read_own(out))
        say(f"encoder sweep {low} in {time.monotonic() - started:.0f} s")
    return sweeps


def encoder_rows(sweeps: dict) -> list[dict]:
    """Per proxy lowering and head: vLLM's launch, the clamp's and the fastest fitting one, timed in
    one sweep (configurations as BLOCK/num_warps/num_stages)."""
    table = []
    native = sweeps.get("native")
    for low, sweep in sweeps.items():
        if low not in PROXIES:
            continue
        name, limit, _ = PROXIES[low]
        for case, result in sweep["cases"].items():
            configs = result["configs"]

            launch = result["clamped"]
            wanted = (launch["BLOCK_M"], launch["num_warps"], launch["num_stages"])
            clamped = next((r for r in configs if (r["block"], r["num_warps"], r["num_stages"]) == wanted
                            and "ms" in r), None)
            default = next(r for r in configs if r.get("vllm_default"))
            fitting = [r for r in configs if "ms" in r and r["shared"] <= limit]
            fastest = min(fitting, key=lambda r: r["ms"]) if fitting else None
            native_rows = native["cases"].get(case, {}).get("configs", []) if native else []
            native_default = next((r for r in native_rows if r.get("vllm_default")), None)
            table.append({
                "kernel": "encoder", "lowering": low, "limit": limit, "case": case,
                "dtype": sweep.get("dtype", "float16"),
                "proxy": f"{low} lowering on {sweep['gpu']} (proxy for {name}, not its speed)",
                "default": {k: default.get(k) for k in ("block", "num_warps", "num_stages", "shared", "ms")},
                "default_fits": default["shared"] <= limit,
                "clamped": dict(result["clamped"], ms=(clamped or {}).get("ms")),
                "fastest_fitting": None if fastest is None else {
                    k: fastest.get(k) for k in ("block", "num_warps", "num_stages", "shared", "ms")},
                "clamped_over_default": clamped["ms"] / default["ms"] if clamped and default.get("ms") else None,
                "clamped_over_fastest": clamped["ms"] / fastest["ms"] if clamped and fastest else None,
                "native_ms_default": (native_default or {}).get("ms"),
            })
    return table


def render_encoder(table: list[dict], sweeps: dict) -> str:
    def cfg(c):
        return "-" if not c else f"{c['block']}/{c['num_warps']}/{c['num_stages']}"

    dtypes = ", ".join(sorted({r["dtype"] for r in table})) or "float16"
    lines = [f"### Encoder attention (context_attention_fwd), {dtypes}: BLOCK/num_warps/num_stages, proxy times", "",
             "| proxy | case | default | clamped | fastest fitting | proxy ms default | proxy ms clamped | "
             "proxy ms fastest | clamped / default (proxy) | clamped / fastest (proxy) | native sm_90 ms default |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in table:
        default = cfg(r["default"]) + ("" if r["default_fits"] else f" ({r['default']['shared']:,} B, does not fit)")
        clamped = f"{r['clamped']['BLOCK_M']}/{r['clamped']['num_warps']}/{r['clamped']['num_stages']}"
        lines.append(f"| {PROXIES[r['lowering']][0]} | {r['case']} | {default} | {clamped} | {cfg(r['fastest_fitting'])} | "
                     f"{fmt(r['default']['ms'])} | {fmt(r['clamped']['ms'])} | {fmt((r['fastest_fitting'] or {}).get('ms'))} | "
                     f"{fmt(r['clamped_over_default'], 2)} | {fmt(r['clamped_over_fastest'], 2)} | "
                     f"{fmt(r['native_ms_default'])} |")
    lines.append("")
    return "\n".join(lines + tried_tables(sweeps, "Encoder configurations tried", cfg))


def tried_tables(sweeps: dict, heading: str, config_text) -> list[str]:
    """Per lowering, every configuration each case tried (vLLM's own launch, first, left out): its
    shared bytes and proxy ms. A column per configuration any case tried ("-" where a case did not:
    the encoder sweep tries BLOCK 128 only up to head 128)."""
    lines = []
    for low, sweep in sweeps.items():
        label = "native sm_90" if low == "native" else f"{low} lowering (proxy)"
        columns = list(dict.fromkeys(config_text(c) for case in sweep["cases"].values() for c in case["configs"][1:]))
        lines += [f"### {heading}, {label}: shared bytes / ms (x = not timed: does not fit "
                  f"{sweep['device_limit']:,} bytes; ! = refused; s = skipped: its need scaled from a "
                  "smaller BLOCK at its warps and stages is over the limit)", "",
                  "| case | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
        for case, result in sweep["cases"].items():
            cells = {config_text(c): "!" if "error" in c else "s" if "skipped" in c else
                     f"{c['shared']:,} / " + (fmt(c["ms"]) if "ms" in c else "x") for c in result["configs"][1:]}
            lines.append(f"| {case} | " + " | ".join(cells.get(column, "-") for column in columns) + " |")
        lines.append("")
    return lines


def decide_on_cpu(measured: dict, fit_tables: dict, ranked: Path) -> dict:
    """{proxy lowering: {"cases": {case: launch}}}: the launch the clamp makes per case, decided by the
    clamp's own code (patches/turing_clamp/runtime.py, as inserted into vLLM) on CPU, from the fit
    tables and ranked configurations given; the limit and cc those of the proxy, vLLM's release the
    sweep's. The times for these launches come from the sweep of the same configuration."""
    import torch

    from patches.turing_clamp import runtime
    from tooling.attention_cases import case_named

    decided = {}
    import logging

    # vLLM's tile of the path a case does not take is passed as its own: its "no entry" warning is noise here
    logging.getLogger(runtime.__name__).setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="clamp-gpu-replay-") as tmp:
        for low, sweep in measured["sweeps"].items():
            if low not in PROXIES:
                continue
            _, limit, device = PROXIES[low]
            table = Path(tmp) / f"fit-table-{device}.json"
            table.write_text(json.dumps(fit_tables[device]))
            saved = {name: os.environ.get(name) for name in (layout.ENV_SMEM_LIMIT, layout.ENV_CC,
                                                             layout.ENV_FIT_TABLE, ranking.ENV_RANKED)}
            os.environ.update({layout.ENV_SMEM_LIMIT: str(limit), layout.ENV_CC: str(ranking.PROXY_CC[low]),
                               layout.ENV_FIT_TABLE: str(table), ranking.ENV_RANKED: str(ranked)})
            release = runtime._vllm_turing_release
            runtime._vllm_turing_release = lambda: sweep["vllm"]
            try:
                cases = {}
                for name, case in sweep["cases"].items():
                    for cache in (runtime._vllm_turing_clamp_cache, runtime._vllm_turing_fit_tables,
                                  runtime._vllm_turing_ranked_tables):
                        cache.clear()
                    default = case["default"]
                    layer = case_named(name).layer
                    q = torch.empty((1, layer.num_query_heads, layer.head_size),
                                    dtype=getattr(torch, sweep.get("dtype", "float16")))
                    tile = default["TILE_SIZE"]
                    prefill, decode, stages = runtime._vllm_turing_clamp(
                        q, default["BLOCK_M"], tile, tile, sliding_window=layer.sliding_window or 0)
                    options = runtime._vllm_turing_path_options.get(bool(default["IS_3D"]), {})
                    launch = {"TILE_SIZE": decode if default["IS_3D"] else prefill, "IS_3D": default["IS_3D"],
                              "num_warps": options.get("num_warps"), "num_stages": options.get("num_stages", stages)}
                    row = timed_config(sweep, name, config_of(launch))
                    cases[name] = dict(launch, shared=(row or {}).get("shared"))
                decided[low] = {"cases": cases}
            finally:
                runtime._vllm_turing_release = release
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
    return decided


def config_of(launch: dict) -> dict:
    return {"tile_size": launch["TILE_SIZE"], "num_warps": launch["num_warps"], "num_stages": launch["num_stages"]}


def same_config(a: dict, b: dict) -> bool:
    return ranking.normal(a) == ranking.normal(b)


def timed_config(sweep: dict, case: str, config: dict) -> dict | None:
    """The sweep's row of `config` for `case` (vLLM's own launch when it is that), its "ms" the mean of
    every row of that compile (vLLM's own launch is timed again where a swept configuration equals it),
    as tooling/clamp_ranking.py ranks them."""
    rows = [r for r in (sweep["cases"][case]["configs"] if sweep else []) if same_config(r, config) and "ms" in r]
    return dict(rows[0], ms=sum(r["ms"] for r in rows) / len(rows)) if rows else None


def fastest_fitting(sweep: dict, case: str, limit: int) -> dict | None:
    """The fitting configuration of least mean time (timed_config's mean), or None."""
    timed = [timed_config(sweep, case, r) for r in sweep["cases"][case]["configs"]
             if "ms" in r and r.get("shared", limit + 1) <= limit]
    return min(timed, key=lambda r: r["ms"]) if timed else None


def rows(measured: dict) -> list[dict]:
    """Per clamp mode, proxy lowering and case: vLLM's launch, the clamp's, the fastest fitting one,
    all timed in the same sweep (the clamp's launch is one of its configurations)."""
    table = []
    native = measured["sweeps"].get("native")
    for mode, by_lowering in measured["clamped"].items():
        for low, clamped_doc in by_lowering.items():
            name, limit, _ = PROXIES[low]
            sweep = measured["sweeps"].get(low)
            if sweep is None:
                continue
            for case in sweep["cases"]:
                configs = sweep["cases"][case]["configs"]
                launch = clamped_doc["cases"][case]
                clamped = config_of(launch)
                timed = timed_config(sweep, case, clamped)
                fastest = fastest_fitting(sweep, case, limit)
                vllms = next(r for r in configs if r.get("vllm_default"))
                default_config = {"tile_size": vllms["tile_size"], "num_warps": None, "num_stages": None}
                default = timed_config(sweep, case, default_config) or vllms
                native_default = timed_config(native, case, default_config)
                native_clamped = timed_config(native, case, clamped)
                clamped_ms = (timed or {}).get("ms")
                table.append({
                    "mode": mode, "lowering": low, "limit": limit, "case": case,
                    "dtype": sweep.get("dtype", "float16"),
                    "proxy": f"{low} lowering on {sweep['gpu']} (proxy for {name}, not its speed)",
                    "path": "3d" if launch["IS_3D"] else "2d",
                    "default": dict(default_config, shared=default.get("shared"), proxy_ms=default.get("ms"),
                                    fits=default.get("shared", limit + 1) <= limit),
                    "clamped": dict(clamped, shared=launch["shared"], proxy_ms=clamped_ms),
                    "fastest_fitting": None if fastest is None else {
                        k: fastest.get(k) for k in ("tile_size", "num_warps", "num_stages", "shared", "ms")},
                    "clamped_over_default": clamped_ms / default["ms"] if clamped_ms and default.get("ms") else None,
                    "clamped_over_fastest": clamped_ms / fastest["ms"] if clamped_ms and fastest else None,
                    "native_ms": {"default": (native_default or {}).get("ms"),
                                  "clamped": (native_clamped or {}).get("ms")},
                })
    return table


def fmt_config(c: dict | None) -> str:
    if not c:
        return "-"
    return f"{c['tile_size']}/{c['num_warps'] or 'd'}/{c['num_stages'] or 'd'}"


def fmt(value, digits=3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(table: list[dict], measured: dict) -> str:
    lines = ["Configurations are TILE_SIZE/num_warps/num_stages (d = Triton's default: 4 warps, 3 stages).",
             "Proxy times: Triton lowering for the named GPU on this GPU, a proxy, not that GPU's speed.", ""]
    modes = {"fail-safe": "the clamp with the fit table alone (no ranked configurations)",
             "ranked": "the clamp with the ranked configurations",
             "ranked, decided on CPU": "the clamp with the ranked configurations, its launches decided by "
                                       "its own code on CPU (--replay), times from the sweep above"}
    for mode, by_lowering in measured["clamped"].items():
        for low in by_lowering:
            name, limit, _ = PROXIES[low]
            dtype = measured["sweeps"].get(low, {}).get("dtype", "float16")
            lines += [f"### {name} proxy ({low} lowering, limit {limit:,} bytes, {dtype}): {modes[mode]}", "",
                      "| case | path | default | clamped | fastest fitting | proxy ms default | proxy ms clamped | "
                      "proxy ms fastest | clamped / default (proxy) | clamped / fastest (proxy) | native sm_90 ms default | "
                      "native sm_90 ms clamped | clamped / default (native) |",
                      "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for r in (r for r in table if r["lowering"] == low and r["mode"] == mode):
                nd, nc = r["native_ms"]["default"], r["native_ms"]["clamped"]
                default = fmt_config(r["default"]) + ("" if r["default"]["fits"] else
                                                      f" ({r['default']['shared']:,} B, does not fit)")
                lines.append(
                    f"| {r['case']} | {r['path']} | {default} | {fmt_config(r['clamped'])} | "
                    f"{fmt_config(r['fastest_fitting'])} | {fmt(r['default']['proxy_ms'])} | {fmt(r['clamped']['proxy_ms'])} | "
                    f"{fmt((r['fastest_fitting'] or {}).get('ms'))} | {fmt(r['clamped_over_default'], 2)} | "
                    f"{fmt(r['clamped_over_fastest'], 2)} | {fmt(nd)} | {fmt(nc)} | {fmt(nc / nd if nc and nd else None, 2)} |")
            lines.append("")
    return "\n".join(lines + tried_tables(measured["sweeps"], "Configurations tried", fmt_config))


def replay(args) -> int:
    """--replay: the tables of an earlier run with the clamp's launches decided anew on CPU."""
    for option, path in (("--replay", args.replay), ("--fit-tables", args.fit_tables)):
        if path is None or not path.is_file():
            print(f"bench/clamp_gpu: {option} {path} does not exist; pass the files of a run of "
                  "tests/gpu/run-on-device (bench.json, fit-tables.json)", file=sys.stderr)
            return 2
    earlier = files.own_json(files.read_own(args.replay))
    measured = {"sweeps": earlier["sweeps"], "clamped": {}}
    with tempfile.TemporaryDirectory(prefix="clamp-gpu-replay-") as tmp:
        ranked = args.ranked or Path(tmp) / "ranked-configs.json"
        measured["ranking"] = ranking.rank(measured["sweeps"], source=RANKED_BY + "; re-ranked by --replay",
                                           measured_at=earlier.get("measured_at") or
                                           earlier.get("ranked", {}).get("provenance", {}).get("measured_at"))
        if args.ranked is None:
            ranking.write(ranked, measured["ranking"])
        measured["ranked"] = ranking.read(ranked)
        measured["clamped"]["fail-safe"] = earlier["clamped"]["fail-safe"]
        measured["clamped"]["ranked, decided on CPU"] = decide_on_cpu(
            measured, files.own_json(files.read_own(args.fit_tables)), ranked)
    table = rows(measured)
    print(render(table, measured))
    if args.json:
        args.json.write_text(json.dumps({"rows": table, "replayed": str(args.replay), **measured}, indent=1))
    if args.ranked_out:
        ranking.write(args.ranked_out, measured["ranking"])
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="bench/clamp_gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the rows, the sweeps and the clamp's launches here")
    parser.add_argument("--ranked-out", type=Path, help="write the ranked configurations (from this run's sweeps) here")
    parser.add_argument("--ranked", type=Path, help="the ranked clamp reads this ranked-configurations file "
                        f"(${ranking.ENV_RANKED}); default: the one this run's sweeps rank")
    parser.add_argument("--lowerings", help=f"comma-separated, some of {', '.join(LOWERINGS)} (default: those "
                        "whose GPU runs --dtype: all for float16, native and sm86 for bfloat16)")
    parser.add_argument("--dtype", default="float16", metavar="|".join(DTYPES), help="the dtype of every launch "
                        "timed and ranked: float16 (default) or bfloat16 (what an Ampere GPU runs a bf16 checkpoint "
                        "in; not with the sm75 lowering)")
    parser.add_argument("--replay", type=Path, metavar="BENCH_JSON",
                        help="no GPU: re-rank the sweeps of an earlier run's --json output (or use --ranked) and "
                             "decide the clamp's launches with its own code on CPU; needs --fit-tables")
    parser.add_argument("--fit-tables", type=Path, help="with --replay: that run's fit-tables.json "
                        "({\"sm75\": table, \"sm86\": table}, tests/gpu/run-on-device; bench/clamp_gpu --json "
                        "PATH writes the tables it used to fit-tables-NAME beside PATH)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="compile processes per lowering")
    parser.add_argument("--cases", default=",".join(CASE_NAMES), help="comma-separated cases of "
                        "tooling/attention_cases.py (default: the GPU tier's Gemma 4 cases; FAMILY_CASE_NAMES "
                        "are the attention-only families' layers)")
    parser.add_argument("--merge-ranked", type=Path, metavar="RANKED", help="with --ranked-out: keep RANKED's "
                        "launches that this run did not rank (e.g. the repository's file)")
    parser.add_argument("--encoder-heads", default="64,72,128,256,512", help="the encoder kernel's head sizes")
    parser.add_argument("--encoder-tables", choices=("fit-check", "sweep"), default="fit-check",
                        help="the encoder clamp's fit table: the site's (patches.fitcheck, about 2 min) or the "
                             "needs its own sweep compiles")
    parser.add_argument("--kernels", default="unified,encoder", help="which kernels to time: unified (vLLM's "
                        "unified attention, the --cases) and/or encoder (context_attention_fwd per head size)")
    args = parser.parse_args(argv)
    kernels = [k for k in args.kernels.split(",") if k]
    if any(not h.isdigit() for h in args.encoder_heads.split(",")):
        print(f"bench/clamp_gpu: --encoder-heads {args.encoder_heads!r}: expected head sizes such as 128,256",
              file=sys.stderr)
        return 2
    if not kernels or set(kernels) - {"unified", "encoder"}:
        print(f"bench/clamp_gpu: --kernels {args.kernels!r}: expected unified and/or encoder", file=sys.stderr)
        return 2
    global CASES, DTYPE
    unknown_cases = [name for name in args.cases.split(",") if name not in CASE_NAMES + FAMILY_CASE_NAMES]
    if unknown_cases or not args.cases:
        print(f"bench/clamp_gpu: unknown case {', '.join(unknown_cases) or '(none given)'}; expected some of "
              f"{', '.join(CASE_NAMES + FAMILY_CASE_NAMES)}", file=sys.stderr)
        return 2
    CASES, DTYPE = args.cases, args.dtype
    if args.merge_ranked is not None and not args.merge_ranked.is_file():
        print(f"bench/clamp_gpu: --merge-ranked {args.merge_ranked} does not exist; pass a ranked-configurations "
              "file (patches/turing_clamp/ranked-configs.json)", file=sys.stderr)
        return 2
    try:
        lowerings = chosen_lowerings(args.lowerings, args.dtype)
    except ValueError as error:
        print(f"bench/clamp_gpu: {error}", file=sys.stderr)
        return 2
    if args.replay is not None:
        return replay(args)
    if args.ranked is not None and not args.ranked.is_file():
        print(f"bench/clamp_gpu: --ranked {args.ranked} does not exist; pass a ranked-configurations file", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="clamp-gpu-") as tmp:
        scratch = Path(tmp)
        try:
            site = ensure_site(scratch)
            tables = {} if kernels == ["encoder"] and args.encoder_tables == "sweep" else {
                device: ensure_fit_table(site, scratch, device, args.dtype) for low, (_, _, device) in PROXIES.items()
                if low in lowerings}
            if args.json and tables:  # what --replay --fit-tables reads
                args.json.with_name("fit-tables-" + args.json.name).write_text(
                    json.dumps({device: files.own_json(files.read_own(table)) for device, table in tables.items()}))
            partial = (lambda measured: args.json.write_text(json.dumps({"partial": True, **measured}))) \
                if args.json else (lambda measured: None)
            encoder = measure_encoder(site, tables, lowerings, scratch, args.workers, args.encoder_heads) if "encoder" in kernels else {}
            encoder_table = encoder_rows(encoder)
            if encoder:
                print(render_encoder(encoder_table, encoder), flush=True)
                if args.json:
                    args.json.with_name("encoder-" + args.json.name).write_text(
                        json.dumps({"rows": encoder_table, "sweeps": encoder}, indent=1))
            source = ranked_by(argv)
            encoder_ranked = ranking.rank_encoder(encoder, source=source) if encoder else None
            if "unified" not in kernels:
                write_ranked(args, encoder_ranked)
                return 0
            measured = measure(site, tables, lowerings, scratch, args.ranked, args.workers, partial, source)
        except Problem as error:
            print(f"bench/clamp_gpu: {error}", file=sys.stderr)
            return 1
    table = rows(measured)
    print(render(table, measured))
    if args.json:
        args.json.write_text(json.dumps({"rows": table, "measured_at": measured["ranking"]["provenance"]["measured_at"],
                                         **measured}, indent=1))
    write_ranked(args, ranking.merged(measured["ranking"], encoder_ranked) if encoder_ranked else measured["ranking"])
    return 0


def write_ranked(args, document: dict | None) -> None:
    """--ranked-out: this run's ranking, joined with --merge-ranked's launches when given."""
    if args.ranked_out and document:
        kept = ranking.read(args.merge_ranked) if args.merge_ranked else None
        ranking.write(args.ranked_out, ranking.merged(kept, document) if kept else document)


if __name__ == "__main__":
    raise SystemExit(main())
