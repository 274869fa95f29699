"""`python -m patches.fitcheck`: the command line of the fit check (usage in patches/fitcheck)."""
from __future__ import annotations

import argparse
import json
import sys

import patches.fitcheck as fitcheck
from patches.fitcheck import fit_report as report_
from patches.fitcheck.proof import DEVICES, FitOptions, plan, run
from door.problem import Problem
from patches.fitcheck.families import MATRICES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m patches.fitcheck", description=fitcheck.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=sorted(DEVICES), help="target GPU preset (default sm75 "
                        "unless --cc and --limit are given)")
    parser.add_argument("--cc", type=int, help="compute capability as an integer, e.g. 75")
    parser.add_argument("--limit", type=int, help="shared memory per block in bytes")
    parser.add_argument("--model-config", metavar="PATH", help="HF config.json of the model to check "
                        "(default: the built-in matrix, see --matrix)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N", help="with --model-config: "
                        "check the shapes one of N tensor-parallel ranks runs (default 1)")
    parser.add_argument("--matrix", choices=MATRICES, default="all", help="without --model-config: 'all' "
                        "checks the Gemma 4 classes, the attention-only families' head sizes and "
                        "query-per-KV ratios, the encoder layers and the hybrids' attention layers and Mamba-2 "
                        "mixers; 'attention' the same without the mixers; 'gemma4' the Gemma 4 classes alone "
                        "(default: all)")
    parser.add_argument("--compare-unpatched", action="store_true",
                        help="also record the launcher without the clamp; report inertness")
    parser.add_argument("--write-table", metavar="PATH", help="compile candidate tiles and merge them "
                        "into the fit table at PATH before checking")
    parser.add_argument("--known-table", metavar="PATH", help="take the needs of launches this fit table "
                        "holds (same vLLM and Triton) from it and compile only the others")
    parser.add_argument("--compile-record", metavar="PATH", help="take the answers of compiles this compile "
                        "record holds (same vLLM and Triton; the repository keeps the builds' in contract/compile-records/) "
                        "and compile only the others")
    parser.add_argument("--launcher", metavar="PATH", help="check this triton_unified_attention.py "
                        "(e.g. another release's) instead of the installed one, under the installed vLLM")
    parser.add_argument("--dtype", default="float16", help="the activations' dtype of the recorded launches: "
                        "float16 (default; what Turing runs), bfloat16 (what Ampere runs a bf16 checkpoint in) "
                        "or float32")
    parser.add_argument("--workers", type=int, help="compile processes (default: CPU count)")
    parser.add_argument("--full-compile", action="store_true", help="compile every launch to cubin; by "
                        "default Triton's pipeline stops once shared memory is allocated, and the launch "
                        "of largest need of each kernel is compiled in full to cross-check it")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    return parser


def parse(argv: list[str] | None) -> tuple[FitOptions, bool]:
    """The check's options, and whether the report is wanted as JSON."""
    args = _parser().parse_args(argv)
    device = args.device or (None if args.cc is not None and args.limit is not None else "sm75")
    return FitOptions(device, args.cc, args.limit, args.model_config, args.compare_unpatched,
                      args.write_table, args.workers, args.launcher, args.known_table, args.matrix,
                      args.tensor_parallel_size, args.full_compile, args.dtype, args.compile_record), args.json


def refusals() -> tuple:
    """The errors that end a check with exit 2 in one line (bad input, a launcher, ops or compiler that
    cannot be used): every Problem of the fit check."""
    return (Problem,)


def main(argv: list[str] | None = None) -> int:
    options, as_json = parse(argv)
    try:
        report = run(plan(options))  # bad options and configs are refused before vLLM is imported
    except refusals() as error:
        print(f"fitcheck: {error}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        print(report_.format_table(report))
        print(report_.summary(report))
    for line in report_.failures(report):
        print(f"fitcheck: does not fit: {line}", file=sys.stderr)
    return 0 if report["all_fit"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
