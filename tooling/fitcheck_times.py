"""Cold and warm wall time of the build's fit check over the built-in matrix.

    bench/fitcheck [--image REF] [--device sm75] [--matrix all|gemma4] [--full-compile]
    bench/fitcheck --build-step [--image REF] [--with-record]

Runs, inside a container of the image with this checkout's patches/ mounted, the command the
Dockerfile runs (`python3 -m patches.fitcheck --device D --write-table ... --compare-unpatched
--json`) twice: first with an empty Triton cache (cold), then again with the cache the first
run filled (warm), each with its wall time and the CPU time of the check and its compile workers
(the steadier figure on a shared host). The clamp is applied first, to both launchers, when the image's vLLM lacks it
(not timed). Targets on a 2-core host: cold <= 90 s for the Gemma 4 matrix and <= 240 s for all of
it (Gemma 4 at tensor parallel 1, 2 and 4, the families and the encoder layers), warm <= 10 s.
The check compiles as far as Triton's shared-memory allocation and cross-checks the largest launch of
each kernel in full (patches/fitcheck/compiler.py); --full-compile times the check compiling every
launch to cubin, as it did before. --build-step times the Dockerfile's whole fit-check step instead
(`python3 -m patches.fitcheck.image_passes`: sm_75, sm_86 in fp16 and bf16, sm_90 for Gemma 4, one
process, into a fresh fit table), and breaks its cold run down per stage (imports, each pass, each group's
confirming full compiles), per model family (recording time, compiles and their CPU, from the step's own
ledgers: tooling/fitcheck_costs.py) and per kernel; its report line counts the sm_75 pass. With --with-record the step
takes this checkout's compile record (contract/compile-records/, bind-mounted where the Dockerfile mounts
it), as a fresh host's build does; without it every launch is compiled, as after a vLLM or Triton bump.
"""
import argparse
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
from contract.clamp_paths import COMPILE_RECORDS_MOUNT
from contract.pins import PYPI_BASE_TAG
from door import files
from door import children

TARGETS = {"gemma4": {"cold": 90.0, "warm": 10.0}, "all": {"cold": 240.0, "warm": 10.0},
           "build step": {"cold": 90.0, "warm": 60.0}}

