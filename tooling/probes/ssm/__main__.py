"""Shared memory of the Mamba/SSM Triton kernels that hybrid families reach, on sm_75 and sm_86.

    bench/ssm_kernels_smem [--image REF] [--devices sm75,sm86] [--families NAME,...] [--json]

In a container of the image (this checkout mounted, tooling/probes/ssm/probe.py), the fit check's mixer
recorder (patches/fitcheck/families/mamba2/launches.py) runs vLLM's real Mamba-2 mixer ops on CPU tensors with a
recorder in place of each kernel: a prefill (causal_conv1d_fn; mamba_chunk_scan_combined_varlen's five
@triton.autotune kernels, each recorded once per configuration of its list; the gated RMS norm where
the mixer has one group; the prefix-caching checkpoint copy) and a decode step (causal_conv1d_update,
selective_state_update). Each launch, every autotune configuration included, is cross-compiled by the
image's Triton for the device: the build's fit check stops at the first configuration that fits, this
bench shows them all.

The verdict per kernel: a plain launch fits when its shared memory is within the limit; an
autotuned one when at least one configuration is (Triton's autotuner scores a configuration that
raises OutOfResources as infinitely slow, so it is never picked while another fits). Shared memory
follows the head dim, the state size and the chunk size (and the dtype, fp16 here), not the head
or group counts, which only set the grid. The figures are in docs/clamp.md.
"""
import json

from tooling.probes.probe_flags import chosen, probe_parser
from tooling.probes.container import probe_lines
from tooling.probes.ssm.verdicts import FAMILIES, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = probe_parser("bench/ssm_kernels_smem", __doc__, FAMILIES)
    args = parser.parse_args(argv)
    families, devices = chosen(parser, args, FAMILIES)
    rows = probe_lines("bench/ssm_kernels_smem", args.image, "tooling.probes.ssm.probe",
                       [json.dumps(families), json.dumps(devices)])
    if rows is None:
        return 1
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    for row in rows:
        if "error" in row and "device" not in row:
            print(f"not measured: {row['family']} {row['kind']}: {row['error']}")
    print(f"Mamba/SSM Triton kernels, fp16, image {args.image}")
    print("| device | family | step | kernel | configurations fitting / compiled | smallest - largest bytes | limit | fits |")
    print("| --- | --- | --- | --- | --- | --- | ---: | --- |")
    for v in verdicts(rows):
        count = f"{v['fitting']} / {v['compiled']}" + (f" (of {v['configs']})" if v["compiled"] != v["configs"] else "")
        span = f"{v['smallest']}" if v["smallest"] == v["largest"] else f"{v['smallest']} - {v['largest']}"
        kind = "autotuned" if v["autotuned"] else "plain"
        print(f"| {v['device']} | {v['family']} | {v['kind']} | `{v['kernel']}` ({kind}) | {count} | {span} | "
              f"{v['limit']} | {'yes' if v['fits'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
