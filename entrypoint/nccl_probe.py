"""`python3 -m entrypoint.nccl_probe --world N [--mib M]`: one process per GPU, an NCCL all-reduce
of M MiB, each rank checking the sum. Prints one JSON line: {"ok", "mib", "world", "error"?}.
The caller applies the time limit (a broken P2P path hangs rather than fails)."""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_main(rank: int, world: int, mib: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        count = mib * 2**20 // 4
        tensor = torch.full((count,), float(rank + 1), device=f"cuda:{rank}")
        dist.all_reduce(tensor)
        torch.cuda.synchronize()
        expected = world * (world + 1) / 2
        wrong = int((tensor != expected).sum().item())
        if wrong:
            raise RuntimeError(f"rank {rank}: {wrong} of {count} values differ from {expected:g}")
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="entrypoint.nccl_probe")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--mib", type=int, default=8)
    args = parser.parse_args(argv)
    result = {"world": args.world, "mib": args.mib}
    try:
        import torch.multiprocessing as mp

        os.environ.setdefault("NCCL_DEBUG", "WARN")
        mp.spawn(rank_main, args=(args.world, args.mib, free_port()), nprocs=args.world, join=True)
        result["ok"] = True
    except Exception as error:  # the probe reports every failure as its verdict
        result.update(ok=False, error=str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
