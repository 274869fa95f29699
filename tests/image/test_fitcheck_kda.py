"""Kimi Linear's KDA layers in the image under test: what the build proved on sm_86 (fp16 and bf16), the
preflight's answer for a Kimi Linear config from the image's fit table, the recorder's launches (vLLM
0.33.0's KDA ops called on CPU tensors as KimiGatedDeltaNetAttention calls them, the device's choices
taken) and its refusal on a host that decides FLA's kernels otherwise than the device.

This checkout is mounted read-only into each container; nothing in the image is changed."""
import json
from collections import Counter

import pytest
import transformers

from contract.clamp_paths import FIT_REPORT, FIT_REPORT_SM86, FIT_REPORT_SM86_BF16, FIT_TABLE
from contract.devices import AMPERE
from patches.fitcheck.families.kda import BUILTIN_KDA, KDA_FIELDS
from tests.image.containers import run_to_end
from tests import REPO

MODEL = "/models/kimi-linear"
SM86_LIMIT = AMPERE.limit
# Every kernel the matrix's KDA layer (no gate lower bound) launches below compute capability 9.0
KDA_KERNELS = {"_causal_conv1d_fwd_kernel", "_gather_initial_states_kernel", "l2norm_fwd_kernel2",
               "kda_gate_chunk_cumsum_vector_kernel", "chunk_kda_fwd_kernel_intra_token_parallel",
               "chunk_kda_fwd_kernel_inter_solve_fused", "recompute_w_u_fwd_kernel",
               "chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_gla_fwd_kernel_o",
               "_causal_conv1d_update_kernel", "fused_recurrent_kda_packed_decode_kernel",
               "fused_recurrent_kda_fwd_kernel", "layer_norm_gated_fwd_kernel"}
# The autotuned ones and the size of each one's list (recorded once per configuration, per chunked call)
AUTOTUNED = {"kda_gate_chunk_cumsum_vector_kernel": 6, "chunk_kda_fwd_kernel_intra_token_parallel": 16,
             "chunk_kda_fwd_kernel_inter_solve_fused": 6, "recompute_w_u_fwd_kernel": 9,
             "chunk_gated_delta_rule_fwd_kernel_h_blockdim64": 12, "chunk_gla_fwd_kernel_o": 36}
REPORTS = (FIT_REPORT, FIT_REPORT_SM86, FIT_REPORT_SM86_BF16, FIT_TABLE)


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    """Checkout (read-only) and a folder with the config.json transformers' KimiLinearConfig writes."""
    model = tmp_path_factory.mktemp("model") / "kimi-linear"
    transformers.KimiLinearConfig().save_pretrained(model)
    return {str(REPO): {"bind": "/src", "mode": "ro"}, str(model): {"bind": MODEL, "mode": "ro"}}


@pytest.fixture
def run_in_image(docker_client, image, mounts):
    """Runs a bash script in a fresh container of the image (a Triton cache of its own); (exit code,
    stdout, stderr)."""
    def run(script: str):
        return run_to_end(docker_client, image, [], timeout=900,
                          entrypoint=["bash", "-c", f"set -e\nexport TRITON_CACHE_DIR=$(mktemp -d)\n{script}"],
                          environment={"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/src"}, volumes=mounts,
                          working_dir="/src")
    return run


def test_the_build_proved_kimi_linears_kda_on_sm86_in_fp16_and_bf16_whatever_its_head_counts(run_in_image):
    code, out, err = run_in_image(f"python3 - <<'PY'\nimport json\nfrom contract.clamp_paths import read_report\nprint(json.dumps([read_report(p) for p in "
                                  f"{list(REPORTS)!r}]))\nPY")
    assert code == 0, err[-2000:]
    sm75, sm86, sm86_bf16, fit_table = json.loads(out)
    (name,) = BUILTIN_KDA
    # Kimi Linear's latent attention needs 8.0: the Turing pass leaves the model out whole
    assert not [row for row in sm75["mixer_launches"] if row["model"].startswith(name)]
    for report, dtype in ((sm86, "float16"), (sm86_bf16, "bfloat16")):
        assert report["all_fit"] is True and report["dtype"] == dtype and report["device"]["cc"] == 86
        needs = {}
        for ranks in ("", "-tp2", "-tp4"):
            rows = [row for row in report["mixer_launches"]
                    if (row["model"], row["layer"]) == (name + ranks, "linear_attention")]
            assert {row["kernel"] for row in rows} == KDA_KERNELS, (dtype, ranks)
            assert all(row["fits"] and row["shared"] is not None and row["error"] is None for row in rows)
            tuned = [row for row in rows if row["autotune"]]
            # each autotuned kernel once per chunked call (prefill and mixed), at a configuration that fits
            assert Counter(row["kernel"] for row in tuned) == {kernel: 2 for kernel in AUTOTUNED}, (dtype, ranks)
            assert all(row["autotune"]["configs"] == AUTOTUNED[row["kernel"]]
                       and row["autotune"]["fitting_config"] is not None for row in tuned)
            # the spec-decode recurrent kernel at each of its four BV / stage choices
            assert len([row for row in rows if row["kernel"] == "fused_recurrent_kda_fwd_kernel"]) == 4
            by_kernel = {}
            for row in rows:
                by_kernel.setdefault((row["kind"], row["kernel"]), []).append(row["shared"])
            needs[ranks] = {key: sorted(shared) for key, shared in by_kernel.items()}
        # 32, 16 and 8 heads per rank reach the kernels as offsets and grid only: the same need per kernel,
        # which is why the verdict leaves the heads out of its key (KDA_FIELDS)
        assert needs[""] == needs["-tp2"] == needs["-tp4"], (dtype, needs)
    kda = {(v["cc"], v["limit"], v["dtype"]) + tuple(v[k] for k in KDA_FIELDS) + (v["all_fit"],)
           for v in fit_table["mixer_verdicts"] if v["mixer"] == "kda"}
    assert kda == {(86, SM86_LIMIT, dtype, "kda", 128, 4, False, True) for dtype in ("float16", "bfloat16")}


