"""Runs in a container of the image (`python3 -m tooling.probes.ssm.probe`, from bench/ssm_kernels_smem):
every Triton launch of the hybrid families' Mamba-2 mixers, recorded by the fit check's own recorder
(patches/fitcheck/families/mamba2/launches.py: vLLM's real mixer ops on CPU tensors) and cross-compiled for each
device by the image's Triton, every configuration of each autotuned kernel included (the fit check stops
at the first that fits). One JSON line per (device, family, kernel, configuration). Nothing runs on a GPU
and nothing is timed.
"""
import json
import sys

from contract.model_config import parse_config
from door.problem import Problem
from patches.fitcheck import op_recording
from patches.fitcheck.compiler import compile_launches
from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS
from patches.fitcheck.families.mamba2.launches import record_mamba2
from patches.fitcheck.families import mixer_from_config
from door import files


def main(argv: list[str]) -> None:
    """argv: the families, the devices ({name: [cc, limit]}) as JSON."""
    families = files.own_json(argv[0])
    devices = files.own_json(argv[1])
    launches = []
    for name in families:
        try:
            launches += record_mamba2(mixer_from_config(parse_config(BUILTIN_HYBRIDS[name], f"built-in {name}"), name, f"built-in {name}"))
        except Problem as error:  # an op this probe calls wrongly: said, not hidden
            print(json.dumps({"family": name, "kind": "record", "error": str(error)[:300]}), flush=True)
    for device, (cc, limit) in devices.items():
        results = compile_launches([(l.fn, l.params, op_recording.options(l)) for l in launches], cc, 2)
        for launch, result in zip(launches, results):
            tiles = {k: v for k, v in launch.params.items() if k.startswith("BLOCK") and isinstance(v, int)}
            print(json.dumps({"device": device, "limit": limit, "family": launch.case.shape.model, "kind": launch.case.kind,
                              "kernel": launch.kernel_name, "config": launch.options.get("config"), "tiles": tiles,
                              "num_warps": launch.options.get("num_warps"), "num_stages": launch.options.get("num_stages"),
                              "shared": result.shared, "error": result.error}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
