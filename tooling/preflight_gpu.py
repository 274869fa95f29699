"""The preflight on a GPU machine, without and with the image facts: `bench/preflight --local` on
the GPU at hand, every check on, a model folder (e.g. Gemma 4 E2B's published config.json with a
small weights file), the fit table written for this device's capability.

  bench/preflight_gpu --facts IMAGE_FACTS_JSON --model DIR --tarball VLLM_PACKAGE_TGZ [--runs 5]
                      [--facts-only] [--driver-costs] [--baseline-tree DIR]

IMAGE_FACTS_JSON: the built image's /opt/vllm-turing/image-facts.json (docker cp). The GPU machine
has its own torch and Triton, so their part of the facts (versions, CUDA, arch list) is read again
from that torch, as the build would have recorded it; the rest (the server parser's option table,
parser names, quantization minimums) is the image's. VLLM_PACKAGE_TGZ: vLLM's Python package
(tooling.vllm_releases.package_tarball, staged by `tests/gpu/run-on-device prepare`).
Writes the facts where the image has them (contract.layout.IMAGE_FACTS): run it as root there.
--driver-costs first prints what the driver's calls the preflight makes cost on this machine (median
of --runs fresh processes): loading libcuda and NVML, cuInit, the primary context's retain and release,
nvmlInit, and what a process that made a context spends on its way out.

Every run is timed as a container start meets it: this process never imports torch nor loads the CUDA
driver (tooling/cuda_free.py; it refuses to time when it has), and the device's capability and torch's
facts are read by a child that exits before the first run. Before, the bench asked torch for the device
in its own process and held the driver initialised while it timed: every child then found the driver
warm, as a start does only beside another CUDA process (0.24-0.25 s against 0.37-0.40 s on an H100).
Other processes holding the GPU are named before each timing (nvidia-smi), since they warm it likewise.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from contract import layout
from entrypoint.nvml import LIBNVML
from entrypoint.device import LIBCUDA
from imagefacts.shape import installed
from patches import turing_clamp
from tooling.cuda_free import held_here
from tooling.gpu_site import prepare_site, python_env

WORK = Path("/tmp/vllm-turing-preflight-gpu")
DRIVER_CALLS = """
import ctypes, json, time
clock, took = time.perf_counter, {}
def timed(what, call):
    started = clock(); value = call(); took[what] = clock() - started; return value
