"""`python -m patches.turing_clamp`: the command line of the clamp (usage in patches/turing_clamp)."""
from __future__ import annotations

from door.problem import Problem
import argparse
import json
import sys
from pathlib import Path

import patches.turing_clamp as turing_clamp
from patches.turing_clamp import SITES, ClampReport, apply, check, find_target, show
from patches.turing_clamp.placement import site_of


def _emit(reports: dict[str, ClampReport], as_json: bool, one: bool) -> None:
    """Each site's report: its line, or JSON (one report, or one object by site name). A refusal's
    one line goes to stderr in both modes, so a build log shows it."""
    for report in reports.values():
        if report.outcome.refusal:
            print(report.message, file=sys.stderr)
    if as_json:
        documents = {name: report.to_dict() for name, report in reports.items()}
        print(json.dumps(next(iter(documents.values())) if one else documents, indent=2))
        return
    for report in reports.values():
        if not report.outcome.refusal:
            print(f"{report.outcome.label}: {report.message} ({report.file}, vLLM {report.vllm_version})")


def _show(targets: dict[str, Path], sites: dict, as_json: bool, one: bool) -> None:
    """The diffs apply would make, one after the other (empty when there is nothing to do)."""
    diffs = {name: show(target, sites.get(name)) for name, target in targets.items()}
    if as_json:
        documents = {name: {"file": str(targets[name]), "diff": diff} for name, diff in diffs.items()}
        print(json.dumps(next(iter(documents.values())) if one else documents))
    else:
        print("".join(diffs.values()), end="")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patches.turing_clamp", description=turing_clamp.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("apply", "check", "show"))
    parser.add_argument("--site", choices=sorted(SITES), help="one launcher of the installed vLLM: unified "
                        "(triton_unified_attention.py) or encoder (triton_prefill_attention.py); default: every "
                        "site; with --target, the site its file name says unless given")
    parser.add_argument("--target", type=Path, help="one launcher file to act on (default: every site's file, or "
                        "the --site one, of the vLLM installed for this Python; its site follows from its file name)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (with neither --site nor "
                        "--target: one report per site, by site name)")
    args = parser.parse_args(argv)
    one = bool(args.site or args.target)
    try:
        if args.target:
            targets = {args.site or site_of(args.target).name: args.target}
        else:
            targets = {name: find_target(SITES[name]) for name in ([args.site] if args.site else SITES)}
        # a --target alone is judged by its file name
        sites = {} if args.target and not args.site else {name: SITES[name] for name in targets}
        if args.command == "show":
            _show(targets, sites, args.json, one)
            return 0
    except Problem as exc:
        print(exc, file=sys.stderr)
        return 2
    act = apply if args.command == "apply" else check
    reports = {name: act(target, sites.get(name)) for name, target in targets.items()}
    _emit(reports, args.json, one)
    return max(report.outcome.exit_code for report in reports.values())


if __name__ == "__main__":
    raise SystemExit(main())
