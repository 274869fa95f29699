"""Failures of real Turing/Ampere hosts that the first preflight missed: the driver floor of the image's
CUDA runtime and forward compatibility, the linker cache, settings that break Turing, quantization
methods above the device, audio towers without the audio extra, two CUDA stacks in one image.
Decisions over values; the driver check end to end over gcc-built StandIn driver libraries."""
import json
import os
import subprocess

import pytest

from entrypoint.argv import judge_extra

from contract.model_config import parse_config
from contract.verdict import Status
from entrypoint import linker_cache
from entrypoint.checks import audio, driver_floor, turing_settings
from entrypoint.checks.driver import check_driver
from entrypoint.start import main
from entrypoint.cuda_stack import DRIVER_FLOOR, driver_floor as floor_of, judge_stack, stack_wheels, torch_cuda_version
from entrypoint.settings import SettingsError, parse_settings

from tests.support.model_files import write_model_dir
from tooling.standins.standin_driver import build_standin_driver, proc_driver_version_text
from tests.support.vllm_033_facts import VLLM_033_MIN, VLLM_033_VALUES
from tests.unit.test_entrypoint_cli import DEVICE_CHECKS, serve
from tooling.serving_stack import free_port

T4, RTX_2080, RTX_3090 = "Tesla T4", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 3090"


# 1. driver floor and CUDA_COMPAT

def test_the_floor_comes_from_the_one_table():
    assert floor_of("13.0") == DRIVER_FLOOR[13] == 580 and floor_of("12.8") == 525 and floor_of(None) is None


def write_torch_version(root, package, cuda):
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("raise ImportError('a StandIn torch: never imported')\n")
    (root / package / "version.py").write_text(
        f"from typing import Optional\n__version__ = '2.14.0'\ncuda: Optional[str] = {cuda!r}\n")
    return root / package / "version.py"


def test_torch_cuda_version_is_read_without_importing_torch(tmp_path):
    assert torch_cuda_version(str(write_torch_version(tmp_path, "t13", "13.0"))) == "13.0"
    assert torch_cuda_version(str(write_torch_version(tmp_path, "tcpu", None))) is None
    assert torch_cuda_version(str(tmp_path / "missing.py")) is None


@pytest.mark.parametrize("name,capable", [
    ("Tesla T4", True), ("Quadro RTX 6000", True), ("NVIDIA RTX A4000", True), ("NVIDIA A10G", True),
    ("NVIDIA L4", True), ("NVIDIA H200", True), ("NVIDIA RTX 6000 Ada Generation", True),
    ("NVIDIA GeForce RTX 2080 Ti", False), ("NVIDIA GeForce RTX 3090", False), ("NVIDIA TITAN RTX", False),
    (None, False)])
def test_forward_compat_is_for_datacenter_and_professional_cards(name, capable):
    assert driver_floor.compat_capable(name) is capable


def test_a_driver_at_the_floor_passes_without_compat():
    assert driver_floor.judge_floor("580.65.06", "13.0", RTX_3090, "auto", False) == driver_floor.Compat(None, False)


def test_below_the_floor_on_geforce_says_upgrade():
    compat = driver_floor.judge_floor("535.104.05", "13.0", RTX_2080, "auto", True)
    assert compat.result.status is Status.FAIL and not compat.use_compat
    assert "below 580" in compat.result.message and "upgrade the host driver to 580 or newer" == compat.result.fix


def test_below_the_floor_on_a_t4_uses_the_compat_libraries():
    compat = driver_floor.judge_floor("535.104.05", "13.0", T4, "auto", True)
    assert compat.use_compat and compat.result.status is Status.WARN
    assert driver_floor.compat_applied([compat.result])


def test_below_the_floor_without_compat_libraries_says_the_image_lacks_them():
    compat = driver_floor.judge_floor("535.104.05", "13.0", T4, "auto", False)
    assert compat.result.status is Status.FAIL and "PyPI base" in compat.result.message


