"""Shared memory of the gated delta net's Triton kernels (Qwen3-Next, Qwen3.5), on sm_75 and sm_86.

    bench/gdn_kernels_smem [--image REF] [--devices sm75,sm86] [--families NAME,...] [--tensor-parallel 1,2,4]
                           [--detail] [--json]

In a container of the image (this checkout mounted, tooling/probes/gdn/probe.py),
patches/fitcheck/families/gated_delta_net/launches.py runs vLLM's real GDN ops on CPU tensors with the fit check's recorder in
place of each kernel, as the layer calls them on a Turing or Ampere GPU: a chunked prefill (causal conv,
the post-conv prep, FLA's six @triton.autotune chunk kernels, each recorded once per configuration), the
decodes of a mixed batch, a decode-only batch (packed recurrent update), a speculative decode step and
the gated norm of --enforce-eager. Each launch, every autotune configuration included, is cross-compiled
by the image's Triton for the device. fp16 activations (Turing has no bf16).

The verdict: a plain launch fits when its shared memory is within the limit; an autotuned one when at
least one configuration is (Triton's autotuner scores a configuration that raises OutOfResources as
infinitely slow, so it is never picked while another fits). A kernel fits when every launch of it does,
over every shape and phase. The table per kernel; --detail adds one row per shape and phase.
"""
import json

from tooling.probes.probe_flags import chosen, probe_parser
from tooling.probes.container import probe_lines
from tooling.probes.gdn.verdicts import FAMILIES, kernel_verdicts
from tooling.probes.ssm.verdicts import verdicts


def _span(smallest, largest) -> str:
    if smallest is None:
        return "did not compile"
    return f"{smallest}" if smallest == largest else f"{smallest} - {largest}"


def main(argv: list[str] | None = None) -> int:
    parser = probe_parser("bench/gdn_kernels_smem", __doc__, FAMILIES)
    parser.add_argument("--tensor-parallel", default="1", help="ranks, comma separated (per-rank head counts)")
    parser.add_argument("--detail", action="store_true", help="a row per shape and phase as well")
    args = parser.parse_args(argv)
    families, devices = chosen(parser, args, FAMILIES)
    try:
        ranks = [int(value) for value in args.tensor_parallel.split(",")]
    except ValueError:
        parser.error(f"--tensor-parallel {args.tensor_parallel!r}: expected integers, comma separated")

    def measured(lines):
        return [line for line in lines if "device" in line]

    lines = probe_lines("bench/gdn_kernels_smem", args.image, "tooling.probes.gdn.probe",
                        [json.dumps(families), json.dumps(devices), json.dumps(ranks)], measured)
    if lines is None:
        return 1
    rows = measured(lines)
    if args.json:
        for line in lines:
            print(json.dumps(line))
        return 0
    for line in lines:
        if "note" in line:
            differ = "; ".join(line["host_choices_differ"]) or "none"
            print(f"{line['note']}: prefill backend {', '.join(line['prefill_backends'])}; "
                  f"host choices that differ from the device's: {differ}")
        elif "error" in line and "device" not in line:
            print(f"not measured: {line['family']} {line['kind']}: {line['error']}")
    print(f"\nGated delta net Triton kernels, fp16, image {args.image}, shapes {', '.join(families)}, "
          f"tensor parallel {args.tensor_parallel}")
    print("| device | kernel | phases | configurations | smallest - largest bytes | need | limit | verdict |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | --- |")
    for v in kernel_verdicts(rows):
        kind = f"autotuned, {v['configs']}" if v["autotuned"] else "plain"
        print(f"| {v['device']} | `{v['kernel']}` | {', '.join(v['phases'])} | {kind} | "
              f"{_span(v['smallest'], v['largest'])} | {v['need'] if v['need'] is not None else '-'} | {v['limit']} | "
              f"{'fits' if v['fits'] else 'does not fit'} |")
    if args.detail:
        print("\n| device | shape | phase | kernel | configurations fitting / compiled | smallest - largest bytes "
              "| fits |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for v in verdicts(rows):
            count = f"{v['fitting']} / {v['compiled']}"
            count += f" (of {v['configs']})" if v["compiled"] != v["configs"] else ""
            print(f"| {v['device']} | {v['family']} | {v['kind']} | `{v['kernel']}` | {count} | "
                  f"{_span(v['smallest'], v['largest'])} | {'yes' if v['fits'] else 'NO'} |")
    errors = sorted({(row["kernel"], row["error"]) for row in rows if row["error"]})
    for kernel, error in errors:
        print(f"compile error: {kernel}: {error}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
