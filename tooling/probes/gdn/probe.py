"""Runs in a container of the image (`python3 -m tooling.probes.gdn.probe`, from bench/gdn_kernels_smem):
every Triton launch of a gated delta net layer (Qwen3-Next, Qwen3.5), recorded by
patches/fitcheck/families/gated_delta_net/launches.py (vLLM's real ops on CPU tensors, the fit check's recorder in place of
each kernel) and cross-compiled for each device by the image's Triton, every configuration of each
autotuned kernel included. One JSON line per (device, shape, kernel, configuration); a line with "note"
per device for the choices the recording rests on. Nothing runs on a GPU and nothing is timed.
"""
import json
import sys

from contract.model_config import parse_config
from patches.fitcheck.families.gated_delta_net import launches as gdn_launches
from patches.fitcheck.families.gated_delta_net import BUILTIN_GDN, gdn_from_config
from patches.fitcheck.compiler import compile_launches
from door.problem import Problem
from patches.fitcheck.op_recording import options
from door import files

TILES = ("BT", "BK", "BV", "BS", "BLOCK_T", "BLOCK_M", "BLOCK_N", "ROWS_PER_BLOCK", "NP2_STATELEN")


def main(argv: list[str]) -> None:
    """argv: the families, the devices ({name: [cc, limit]}) as JSON, the tensor-parallel sizes."""
    families = files.own_json(argv[0])
    devices = files.own_json(argv[1])
    tensor_parallel = files.own_json(argv[2])
    shapes, launches = [], []
    for name in families:
        for ranks in tensor_parallel:
            family = f"{name} tp{ranks}"
            try:
                shape = gdn_from_config(parse_config(BUILTIN_GDN[name], f"built-in {name}"), family, f"built-in {name}", ranks)
                shapes.append(shape)
                launches += gdn_launches.record_gdn(shape)
            except (Problem, ValueError) as error:  # said, not hidden
                print(json.dumps({"family": family, "kind": "record", "error": str(error)[:300]}), flush=True)
    for device, (cc, limit) in devices.items():
        differences = gdn_launches.host_choices_differ(cc, limit)
        backends = sorted({gdn_launches.prefill_backend(shape, cc, limit) for shape in shapes})
        print(json.dumps({"note": device, "host_choices_differ": differences, "prefill_backends": backends}), flush=True)
        results = compile_launches([(l.fn, l.params, options(l)) for l in launches], cc, 2)
        for launch, result in zip(launches, results):
            tiles = {k: launch.params[k] for k in TILES if isinstance(launch.params.get(k), int)}
            print(json.dumps({"device": device, "limit": limit, "family": launch.case.shape.model, "kind": launch.case.kind,
                              "kernel": launch.kernel_name, "config": launch.options.get("config"),
                              "configs": launch.options.get("configs"), "tiles": tiles,
                              "num_warps": result.num_warps, "num_stages": result.num_stages,
                              "shared": result.shared, "error": result.error}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
