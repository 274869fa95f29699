"""patches/fitcheck/families/gated_delta_net/launches.py inside the image, recording only (quick: nothing is compiled;
bench/gdn_kernels_smem compiles): vLLM 0.33.0's gated delta net ops, called on CPU tensors as the layer
calls them on a Turing or Ampere GPU, launch the kernels below, every autotuned one once per
configuration; the CPU host answers FLA's device-dependent choices as sm_75 and sm_86 do; the layer's own
backend choice is Triton/FLA there and FlashInfer only on sm_90."""
import json
from collections import Counter

from tests.image.containers import run_to_end
from tests import REPO

SCRIPT = """
import json
from patches.fitcheck.families.gated_delta_net import launches as gdn_launches
from contract.model_config import parse_config
from patches.fitcheck.families.gated_delta_net import BUILTIN_GDN, gdn_from_config
from contract.devices import DEVICES
shape = gdn_from_config(parse_config(BUILTIN_GDN["qwen3.5-35b-a3b"], "built-in"), "qwen3.5", "built-in")
launches = gdn_launches.record_gdn(shape)
print(json.dumps({
    "launches": [[l.case.kind, l.kernel_name, l.options.get("configs"), l.params.get("ROWS_PER_BLOCK")]
                 for l in launches],
    "differ": {name: gdn_launches.host_choices_differ(*DEVICES[name]) for name in ("sm75", "sm86")},
    "backend": {name: gdn_launches.prefill_backend(shape, *DEVICES[name]) for name in ("sm75", "sm86", "sm90")}}))
"""
PREFILL = {"_causal_conv1d_fwd_kernel": None, "_fused_post_conv_kernel": None, "chunk_local_cumsum_scalar_kernel": 4,
           "chunk_scaled_dot_kkt_fwd_kernel": 27, "merge_16x16_to_64x64_inverse_kernel": 12,
           "recompute_w_u_fwd_kernel": 9, "chunk_gated_delta_rule_fwd_kernel_h_blockdim64": 12,
           "chunk_fwd_kernel_o": 36}
PLAIN = {"mixed": {"fused_sigmoid_gating_delta_rule_update_kernel"},
         "decode": {"_causal_conv1d_update_kernel", "fused_recurrent_gated_delta_rule_packed_decode_kernel"},
         "spec-decode": {"_causal_conv1d_update_kernel", "fused_sigmoid_gating_delta_rule_update_kernel"}}


def test_the_gated_delta_net_launches_what_the_module_says_on_a_simulated_turing_and_ampere(docker_client, image):
    code, out, err = run_to_end(docker_client, image, [], timeout=600, entrypoint=["python3", "-c", SCRIPT],
                                environment={"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/src"},
                                volumes={str(REPO): {"bind": "/src", "mode": "ro"}}, working_dir="/src")
    assert code == 0, err[-2000:]
    found = json.loads(out.strip().splitlines()[-1])
    launches = found["launches"]
    prefill = [(kernel, configs) for kind, kernel, configs, _ in launches if kind == "prefill"]
    assert dict(prefill) == PREFILL
    # each autotuned kernel recorded once per configuration of its list, a plain one once
    assert Counter(kernel for kernel, _ in prefill) == {kernel: configs or 1 for kernel, configs in PREFILL.items()}
    for kind, kernels in PLAIN.items():
        made = [(kernel, configs) for k, kernel, configs, _ in launches if k == kind]
        assert sorted(kernel for kernel, _ in made) == sorted(kernels) and all(c is None for _, c in made), kind
    assert [rows for kind, _, _, rows in launches if kind == "norm-eager"] == [1, 2, 4]
    assert found["differ"] == {"sm75": [], "sm86": []}
    assert found["backend"] == {"sm75": "triton", "sm86": "triton", "sm90": "flashinfer"}
