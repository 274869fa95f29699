"""Where a command's CPU time goes on this host: the command runs as given, and every few seconds
each process and container's CPU is sampled (tooling/cpu_ledger.py) and charged to a category: the
serving tier's pytest, the other tiers' pytest, build.py, BuildKit's build steps, each container by its
image, the Docker engine; host processes outside the command's tree apart.

  bench/ci_cpu [--every 2] [--json FILE] -- COMMAND [ARGS...]      e.g. bench/ci_cpu -- .ci/run

Prints, when the command ends, the wall time, the machine's busy core-seconds out of wall x cores, a
table of core-seconds per category, and per 5 minutes the three busiest categories. Exits with the
command's status (2: bad options).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time


from tooling import cpu_ledger

WINDOW_S = 300


def report(ledger: cpu_ledger.Ledger, wall_s: float, busy_s: float) -> list[str]:
    cores = os.cpu_count() or 1
    seen = sum(ledger.seconds.values())
    rows = sorted(ledger.seconds.items(), key=lambda item: -item[1]) + [(cpu_ledger.UNSEEN, max(busy_s - seen, 0.0))]
    lines = [f"wall {wall_s:.0f} s; machine busy {busy_s:.0f} of {wall_s * cores:.0f} core-seconds "
             f"({100 * busy_s / max(wall_s * cores, 1e-9):.0f} %)",
             f"{'core-s':>8} {'share':>6}  category"]
    lines += [f"{used:8.0f} {100 * used / max(busy_s, 1e-9):5.1f}%  {category}" for category, used in rows if used >= 0.5]
    start = ledger.timeline[0][0] if ledger.timeline else 0.0
    windows: dict[int, dict[str, float]] = {}
    for at, interval in ledger.timeline:
        window = windows.setdefault(int((at - start) // WINDOW_S), {})
        for category, used in interval.items():
            window[category] = window.get(category, 0.0) + used
    lines.append(f"per {WINDOW_S // 60} minutes, the three busiest (core-seconds):")
    for index, window in sorted(windows.items()):
        top = sorted(window.items(), key=lambda item: -item[1])[:3]
        lines.append(f"  {index * WINDOW_S // 60:3d}-{(index + 1) * WINDOW_S // 60:<3d} min  "
                     + "; ".join(f"{category} {used:.0f}" for category, used in top))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples (default 2)")
    parser.add_argument("--json", help="also write the figures as JSON to FILE")
    parser.add_argument("--cgroup-parent", default=cpu_ledger.ENGINE_CGROUP,
                        help="the measured engine's dockerd --cgroup-parent (default docker); other engines' "
                             "containers are left out")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not 0.2 <= args.every <= 60:
        parser.print_usage(sys.stderr)
        print("bench/ci_cpu: give a command after --, and --every from 0.2 to 60 seconds", file=sys.stderr)
        return 2
    ledger = cpu_ledger.Ledger(name_of_container=cpu_ledger.docker_namer(), engine_cgroup=args.cgroup_parent.strip("/"))
    busy_before, started = cpu_ledger.machine_busy_s(), time.monotonic()
    # the baseline, before the command: what its processes and containers use is charged from here
    ledger.add_sample(started, cpu_ledger.read_procs(), cpu_ledger.read_cgroups(ledger.engine_cgroup))
    process = subprocess.Popen(command)
    ledger.follow(process.pid)
    sampler = threading.Thread(target=cpu_ledger.sample_forever,
                               args=(ledger, args.every, lambda: process.poll() is None), daemon=True)
    sampler.start()
    try:
        code = process.wait()
    except KeyboardInterrupt:
        process.wait()
        code = 130
    sampler.join()
    ledger.add_sample(time.monotonic(), cpu_ledger.read_procs(), cpu_ledger.read_cgroups(ledger.engine_cgroup))
    wall_s, busy_s = time.monotonic() - started, cpu_ledger.machine_busy_s() - busy_before
    lines = report(ledger, wall_s, busy_s)
    print("\n".join(["", "==================== bench/ci_cpu ====================", *lines]), file=sys.stderr)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"wall_s": wall_s, "busy_s": busy_s, "seconds": ledger.seconds,
                                                       "timeline": ledger.timeline}, indent=1) + "\n")
    return code