def test_compat_off_refuses_and_on_forces():
    assert driver_floor.judge_floor("535.104.05", "13.0", T4, "off", True).result.status is Status.FAIL
    forced = driver_floor.judge_floor("535.104.05", "13.0", RTX_2080, "on", True)
    assert forced.use_compat and forced.result.status is Status.WARN


def test_compat_goes_first_on_the_library_path_once():
    assert driver_floor.with_compat("/usr/local/nvidia/lib64:/usr/local/cuda/compat") == \
        "/usr/local/cuda/compat:/usr/local/nvidia/lib64"
    assert driver_floor.with_compat(None) == "/usr/local/cuda/compat"


@pytest.mark.parametrize("raw,mode", [(None, "auto"), ("ON", "on"), ("off", "off")])
def test_cuda_compat_setting(raw, mode):
    env = {"MODEL": "m", **({"CUDA_COMPAT": raw} if raw else {})}
    assert parse_settings(env).cuda_compat == mode


def test_cuda_compat_rejects_an_unknown_word():
    with pytest.raises(SettingsError, match="CUDA_COMPAT"):
        parse_settings({"MODEL": "m", "CUDA_COMPAT": "maybe"})


@pytest.fixture(scope="module")
def old_driver(tmp_path_factory):
    root = tmp_path_factory.mktemp("old-driver")
    libs = build_standin_driver(root / "535", driver_version="535.104.05")
    write_torch_version(root / "site", "standin_torch_cu13", "13.0")
    (root / "version").write_text(proc_driver_version_text("535.104.05"))
    return root, libs


def old_driver_check(old_driver, monkeypatch, gpu_name, mode="auto"):
    root, libs = old_driver
    monkeypatch.syspath_prepend(str(root / "site"))
    return check_driver(str(libs / "libcuda.so.1"), str(libs / "libnvidia-ml.so.1"), str(root / "version"),
                        gpu_name=gpu_name, compat_mode=mode, torch_module="standin_torch_cu13")


def test_driver_check_fails_a_535_driver_under_a_cuda_13_torch(old_driver, monkeypatch):
    result = old_driver_check(old_driver, monkeypatch, RTX_2080)
    assert result.status is Status.FAIL and "535.104.05 is below 580" in result.message
    assert result.fix.startswith("upgrade the host driver to 580")


# 2. the linker cache

LDCONFIG_STALE = ("3 libs found in cache `/etc/ld.so.cache'\n"
                  "\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.13\n"
                  "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n")


def test_triton_takes_the_cache_first_and_the_library_path_only_when_the_cache_has_none():
    env = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    assert linker_cache.triton_libcuda(LDCONFIG_STALE, env, lambda p: True) == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert linker_cache.triton_libcuda("0 libs found\n", env, lambda p: True) == "/usr/local/nvidia/lib64/libcuda.so.1"
    assert linker_cache.triton_libcuda("", {"TRITON_LIBCUDA_PATH": "/x"}, lambda p: False) == "/x/libcuda.so.1"


def test_loaded_path_reads_the_mapped_file():
    maps = ("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libcudart.so.13\n"
            "7f20-7f30 r-xp 00000000 08:01 13 /usr/local/nvidia/lib64/libcuda.so.535.104.05\n")
    assert linker_cache.loaded_path(maps) == "/usr/local/nvidia/lib64/libcuda.so.535.104.05"


def test_disagreeing_loaders_fail_naming_both_files():
    result = linker_cache.judge_agreement("driver", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                          "/usr/local/nvidia/lib64/libcuda.so.1", realpath=lambda p: p)
    assert result.status is Status.FAIL
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in result.message and "/usr/local/nvidia/lib64" in result.message
    assert linker_cache.judge_agreement("driver", "/a/libcuda.so.1", "/a/libcuda.so.1") is None


