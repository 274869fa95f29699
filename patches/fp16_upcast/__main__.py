"""`python -m patches.fp16_upcast`: the command line of the fp16 upcast (usage in patches/fp16_upcast)."""
from __future__ import annotations

from door.problem import Problem
import argparse
import json
import sys
from pathlib import Path

import patches.fp16_upcast as upcast


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patches.fp16_upcast", description=upcast.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("apply", "check", "show"))
    parser.add_argument("--target", type=Path, help="the gemma4_unified.py to act on (default: the one of the "
                        "vLLM installed for this Python)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        target = args.target or upcast.find_target()
        if args.command == "show":
            diff = upcast.show(target)
            if args.json:
                print(json.dumps({"file": str(target), "diff": diff}))
            else:
                print(diff, end="")
            return 0
    except Problem as exc:
        print(exc, file=sys.stderr)
        return 2
    report = (upcast.apply if args.command == "apply" else upcast.check)(target)
    if report.outcome.exit_code == 2:
        print(report.message, file=sys.stderr)  # a refusal's one line reaches the build log in both modes
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.outcome.exit_code != 2:
        print(f"{report.outcome.label}: {report.message} ({report.file}, vLLM {report.vllm_version})")
    return report.outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
