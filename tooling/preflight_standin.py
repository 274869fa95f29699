"""The image's preflight on this CPU host behind stand-in driver libraries that take a real driver's
time: `bench/preflight --image` with a stand-in T4 (tooling/standins/standin_driver.py) whose cuInit,
primary context and NVML calls answer after the latencies measured on the H200 (docs/gpu-validation.md),
so every check runs as on a GPU host, in the image's own Python and bytecode. It is not a GPU figure:
it shows what the checks add beside a driver that slow, and lets two trees be compared where no GPU is.

  bench/preflight_standin --image REF --model DIR [--runs 15] [--tree DIR ...] [--latency CALL=MS ...]

--tree mounts a checkout's Python packages before the image's on its path (compiled first, as the image's are), one
row per tree; without it the image's own code runs. --latency overrides one call's latency.
"""
import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from contract.layout import IMAGE_PACKAGES, IMAGE_PYTHONPATH
from tooling.standins.standin_driver import TIMED_CALLS, build_standin_driver
from door import children

TREE_DIR = "/opt/vllm-turing-tree"  # where --tree's packages are mounted

# One H200, driver 580.159.04, persistence mode on: `bench/preflight_gpu --driver-costs`, 2026-12-05
H200_DRIVER_MS = {"cuInit": 101.8, "cuDevicePrimaryCtxRetain": 113.4, "cuDevicePrimaryCtxRelease": 62.6,
                  "nvmlInit_v2": 8.5, "nvmlShutdown": 8.4}
DRIVER_VERSION = "580.159.04"
NVIDIA_LIBS = "/usr/local/nvidia/lib64"
DEVICE_NODES = ("nvidia0", "nvidiactl", "nvidia-uvm")


def latency(text: str) -> tuple[str, float]:
    call, _, ms = text.partition("=")
    if call not in TIMED_CALLS:
        raise argparse.ArgumentTypeError(f"{call!r} is not one of {', '.join(TIMED_CALLS)}")
    try:
        return call, float(ms)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the latency is milliseconds, e.g. cuInit=100") from None


def docker_args(libs: Path, tree: Path | None) -> list[str]:
    # /dev/null stands for the device nodes: the devices check opens them read-write, nothing more
    args = ["-v", f"{libs}:{NVIDIA_LIBS}:ro", *(f"--device=/dev/null:/dev/{node}" for node in DEVICE_NODES)]
    for package in IMAGE_PACKAGES if tree else ():
        args += ["-v", f"{tree / package}:{TREE_DIR}/{package}:ro"]
    if tree:  # before the image's zip on the path, so the tree's packages are the ones imported
        args += ["-e", f"PYTHONPATH={TREE_DIR}:{IMAGE_PYTHONPATH}"]
    return [f"--docker-arg={arg}" for arg in args]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True, help="image reference to run `check` in")
    parser.add_argument("--model", required=True, help="model directory (mounted at /models/bench)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tree", action="append", type=lambda text: Path(text).resolve(), default=[], help="a checkout to run instead of the image's code")
    parser.add_argument("--latency", action="append", type=latency, default=[], metavar="CALL=MS")
    args = parser.parse_args()
    for tree in args.tree:
        missing = [package for package in IMAGE_PACKAGES if not (tree / package).is_dir()]
        if missing:
            parser.error(f"--tree {tree}: no {', '.join(missing)} folder there")
    latencies = {**H200_DRIVER_MS, **dict(args.latency)}
    print("driver latencies: " + ", ".join(f"{call} {ms:g} ms" for call, ms in latencies.items()), flush=True)
    with tempfile.TemporaryDirectory(prefix="preflight-standin-") as work:
        libs = build_standin_driver(Path(work) / "libs", driver_version=DRIVER_VERSION, latency_ms=latencies)
        for tree in args.tree or [None]:
            if tree is not None:
                children.run([sys.executable, "-m", "compileall", "-q", *(str(tree / p) for p in IMAGE_PACKAGES)], check=True, stdout=None, stderr=None, text=False)
            print(f"\n== {tree or 'the image ' + args.image + ' as built'}", flush=True)
            done = children.run([sys.executable, str(REPO / "bench" / "preflight"), "--image", args.image,
                                   "--model", args.model, "--runs", str(args.runs),
                                   *docker_args(libs, tree)], stdout=None, stderr=None, text=False)
            if done.returncode != 0:
                return done.returncode
    return 0

