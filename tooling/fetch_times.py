"""Fetch's download and verification against a plain huggingface_hub snapshot_download of the same
repository, both from a Hub mirror served on this host (olah, offline, tooling/hub_mirror.py).

  bench/fetch [--gib 1.0] [--shards 4] [--json]

Prints, for a repository of --gib GiB of safetensors shards (and the small files beside them):
  fetch       entrypoint/fetch's own ensure() over every file (several at once): a bounded
              door.remote download into a partial file, renamed into place, its size and SHA-256 checked
  snapshot    huggingface_hub.snapshot_download(repo, revision=commit, local_dir=...), which checks no hash
with seconds, GiB/s and fetch/snapshot. The judgment before the weights (fit, memory, disk) is not
timed: it reads the small files only. Target (issue 44): fetch within 10 % of snapshot.
"""
import argparse
import json
import os
import pathlib
import shutil
import tempfile
import time


from tooling.hub_mirror import HubMirror


def make_repo(mirror: HubMirror, gib: float, shards: int) -> tuple[str, int]:
    repo = mirror.repo("bench/model")
    (repo.path / "config.json").write_text('{"model_type": "bench"}\n')
    size = int(gib * 2**30 / shards)
    total = 0
    for index in range(shards):
        block = os.urandom(2**20)  # each shard its own content, as a model's are
        content = (block * (size // len(block) + 1))[:size]
        repo.put_lfs(f"model-{index:05d}.safetensors", content)
        total += size
    return repo.commit(), total


def fetch_path(commit: str, folder: str) -> None:
    from entrypoint.fetch import fetch_model, hub_client
    from entrypoint.fetch.request import parse_request

    request = parse_request(["bench/model", "--gpu", "sm75", "--models-dir", os.path.dirname(folder),
                             "--name", os.path.basename(folder)])
    with fetch_model.only_fetch_into(folder):
        fetch_model.ensure(request, commit, folder, hub_client.list_files("bench/model", commit),
                           fetch_model.downloads(request, commit, folder))


def snapshot_path(commit: str, folder: str) -> None:
    from huggingface_hub import snapshot_download

    snapshot_download("bench/model", revision=commit, local_dir=folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    mirror = HubMirror(root)
    try:
        commit, total = make_repo(mirror, args.gib, args.shards)
        mirror.start()
        os.environ.update(mirror.env(HF_HUB_DISABLE_PROGRESS_BARS="1"))
        seconds = {}
        for name, run in (("snapshot", snapshot_path), ("fetch", fetch_path)):
            folder = root / name
            started = time.perf_counter()
            run(commit, str(folder))
            seconds[name] = time.perf_counter() - started
            shutil.rmtree(folder)
    finally:
        mirror.stop()
        shutil.rmtree(root, ignore_errors=True)
    result = {name: {"seconds": round(s, 2), "gib_per_s": round(total / 2**30 / s, 3)} for name, s in seconds.items()}
    result["fetch_over_snapshot"] = round(seconds["fetch"] / seconds["snapshot"], 3)
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("snapshot", "fetch"):
            print(f"{name:9} {result[name]['seconds']:7.2f} s  {result[name]['gib_per_s']:6.3f} GiB/s")
        print(f"fetch/snapshot {result['fetch_over_snapshot']:.3f} (target: at most 1.10)")
    return 0

