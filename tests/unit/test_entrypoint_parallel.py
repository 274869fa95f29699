"""The parallel check's decisions, and the NCCL probe's process handling (the probe itself runs on GPUs in tests/gpu)."""
import json
import os
import sys

import pytest

from contract.model_config import parse_config
from contract.verdict import Status
from entrypoint.checks import parallel
from entrypoint.checks.parallel import LayerHeads
from entrypoint.device import Device
from entrypoint.environment import server_env
from patches.fitcheck.families import attention_layers

T4 = Device("Tesla T4", (7, 5), 65536, 1, 0)
GEMMA4_E4B_LIKE = [LayerHeads("sliding", 8, 2), LayerHeads("global", 8, 2)]


def gpus(*ccs):
    return [Device(f"GPU{i}", cc, 65536, len(ccs), i) for i, cc in enumerate(ccs)]


def test_one_gpu_needs_no_check():
    assert parallel.decide(1, 1, [T4], GEMMA4_E4B_LIKE).status is Status.PASS


def test_tp_equal_to_gpu_count_leaves_the_verdict_to_the_probe():
    assert parallel.decide(2, 1, gpus((7, 5), (7, 5)), GEMMA4_E4B_LIKE) is None


def test_too_few_gpus_fails_naming_both_sizes():
    result = parallel.decide(2, 2, gpus((7, 5), (7, 5)), GEMMA4_E4B_LIKE)
    assert result.status is Status.FAIL
    assert "TENSOR_PARALLEL_SIZE=2 x PIPELINE_PARALLEL_SIZE=2 needs 4 GPUs; 2 visible" in result.message
    assert "--gpus all" in result.fix


def test_mixed_generations_are_refused_with_the_reason():
    result = parallel.decide(2, 1, gpus((7, 5), (8, 6)), GEMMA4_E4B_LIKE)
    assert result.status is Status.FAIL
    assert "mix compute capabilities" in result.message and "7.5" in result.message and "8.6" in result.message


def test_only_the_gpus_vllm_uses_must_match():
    assert parallel.decide(2, 1, gpus((8, 6), (8, 6), (7, 5)), GEMMA4_E4B_LIKE) is None


@pytest.mark.parametrize("tp, layer, why", [
    (3, LayerHeads("sliding", 8, 2), "8 attention heads do not divide by 3"),
    (4, LayerHeads("sliding", 16, 6), "6 KV heads do not divide by 4"),
    (4, LayerHeads("global", 8, 3), None),  # 8 % 4 == 0 but 4 is not a multiple of 3
])
def test_split_errors_follow_vllms_rule(tp, layer, why):
    error = parallel.tp_split_error(tp, layer)
    assert error is not None
    if why:
        assert why in error


def test_kv_heads_fewer_than_tp_are_replicated_when_tp_is_a_multiple():
    assert parallel.tp_split_error(4, LayerHeads("global", 8, 1)) is None
    assert parallel.tp_split_error(4, LayerHeads("global", 8, 2)) is None