# Runs in the container; prints one JSON line per timed run.
SCRIPT = r"""
set -e
python3 -m patches.turing_clamp check >/dev/null 2>&1 || python3 -m patches.turing_clamp apply >/dev/null
python3 -m patches.turing_clamp check --site encoder >/dev/null 2>&1 || python3 -m patches.turing_clamp apply --site encoder >/dev/null
export TRITON_CACHE_DIR=$(mktemp -d)
for phase in cold warm; do
  python3 - "$phase" $FULL <<'PY'
import json, os, resource, subprocess, sys, time
phase = sys.argv[1]
start = time.monotonic()
if os.environ["BUILD_STEP"]:
    from contract.clamp_paths import FIT_REPORT, FIT_TABLE, read_report
    os.makedirs("/opt/vllm-turing", exist_ok=True)  # the base image has none
    for name in (FIT_TABLE, FIT_REPORT):
        if os.path.exists(name):
            os.remove(name)
    # The step's own code in this process, so its ledger of compiles gives the breakdown.
    imported = time.monotonic()
    import vllm, torch, triton  # noqa: F401
    from patches.fitcheck import compiler, image_passes
    stages = [("imports (vllm, torch, triton)", time.monotonic() - imported, 0, 0)]
    rc = image_passes.main()
    for label, wall, first, last in stages + image_passes.TIMINGS:
        spent = compiler.LEDGER[first:last]
        print(json.dumps({"stage": label, "wall_s": round(wall, 1), "compiles": len(spent),
                          "compile_cpu_s": round(sum(entry.result.cpu_s for entry in spent), 1)}))
    from patches.fitcheck import families
    from patches.fitcheck.recorder import RECORDING
    from tooling.fitcheck_costs import by_family
    origins = {shape: name for dtype in ("float16", "bfloat16") for name, shape in families.builtin_by_family("all", dtype)}
    for cost in by_family(compiler.LEDGER, RECORDING, lambda shape: families.charged_to(shape, origins)):
        print(json.dumps(cost.as_dict()))
    kernels = {}
    for entry in compiler.LEDGER:
        counted = kernels.setdefault((entry.kernel, entry.mode), [0, 0.0])
        counted[0] += 1
        counted[1] += entry.result.cpu_s
    for (kernel, mode), (count, cpu) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:15]:
        print(json.dumps({"kernel": kernel, "mode": mode, "compiles": count, "compile_cpu_s": round(cpu, 1)}))
    report = read_report(FIT_REPORT)
else:
    rc = subprocess.run([sys.executable, "-m", "patches.fitcheck", "--device", os.environ["DEVICE"], "--matrix",
                         os.environ["MATRIX"], "--write-table", "/tmp/fit-table.json", "--compare-unpatched", "--json",
                         *sys.argv[2:]], stdout=open("/tmp/report.json", "w")).returncode
    report_path = "/tmp/report.json"
wall = time.monotonic() - start
used = resource.getrusage(resource.RUSAGE_CHILDREN)  # the check and its compile workers
if not os.environ["BUILD_STEP"]:
    report = json.load(open(report_path))
print(json.dumps({"phase": phase, "wall_s": round(wall, 1), "cpu_s": round(used.ru_utime + used.ru_stime, 1), "rc": rc,
                  "launches": len(report["launches"]) + len(report["unpatched"] or []),
                  "all_fit": report["all_fit"], "max_shared": report["max_shared"],
                  "shapes": len({(r["model"], r["layer"]) for r in report["launches"]}),
                  "mode": report["compile"]["mode"], "cross_checked": len(report["compile"]["cross_checked"])}))
PY
done
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=PYPI_BASE_TAG)
    parser.add_argument("--device", default="sm75")
    parser.add_argument("--matrix", default="all", choices=("all", "gemma4"))
    parser.add_argument("--full-compile", action="store_true", help="compile every launch to cubin")
    parser.add_argument("--build-step", action="store_true", help="time the Dockerfile's whole fit-check step")
    parser.add_argument("--with-record", action="store_true",
                        help="with --build-step: the step takes contract/compile-records/ as the build does")
    args = parser.parse_args()
    if args.with_record and not args.build_step:
        parser.error("--with-record goes with --build-step")
    if args.build_step:
        args.device, args.matrix = "sm75, sm86 (fp16, bf16), sm90", "build step"
    records = ["-v", f"{REPO / 'contract' / 'compile-records'}:{COMPILE_RECORDS_MOUNT}:ro"] if args.with_record else []
    # The clamp reads its ranked launches from the image's install folder, which a base image lacks: name
    # this checkout's file, so the check records the launches the built image's clamp makes.
    command = ["docker", "run", "--rm", "--entrypoint", "bash", "-e", "CUDA_VISIBLE_DEVICES=",
               "-e", "TURING_CLAMP_RANKED_CONFIGS=/bench-src/patches/turing_clamp/ranked-configs.json",
               "-e", f"BUILD_STEP={'1' if args.build_step else ''}",
               "-e", f"FULL={'--full-compile' if args.full_compile else ''}",
               "-e", f"DEVICE={args.device}", "-e", f"MATRIX={args.matrix}", "-e", "PYTHONPATH=/bench-src", "-w", "/bench-src",
               "-v", f"{REPO}:/bench-src:ro", *records, args.image, "-c", SCRIPT]
    done = children.run(command)
    lines = [files.own_json(line) for line in done.stdout.splitlines() if line.startswith("{")]
    runs = [line for line in lines if "phase" in line]
    breakdown = [line for line in lines if "phase" not in line]
    if done.returncode != 0 or len(runs) != 2:
        print(f"bench/fitcheck: the container failed (exit {done.returncode}): "
              f"{done.stderr.strip().splitlines()[-1:] or ['no output']}", file=sys.stderr)
        return 1
    cores = children.run(["nproc"]).stdout.strip()
    print(f"fit check, {args.device}, matrix {args.matrix}{', compile record' if args.with_record else ''}, "
          f"image {args.image}, {cores} cores, "
          f"{runs[0].get('shapes', '?')} layer shapes, {runs[0]['launches']} launches (patched + unpatched), "
          f"max shared {runs[0]['max_shared']} bytes, all fit: {runs[0]['all_fit']}, compile {runs[0]['mode']} "
          f"({runs[0]['cross_checked']} kernels cross-checked in full)")
    cold = breakdown[:len(breakdown) // 2]  # the cold run's
    if cold:
        print("  where the cold build step's time goes (wall; compiles and their CPU seconds, both cores):")
        for line in [line for line in cold if "family" not in line]:
            name = line.get("stage") or f"{line['kernel']} ({line['mode']})"
            wall = f"{line['wall_s']:>7.1f} s wall" if "wall_s" in line else " " * 14
            print(f"    {name:<58} {wall}  {line['compiles']:>4} compiles {line['compile_cpu_s']:>7.1f} s CPU")
        print("  by family (recording: wall seconds over its cases; compiles charged to the family that asked first):")
        for line in [line for line in cold if "family" in line]:
            compiles = ", ".join(f"{count} {mode}" for mode, count in line["compiles"].items()) or "none"
            print(f"    {line['family']:<16} recording {line['recording_s']:>5.1f} s, {line['recording_calls']:>5} calls   "
                  f"compiles {compiles:<24} {line['compile_cpu_s']:>6.1f} s CPU")
    for run in runs:
        target = TARGETS[args.matrix][run["phase"]]
        verdict = "within" if run["wall_s"] <= target else "OVER"
        print(f"  {run['phase']:<5} {run['wall_s']:>7.1f} s wall, {run.get('cpu_s', '-')} s CPU   "
              f"target {target:.0f} s ({verdict})   exit {run['rc']}")
    return 0