def test_the_loader_finds_a_versioned_library_in_the_cache_or_on_the_library_path(tmp_path):
    listing = ("2 libs found in cache `/etc/ld.so.cache'\n"
               "\tlibavcodec.so.59 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libavcodec.so.59\n"
               "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n")
    assert linker_cache.loader_finds("libavcodec.so", listing, {})
    assert not linker_cache.loader_finds("libavformat.so", listing, {})
    (tmp_path / "ffmpeg").mkdir()
    (tmp_path / "ffmpeg" / "libavformat.so.59").write_bytes(b"")
    path = f"{tmp_path / 'absent'}::{tmp_path / 'ffmpeg'}"  # a missing folder and an empty entry are passed over
    assert linker_cache.loader_finds("libavformat.so", listing, {"LD_LIBRARY_PATH": path})
    assert not linker_cache.loader_finds("libswscale.so", listing, {"LD_LIBRARY_PATH": path})


def test_the_linker_cache_is_listed_once_for_the_checks_that_read_it(monkeypatch):
    runs = []
    monkeypatch.setattr(linker_cache.subprocess, "run", lambda argv, **_: runs.append(argv) or
                        subprocess.CompletedProcess(argv, 0, stdout=LDCONFIG_STALE))
    linker_cache.ldconfig_listing.cache_clear()
    try:
        assert linker_cache.ldconfig_listing() == linker_cache.ldconfig_listing() == LDCONFIG_STALE
    finally:
        linker_cache.ldconfig_listing.cache_clear()
    assert runs == [[linker_cache.LDCONFIG, "-p"]]


def test_the_server_gets_triton_pointed_at_the_loaders_directory_unless_the_user_set_it():
    # the maps name the mapped file itself (as measured on an H200 host: libcuda.so.580.159.04)
    loader = "/usr/local/nvidia/lib64/libcuda.so.535.104.05"
    present = {"/usr/local/nvidia/lib64/libcuda.so.1"}.__contains__
    assert linker_cache.triton_override({}, loader, present) == {"TRITON_LIBCUDA_PATH": "/usr/local/nvidia/lib64"}
    assert linker_cache.triton_override({"TRITON_LIBCUDA_PATH": "/opt/driver"}, loader, present) == {}
    assert linker_cache.triton_override({"TRITON_LIBCUDA_PATH": " "}, loader, present) == \
        {"TRITON_LIBCUDA_PATH": "/usr/local/nvidia/lib64"}
    assert linker_cache.triton_override({}, None, present) == {}  # no GPU: no libcuda loaded, nothing to point at
    # a libcuda.so.1 symlink into a folder without that name: Triton could not link there; left to the cache
    assert linker_cache.triton_override({}, "/opt/real/libcuda.so.535.104.05", present) == {}


