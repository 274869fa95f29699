"""`python -m patches.turing_clamp`: the command line of the clamp (usage in patches/turing_clamp)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import patches.turing_clamp as turing_clamp
from patches.turing_clamp import SITES, ClampError, ClampReport, apply, check, find_target, show


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
    parser.add_argument("--site", choices=sorted(SITES), help="which launcher of the "
                        "installed vLLM: unified (triton_unified_attention.py, the default) or encoder "
                        "(triton_prefill_attention.py); with --target, the site its file name says unless given")
    parser.add_argument("--target", type=Path, help="the launcher file to patch (default: the --site one of "
                        "the vLLM installed for this Python; its site follows from its file name)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        site = SITES[args.site] if args.site else None
        target = args.target or find_target(site or SITES["unified"])
        if args.command == "show":
            diff = show(target, site)
            if args.json or diff:
                print(json.dumps({"file": str(target), "diff": diff}) + "\n" if args.json else diff, end="")
            return 0
    except ClampError as exc:
        print(exc, file=sys.stderr)
        return 2
    report = apply(target, site) if args.command == "apply" else check(target, site)
    _emit(report, args.json)
    return report.outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
