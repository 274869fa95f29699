"""Prints derived-image build figures over an existing base (targets: no-op <= 5 s,
entrypoint-only <= 20 s, added <= 1.5 MiB without extras: tests/image/test_derived_layers_budget.py).

  bench/build [--base vllm-turing-base:0.33.0] [--ca-cert PATH]

Cold means the derived layers are built anew (--no-cache) over a base already here.
"""
import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import docker

REPO = Path(__file__).resolve().parent.parent
from contract.pins import PYPI_BASE_TAG
from door import children

TAG = "vllm-turing-bench:build"


def timed_build(args, *extra) -> float:
    argv = [sys.executable, str(Path(args.context) / "build.py"), "--base", args.base, "--tag", TAG, *extra]
    if args.ca_cert:
        argv += ["--ca-cert", args.ca_cert]
    start = time.monotonic()
    run = children.run(argv, cwd=args.context)
    elapsed = time.monotonic() - start
    if run.returncode != 0:
        sys.exit(f"bench/build: build failed: {run.stderr.strip()[-500:]}")
    return elapsed


def added_bytes(client, image: str, base: str) -> int:
    base_layers = len(client.images.get(base).history())
    return sum(layer["Size"] for layer in client.images.get(image).history()[:-base_layers])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=PYPI_BASE_TAG)
    parser.add_argument("--ca-cert", default=None)
    args = parser.parse_args()
    client = docker.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        # a copy of the tree, so touching entrypoint/ does not touch the checkout
        args.context = str(Path(tmp) / "tree")
        shutil.copytree(REPO, args.context, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports"))
        cold = timed_build(args, "--no-cache")
        noop = timed_build(args)
        (Path(args.context) / "entrypoint" / "__init__.py").open("a").write("\n# touched by bench/build\n")
        entry_only = timed_build(args)
    added = added_bytes(client, TAG, args.base)
    print(f"cold derived build (--no-cache):   {cold:7.1f} s")
    print(f"no-op rebuild:                      {noop:7.1f} s   (target <= 5 s)")
    print(f"rebuild after touching entrypoint/: {entry_only:7.1f} s   (target <= 20 s)")
    print(f"bytes the derived layers add:       {added:7d} B = {added / 2**20:.2f} MiB   (target <= 1.5 MiB)")
    client.images.remove(TAG, noprune=True)
    try:
        client.images.remove(TAG + "-previous", noprune=True)
    except docker.errors.ImageNotFound:
        pass
    return 0