cuda = timed("load libcuda", lambda: ctypes.CDLL(LIBCUDA))
timed("cuInit", lambda: cuda.cuInit(0))
device, context = ctypes.c_int(), ctypes.c_void_p()
cuda.cuDeviceGet(ctypes.byref(device), 0)
timed("cuDevicePrimaryCtxRetain", lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
timed("cuDevicePrimaryCtxRelease", lambda: cuda.cuDevicePrimaryCtxRelease(device))
nvml = timed("load NVML", lambda: ctypes.CDLL(LIBNVML))
timed("nvmlInit", lambda: nvml.nvmlInit_v2())
timed("nvmlShutdown", lambda: nvml.nvmlShutdown())
print(json.dumps(took))
"""


# run in a child that exits before any timing: torch's import and the device query initialise CUDA
DEVICE_QUERY = """
import json, torch
from imagefacts.read import torch_facts
major, minor = torch.cuda.get_device_capability(0)
print(json.dumps({"sm": f"sm{major}{minor}", "torch": torch_facts()}))
"""


def device_facts() -> dict:
    """{"sm": "sm90", "torch": imagefacts.read.torch_facts()} of this machine, asked by a child process."""
    done = subprocess.run([sys.executable, "-c", DEVICE_QUERY], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def others_on_gpu() -> str:
    """The compute processes nvidia-smi lists (a process holding a context warms the driver for a start)."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                              capture_output=True, text=True)
    except OSError as error:
        return f"unknown (nvidia-smi: {error.strerror})"
    return ", ".join(line.strip() for line in done.stdout.splitlines() if line.strip()) or "none"


def refuse_if_cuda_held() -> None:
    """Exit 1 with one line if this process holds CUDA: its timings would be a warm driver's, not a start's."""
    found = held_here()
    if found:
        raise SystemExit(f"bench/preflight_gpu: this process holds CUDA ({'; '.join(found)}), so its runs would "
                         "time a warm driver; ask the device only in a child process (device_facts)")


def fit_table(site: Path, sm: str) -> Path:
    table = WORK / "fit-table.json"
    for dtype in ("float16", "bfloat16"):  # as the Dockerfile: this GPU runs a bf16 checkpoint in bf16
        subprocess.run([sys.executable, "-m", "patches.fitcheck", "--device", sm, "--matrix", "gemma4",
                        "--dtype", dtype, "--write-table", str(table), "--json"], cwd=REPO, env=python_env(site),
                       check=True, stdout=subprocess.DEVNULL)
    return table


def write_clamp_reports(site: Path) -> None:
    """The clamp's apply reports where the image keeps them (layout.CLAMP_REPORTS), as the Dockerfile
    writes them: the preflight's clamp check answers from them while the launchers are unchanged."""
    for name, clamp_site in turing_clamp.SITES.items():
        report = turing_clamp.apply(site / "vllm" / clamp_site.target_in_package, clamp_site).to_dict()
        Path(layout.CLAMP_REPORTS[name]).write_text(json.dumps(report))


def write_facts(given: Path, site: Path, torch: dict) -> None:
    facts = json.loads(given.read_text())
    sys.path.insert(0, str(site))
    facts["packages"] = {"vllm": installed("vllm"), "torch": installed("torch"), "triton": installed("triton")}
    facts["torch"] = torch
    Path(layout.IMAGE_FACTS).parent.mkdir(parents=True, exist_ok=True)
    Path(layout.IMAGE_FACTS).write_text(json.dumps(facts))


def bench(site: Path, table: Path, model: Path, runs: int, tree: Path = REPO) -> None:
    # The image ships its modules' bytecode (the Dockerfile's compileall); a tree carried here has none,
    # and a machine that does not write it would time the compile at every start.
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(tree / p) for p in layout.IMAGE_PACKAGES)],
                   check=True)
    refuse_if_cuda_held()
    print(f"other processes on the GPU: {others_on_gpu()}", flush=True)
    env = [f"PYTHONPATH={tree}:{site}", f"{layout.ENV_FIT_TABLE}={table}"]
    subprocess.run([sys.executable, str(tree / "bench" / "preflight"), "--local", "--runs", str(runs),
                    "--model", str(model), *[part for pair in env for part in ("--env", pair)]], cwd=REPO, check=True)


def driver_costs(runs: int) -> None:
    import statistics
    import time

    def wall(code: str) -> tuple[float, str]:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return time.perf_counter() - started, done.stdout

    bare = statistics.median(wall("import ctypes, json, time")[0] for _ in range(runs))
    calls, exits = {}, []
    for _ in range(runs):
        spent, printed = wall(f"LIBCUDA, LIBNVML = {LIBCUDA!r}, {LIBNVML!r}\n{DRIVER_CALLS}")
        took = json.loads(printed)
        for what, seconds in took.items():
            calls.setdefault(what, []).append(seconds)
        exits.append(spent - bare - sum(took.values()))
    print(f"== the driver's calls, median of {runs} fresh processes", flush=True)
    for what, seconds in calls.items():
        print(f"{what + ':':<28}{statistics.median(seconds) * 1000:8.1f} ms")
    print(f"{'the rest (exit, teardown):':<28}{statistics.median(exits) * 1000:8.1f} ms  "
          f"(wall less the calls and a bare `python3 -c` of {bare * 1000:.1f} ms)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--tarball", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout (e.g. `git archive` of an older "
                        "commit) whose preflight is timed first, the same way, for a before figure")
    parser.add_argument("--facts-only", action="store_true", help="leave out the run without the image facts")
    parser.add_argument("--driver-costs", action="store_true", help="first time the driver's calls alone")
    args = parser.parse_args()
    if args.driver_costs:
        driver_costs(args.runs)
    site = WORK / "site"
    prepare_site(args.tarball, site)
    device = device_facts()
    table = fit_table(site, device["sm"])
    if not args.facts_only:
        Path(layout.IMAGE_FACTS).unlink(missing_ok=True)
        print("== without the image facts (torch and vLLM imported at start)", flush=True)
        bench(site, table, args.model.resolve(), args.runs)
    write_facts(args.facts, site, device["torch"])
    write_clamp_reports(site)
    if args.baseline_tree:
        print(f"== baseline, with the image facts and clamp reports: {args.baseline_tree}", flush=True)
        bench(site, table, args.model.resolve(), args.runs, args.baseline_tree.resolve())
    print(f"== with the image facts ({layout.IMAGE_FACTS}) and clamp reports", flush=True)
    bench(site, table, args.model.resolve(), args.runs)
    return 0

