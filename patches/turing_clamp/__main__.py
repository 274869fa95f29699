"""`python -m patches.turing_clamp`: the command line of the clamp (usage in patches/turing_clamp)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import patches.turing_clamp as turing_clamp
from patches.turing_clamp import ClampError, ClampReport, apply, check, find_target, show


def _emit(report: ClampReport, as_json: bool) -> None:
    """A refusal's one line goes to stderr in both modes, so a build log shows it."""
    if report.outcome.refusal:
        print(report.message, file=sys.stderr)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    elif not report.outcome.refusal:
        print(f"{report.outcome.label}: {report.message} ({report.file}, vLLM {report.vllm_version})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patches.turing_clamp", description=turing_clamp.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("apply", "check", "show"))
    parser.add_argument("--target", type=Path, help="the triton_unified_attention.py to patch "
                        "(default: the one of the vLLM installed for this Python)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        target = args.target or find_target()
        if args.command == "show":
            diff = show(target)
            if args.json or diff:
                print(json.dumps({"file": str(target), "diff": diff}) + "\n" if args.json else diff, end="")
            return 0
    except ClampError as exc:
        print(exc, file=sys.stderr)
        return 2
    report = apply(target) if args.command == "apply" else check(target)
    _emit(report, args.json)
    return report.outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