PREFLIGHT = r"""
python3 - <<'PY'
import json
from contract.model_config import parse_config
from entrypoint.checks.clamp import start_fit
path = "%s/config.json"
for cc, limit in (((8, 6), 101376), ((7, 5), 65536)):
    result = start_fit(path, parse_config(json.load(open(path))), cc, limit)()
    print(json.dumps([cc, result.status.value, result.message]))
PY
find "$TRITON_CACHE_DIR" -name '*.cubin' -printf 'cubin %%f\n' >&2
""" % MODEL


def test_a_kimi_linear_config_fits_at_preflight_from_the_table_on_sm86_and_is_refused_on_turing(run_in_image):
    code, out, err = run_in_image(PREFLIGHT)
    assert code == 0, err[-2000:]
    answers = {tuple(cc): (status, message) for cc, status, message in map(json.loads, out.splitlines())}
    status, message = answers[(8, 6)]
    assert status == "pass" and "from the fit table's verdicts, nothing compiled" in message, message
    status, message = answers[(7, 5)]
    assert status == "fail" and "multi-head latent attention (kv_lora_rank 512) needs compute capability 8.0" in message
    assert [line for line in err.splitlines() if line.startswith("cubin ")] == []


RECORDED = r"""
python3 - <<'PY'
import json
from patches.fitcheck.families.kda import launches as kda_launches
from contract.model_config import parse_config
from patches.fitcheck.families import mixer_from_config
from patches.fitcheck.families.kda import BUILTIN_KDA, KDA_FIELDS
shape = mixer_from_config(parse_config(BUILTIN_KDA["kimi-linear-48b-a3b"], "built-in"), "kimi", "built-in")
found = {}
for cc, limit in ((86, 101376), (75, 65536)):
    launches = kda_launches.record_kda(shape, cc, limit)
    found[cc] = {"launches": [[l.case.kind, l.kernel_name, l.options.get("configs")] for l in launches],
                 "precision": sorted({l.params["SOLVE_TRIL_DOT_PRECISION"] for l in launches
                                      if "SOLVE_TRIL_DOT_PRECISION" in l.params}),
                 "pdl": sorted({l.params["launch_pdl"] for l in launches if "launch_pdl" in l.params}),
                 "recurrent": [[l.params["BV"], l.params.get("num_stages", l.options.get("num_stages"))] for l in launches
                               if l.kernel_name == "fused_recurrent_kda_fwd_kernel"]}
print(json.dumps(found))
PY
"""


def test_the_recorder_takes_the_devices_choices_and_launches_what_the_module_says(run_in_image):
    code, out, err = run_in_image(RECORDED)
    assert code == 0, err[-2000:]
    found = json.loads(out.strip().splitlines()[-1])
    ampere, turing = found["86"], found["75"]
    # the intra-chunk solve's dot precision follows has_device_capability(80), asked per call: the
    # recorder takes the device's answer, not the CPU host's
    assert (ampere["precision"], turing["precision"]) == (["tf32"], ["ieee"])
    assert ampere["pdl"] == [False]  # programmatic dependent launch is sm_90's
    # heads x sequences 32, 64, 128, 224 at 32 heads: BV 4 / 4 stages, 8 / 3, 16 / 3, 8 / 3
    assert ampere["recurrent"] == [[4, 4], [8, 3], [16, 3], [8, 3]]
    launches = ampere["launches"]
    for kind in ("prefill", "mixed"):
        made = Counter((kernel, configs) for k, kernel, configs in launches if k == kind)
        assert {kernel: configs for kernel, configs in made} == {
            **{kernel: None for kernel in ("_causal_conv1d_fwd_kernel", "_gather_initial_states_kernel",
                                           "l2norm_fwd_kernel2")}, **AUTOTUNED}, kind
        assert made[("_causal_conv1d_fwd_kernel", None)] == 3 and made[("l2norm_fwd_kernel2", None)] == 2
        assert all(made[(kernel, configs)] == configs for kernel, configs in AUTOTUNED.items())
    assert sorted(kernel for k, kernel, _ in launches if k == "decode") == [
        "_causal_conv1d_update_kernel", "fused_recurrent_kda_packed_decode_kernel"]
    assert Counter(kernel for k, kernel, _ in launches if k == "spec-decode") == {
        "_causal_conv1d_update_kernel": 4, "fused_recurrent_kda_fwd_kernel": 4}
    assert [kernel for k, kernel, _ in launches if k == "norm-eager"] == ["layer_norm_gated_fwd_kernel"]


def test_the_check_refuses_to_record_kda_where_the_host_decides_flas_kernels_otherwise(run_in_image):
    # An sm_86 with 232,448 bytes would answer FLA's check_shared_mem() True, this CPU host False: the
    # launches recorded here would not be that device's, so the check stops in one line (exit 2)
    code, out, err = run_in_image(f"python3 -m patches.fitcheck --model-config {MODEL}/config.json --cc 86 "
                                  "--limit 232448 --dtype bfloat16")
    assert code == 2, (out[-1000:], err[-2000:])
    (line,) = [line for line in err.splitlines() if line.startswith("fitcheck:")]
    assert "kimi-linear/linear_attention: this host decides FLA's kernels otherwise than cc 86 at 232448 bytes" in line
    assert "check_shared_mem()" in line and "run the check on a host without a GPU" in line