def test_loaded_libcuda_reads_a_maps_file_and_none_where_there_is_none(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f20-7f30 r-xp 00000000 08:01 13 /usr/local/nvidia/lib64/libcuda.so.1\n")
    assert linker_cache.loaded_libcuda(str(maps)) == "/usr/local/nvidia/lib64/libcuda.so.1"
    assert linker_cache.loaded_libcuda(str(tmp_path / "absent")) is None


def test_a_stale_libcuda_in_the_cache_loses_to_the_override_without_ldconfig_running(tmp_path):
    """Real ldconfig over StandIn drivers in their own root: the image's cache lists a stale libcuda in
    /usr/lib/x86_64-linux-gnu, which Triton alone would take; nothing rewrites the cache (the root may
    be read-only, the uid is not root), and TRITON_LIBCUDA_PATH from the loader makes Triton agree."""
    stale, mount = tmp_path / "usr/lib/x86_64-linux-gnu", tmp_path / "usr/local/nvidia/lib64"
    build_standin_driver(stale)
    build_standin_driver(mount)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld.so.conf").write_text("")
    subprocess.run(["/sbin/ldconfig", "-r", str(tmp_path), "/usr/lib/x86_64-linux-gnu"], check=True)
    cache = subprocess.run(["/sbin/ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")],
                           capture_output=True, text=True, check=True).stdout
    assert linker_cache.cache_paths(cache) == ["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]
    env = {"LD_LIBRARY_PATH": str(mount)}
    loader = str(mount / "libcuda.so.1")  # the loader: LD_LIBRARY_PATH first
    in_root = lambda path: path if path.startswith(str(tmp_path)) else str(tmp_path) + path  # noqa: E731
    before = linker_cache.judge_agreement("driver", in_root(linker_cache.triton_libcuda(cache, env)), loader)
    assert before is not None and before.status is Status.FAIL
    server_env = {**env, **linker_cache.triton_override(env, loader)}
    assert linker_cache.judge_agreement("driver", in_root(linker_cache.triton_libcuda(cache, server_env)), loader) is None


@pytest.mark.parametrize("given", [None, "/opt/driver"])
def test_the_server_starts_with_triton_pointed_at_the_libcuda_the_entrypoint_loaded(tmp_path, given):
    """The whole path: the entrypoint loads a StandIn libcuda through LD_LIBRARY_PATH and execs the
    (stand-in) server with TRITON_LIBCUDA_PATH naming that directory; one the user set is kept."""
    libs = build_standin_driver(tmp_path / "libs")
    write_model_dir(tmp_path / "model")
    env = {"MODEL": str(tmp_path / "model"), "PORT": str(free_port()), "LD_LIBRARY_PATH": str(libs),
           "SKIP_CHECKS": DEVICE_CHECKS + ",port", **({"TRITON_LIBCUDA_PATH": given} if given else {})}
    process, record, out, err = serve(tmp_path, env)
    assert process.returncode == 0, out + err
    assert json.loads(record.read_text())["env"]["TRITON_LIBCUDA_PATH"] == (given or str(libs))


# 3. settings that break Turing

def words(*args: str):
    """The extra words as the checks see them where no option table is at hand (spelled out), with
    vLLM 0.33.0's value lists (its image facts)."""
    return judge_extra(args, (), None, VLLM_033_VALUES)


def test_triton_override_arch_is_refused_on_any_device():
    problem = turing_settings.settings_problem({"TRITON_OVERRIDE_ARCH": "sm89"}, words(), None)
    assert problem.variable == "TRITON_OVERRIDE_ARCH" and "Remove TRITON_OVERRIDE_ARCH" in str(problem)


@pytest.mark.parametrize("env,args,where", [
    ({"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}, (), "VLLM_ATTENTION_BACKEND"),
    ({}, ("--attention-backend", "FLASHINFER"), "VLLM_EXTRA_ARGS --attention-backend"),
    ({}, ("--attention-backend=flashinfer",), "VLLM_EXTRA_ARGS --attention-backend"),
    ({}, ("--attention-config", '{"backend": "FLASH_ATTN"}'), "VLLM_EXTRA_ARGS --attention-config")])
def test_an_attention_backend_turing_lacks_is_refused(env, args, where):
    problem = turing_settings.settings_problem(env, words(*args), (7, 5))
    assert problem.variable == where and "8.0" in str(problem) and "TRITON_ATTN" in str(problem)


def test_the_same_backend_passes_on_ampere_and_triton_attn_everywhere():
    assert turing_settings.settings_problem({"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}, words(), (8, 6)) is None
    assert turing_settings.settings_problem({}, words("--attention-backend", "TRITON_ATTN"), (7, 5)) is None


def test_cli_exits_2_naming_the_variable(capsys):
    code = main(["print-command"], {"MODEL": "m", "TRITON_OVERRIDE_ARCH": "sm89"})
    assert code == 2 and "TRITON_OVERRIDE_ARCH" in capsys.readouterr().err


def quantization_result(config, *args):
    return turing_settings.check_quantization(config, words(*args), (7, 5), VLLM_033_MIN.get,
                                              turing_settings.deprecated_from(VLLM_033_VALUES.deprecated_quantization))


def test_quantization_above_the_device_fails_naming_where_it_came_from():
    result = quantization_result(parse_config({"quantization_config": {"quant_method": "modelopt"}}))
    assert result.status is Status.FAIL and "config.json" in result.message and "8.0" in result.message


def test_quantization_flag_and_unknown_method():
    result = quantization_result(None, "-q", "mxfp4")
    assert result.status is Status.FAIL and "--quantization" in result.fix
    unknown = quantization_result(None, "-q", "nope")
    assert unknown.status is Status.FAIL and "not a quantization method" in unknown.message
    assert quantization_result(parse_config({"quantization_config": {"quant_method": "awq"}})).status is Status.PASS
    assert quantization_result(None).status is Status.PASS


# 4. audio

GEMMA4_AUDIO = parse_config({"model_type": "gemma4", "audio_config": {"hidden_size": 1536}})


def audio_option_table() -> dict:
    """The two options of vLLM's server parser that say whether audio is asked for, as argparse
    options of the kinds vLLM uses (a JSON value; a boolean flag)."""
    import argparse

    from imagefacts.shape import option_table

    parser = argparse.ArgumentParser()
    parser.add_argument("--limit-mm-per-prompt")
    parser.add_argument("--language-model-only", action="store_true")
    parser.add_argument("--seed")
    return option_table(parser)


AUDIO_OPTION_TABLE = audio_option_table()


@pytest.mark.parametrize("words, requested", [
    ((), None),
    (("--seed", "4096"), None),
    (("--limit-mm-per-prompt", '{"image": 2}'), None),
    (("--limit-mm-per-prompt", '{"image": 2, "audio": 0}'), 0),
    (('--limit-mm-per-prompt={"audio": 1}',), 1),
    (("--limit_mm_per_prompt", '{"audio": {"count": 2, "length": 30}}'), 2),
    (("--limit-mm-per-prompt.audio", "0"), 0),
    (("--limit-mm-per-prompt.audio=3",), 3),
    (("--limit-mm-per-prompt", '{"audio": 1}', "--language-model-only"), 0),
])
def test_whether_audio_is_requested_is_read_from_the_servers_arguments(words, requested):
    """As the entrypoint's argv parser hands the words over (vLLM 0.33.0's option table)."""
    from entrypoint.argv import judge_extra

    extras = judge_extra(words, (), AUDIO_OPTION_TABLE)
    assert audio.requested_audio(extras.get("limit_mm_per_prompt"), bool(extras.get("language_model_only"))) \
        == requested


def test_an_audio_limit_that_is_not_json_is_left_to_vllm():
    assert audio.requested_audio("not json") is None and audio.requested_audio(None) is None


def test_an_audio_tower_fails_only_when_audio_is_requested_and_nothing_can_decode_it():
    requested = audio.judge_audio(GEMMA4_AUDIO, [], 1)
    assert requested.status is Status.FAIL and "--extras audio" in requested.fix
    assert '"audio": 0' in requested.fix and "no audio decoder" in requested.message
    unstated = audio.judge_audio(GEMMA4_AUDIO, [], None)
    assert unstated.status is Status.PASS and "--extras audio" in unstated.message
    assert audio.judge_audio(GEMMA4_AUDIO, [], 0).message.endswith("audio input is off")
    assert audio.judge_audio(GEMMA4_AUDIO, ["soundfile"], 1).status is Status.PASS
    assert audio.judge_audio(parse_config({"audio_config": None}), [], 1).message == "the model has no audio tower"


def test_torchcodec_decodes_only_with_ffmpegs_libraries():
    everything = lambda name: True  # noqa: E731
    assert audio.available_decoders(everything, lambda: True) == ["torchcodec", "soundfile", "av"]
    assert audio.available_decoders(everything, lambda: False) == ["soundfile", "av"]
    assert audio.available_decoders(lambda name: name == "torchcodec", lambda: False) == []


# 5. two CUDA stacks

CU13 = [("torch", "2.14.0"), ("nvidia-cuda-runtime", "13.0.96"), ("nvidia-nccl-cu13", "2.27.7")]


def test_one_cuda_stack_passes():
    assert judge_stack("torch", "2.14.0", "13.0", stack_wheels(CU13)).status is Status.PASS


def test_a_cuda_12_torch_pulled_into_the_cuda_13_image_fails_naming_each_stack():
    wheels = stack_wheels(CU13 + [("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia_nccl_cu12", "2.26.2")])
    result = judge_stack("torch", "2.9.1+cu128", "12.8", wheels)
    assert result.status is Status.FAIL and "two CUDA stacks" in result.message
    assert "nvidia-nccl-cu13" in result.message and "nvidia-cuda-runtime 13.0.96" in result.message
    assert "CUDA 13 wheels" in result.fix