def test_a_gemma4_global_layer_that_cannot_split_is_named():
    config = {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 4,
              "num_global_key_value_heads": 3, "head_dim": 256, "global_head_dim": 512,
              "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]}
    config["num_attention_heads"] = 12  # 12 query heads: 4 and 3 KV heads both divide it
    layers = parallel.layer_heads(attention_layers(parse_config(config, "config.json"), "m", "config.json"))
    result = parallel.decide(2, 1, gpus((7, 5), (7, 5)), layers)
    assert result.status is Status.FAIL
    assert "global layers" in result.message and "3 KV heads" in result.message
    assert "TENSOR_PARALLEL_SIZE to one of" in result.fix


def test_turing_gets_cumem_host_off_unless_the_user_set_it():
    assert parallel.nccl_defaults((7, 5), 2, {}) == {"NCCL_CUMEM_HOST_ENABLE": "0"}
    assert parallel.nccl_defaults((7, 5), 2, {"NCCL_CUMEM_HOST_ENABLE": "1"}) == {}
    assert parallel.nccl_defaults((7, 5), 1, {}) == {}
    assert parallel.nccl_defaults((8, 6), 2, {}) == {}


def test_probe_outcomes_become_verdicts():
    ok = parallel.probe_verdict(2, {"ok": True, "mib": 8, "world": 2}, 1.25, 60)
    assert ok.status is Status.PASS and "8 MiB across 2 GPUs" in ok.message and "1.2 s" in ok.message
    wrong = parallel.probe_verdict(2, {"ok": False, "error": "rank 1: 5 of 10 values differ"}, 1.0, 60)
    assert wrong.status is Status.FAIL and "NCCL_P2P_DISABLE=1" in wrong.fix
    hung = parallel.probe_verdict(2, None, 60.0, 60)
    assert hung.status is Status.FAIL and "did not finish in 60 s" in hung.message


def test_a_hanging_probe_is_killed_with_its_process_group():
    # A stand-in for a hung NCCL rank: a child and a grandchild blocking forever, both holding the
    # probe's stdout. run_probe returns only once every holder is gone, so returning at all proves
    # the whole group was killed, not just the child.
    standin_hang = [sys.executable, "-c",
                    "import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import os; os.read(os.pipe()[0], 1)']);"
                    " os.read(os.pipe()[0], 1)"]
    result = parallel.run_probe(2, dict(os.environ), timeout_s=2, argv=standin_hang)
    assert result.status is Status.FAIL and "a hang" in result.message


def test_the_real_probe_without_gpus_fails_with_its_reason():
    result = parallel.run_probe(2, {**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout_s=300)
    assert result.status is Status.FAIL
    assert "NCCL all-reduce across 2 GPUs failed" in result.message


# Settings: the sizes and the GPU selection variables, validated like every other setting.
from entrypoint.server_command import server_argv  # noqa: E402
from entrypoint.settings import SettingsError, parse_settings  # noqa: E402
from tests.support.entrypoint_cli import run_entrypoint  # noqa: E402

MODEL = {"MODEL": "/models/gemma-4-E2B-it"}


@pytest.mark.parametrize("variable, value", [
    ("TENSOR_PARALLEL_SIZE", "0"), ("TENSOR_PARALLEL_SIZE", "two"), ("PIPELINE_PARALLEL_SIZE", "-1"),
    ("CUDA_VISIBLE_DEVICES", "0,,1"), ("CUDA_VISIBLE_DEVICES", "0,0"), ("CUDA_VISIBLE_DEVICES", "gpu0"),
    ("CUDA_VISIBLE_DEVICES", "all"), ("NVIDIA_VISIBLE_DEVICES", "some"),
])
def test_bad_parallel_settings_are_refused_naming_the_variable(variable, value):
    with pytest.raises(SettingsError) as caught:
        parse_settings({**MODEL, variable: value})
    assert caught.value.variable == variable


@pytest.mark.parametrize("variable, value", [
    ("CUDA_VISIBLE_DEVICES", "0,1"), ("CUDA_VISIBLE_DEVICES", "GPU-8a1b2c3d-0000-1111-2222-333344445555"),
    ("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_VISIBLE_DEVICES", "void"), ("NVIDIA_VISIBLE_DEVICES", "1,3"),
])
def test_gpu_selections_as_cuda_and_the_toolkit_read_them(variable, value):
    env = {**MODEL, variable: value}
    assert parse_settings(env) == parse_settings(MODEL)  # accepted, and it changes no other setting
    assert server_env(env)[variable] == value  # the selection reaches the server as written


def test_bad_tensor_parallel_size_exits_2_before_any_check():
    done = run_entrypoint({**MODEL, "TENSOR_PARALLEL_SIZE": "0"}, "check")
    assert done.returncode == 2 and "TENSOR_PARALLEL_SIZE" in done.stderr and "preflight" not in done.stdout


def test_sizes_reach_the_servers_argv_only_when_above_one():
    default = server_argv(parse_settings(MODEL), None)
    assert "--tensor-parallel-size" not in default and "--pipeline-parallel-size" not in default
    split = parse_settings({**MODEL, "TENSOR_PARALLEL_SIZE": "2", "PIPELINE_PARALLEL_SIZE": "2"})
    argv = server_argv(split, None)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    assert split.world_size == 4


def test_the_planned_check_judges_the_model_as_read_once():
    config = {"model_type": "gemma4_text", "num_attention_heads": 12, "num_key_value_heads": 4,
              "num_global_key_value_heads": 3, "head_dim": 256, "global_head_dim": 512,
              "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]}
    refused = parallel.plan_parallel(2, 1, gpus((7, 5), (7, 5)), parse_config(config), {})
    assert refused.status is Status.FAIL and "global layers" in refused.message
    probe = parallel.plan_parallel(2, 1, gpus((7, 5), (7, 5)), parse_config({**config, "num_global_key_value_heads": 2}), {})
    assert callable(probe)  # every layer splits: the NCCL probe decides, started only when called


def test_a_model_without_whole_weights_is_still_judged_by_its_config(tmp_path):
    # The model check fails on the missing weights; the parallel check must still read the heads
    # (the GPU tier's model folder holds a config.json alone, as a half-copied model does).
    from entrypoint import preflight
    from entrypoint.checks import model

    config = {"model_type": "gemma4_text", "num_attention_heads": 12, "num_key_value_heads": 4,
              "num_global_key_value_heads": 3, "head_dim": 256, "global_head_dim": 512,
              "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    resolved = model.resolve(model.MODEL, "MODEL", str(tmp_path), str(tmp_path / "hub"), True)
    assert resolved.found is None and resolved.problem.status is Status.FAIL  # no .safetensors
    assert preflight.model_config(resolved).top.values == config
    refused = parallel.plan_parallel(2, 1, gpus((7, 5), (7, 5)), preflight.model_config(resolved), {})
    assert refused.status is Status.FAIL and "3 KV heads do not divide by 2" in refused.message
