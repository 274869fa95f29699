"""Decode-bandwidth ceiling of a checkpoint: bytes read per token and tok/s at a bandwidth.

    bench/ceiling CHECKPOINT [--bandwidth GB/s] [--exclude PATTERN ...] [--no-default-excludes] [--json]

Reads safetensors headers only. Exit 0 ok, 2 bad input.
"""
import argparse
import json
import pathlib
import sys


from door.problem import UsageError
from tooling import safetensors_ceiling as sc


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/ceiling", description=__doc__.split("\n")[0])
    p.add_argument("checkpoint", type=pathlib.Path, help="a .safetensors file or a checkpoint folder")
    p.add_argument("--bandwidth", type=float, metavar="GB/s",
                   help="measured memory bandwidth in GB/s (1e9 bytes/s), e.g. 277 for a T4")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="fnmatch pattern of tensor names not read per token (repeatable; adds to the defaults)")
    p.add_argument("--no-default-excludes", action="store_true",
                   help="drop the default exclusions: " + " ".join(sc.DEFAULT_EXCLUDES))
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p.parse_args(argv)


def render(report: sc.CeilingReport, bandwidth):
    lines = [f"checkpoint: {len(report.files)} safetensors file(s)"]
    for cat in (*sc.COUNTED, sc.EMBEDDING_LOOKUP, sc.EXCLUDED):
        if cat in report.bytes_by_category:
            lines.append(f"  {cat:<32} {report.tensors_by_category[cat]:>6} tensors "
                         f"{report.bytes_by_category[cat] / 1e9:>10.4f} GB")
    lines.append(f"  tied embedding counted as output layer: {'yes' if report.tied_embedding else 'no'}")
    lines.append("  counted by dtype: " + ", ".join(
        f"{d} {b / 1e9:.4f} GB" for d, b in sorted(report.bytes_by_dtype.items())))
    lines.append(f"bytes per decode token: {report.bytes_per_token} ({report.bytes_per_token / 1e9:.4f} GB)")
    if bandwidth is not None:
        lines.append(f"ceiling at {bandwidth:g} GB/s: {report.ceiling_tok_s(bandwidth):.1f} tok/s per stream")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.bandwidth is not None and args.bandwidth <= 0:
        print(f"bench/ceiling: --bandwidth {args.bandwidth:g}: expected a positive GB/s figure", file=sys.stderr)
        return 2
    excludes = ([] if args.no_default_excludes else list(sc.DEFAULT_EXCLUDES)) + args.exclude
    try:
        report = sc.analyze_checkpoint(args.checkpoint, excludes)
    except (UsageError, OSError) as exc:
        print(f"bench/ceiling: {exc}", file=sys.stderr)
        return 2
    if report.bytes_per_token == 0:
        print(f"bench/ceiling: {args.checkpoint}: no tensor is read per token after exclusions; "
              "check --exclude patterns", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(args.bandwidth), indent=2) if args.json else render(report, args.bandwidth))
    return 0

