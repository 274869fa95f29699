"""torch, clamp and fit checks. torch is judged from what a real torch reports (its version
string, CUDA version, arch list); the image tier runs the import against the image's real torch.
The clamp and fit checks call patches/ and report its absence as a failure with a fix."""
import json

import pytest

from contract.verdict import Status
from entrypoint.checks.clamp import check_clamp, judge_fit, start_fit
from entrypoint.checks.torch_runtime import check_torch, judge_torch
from tests import REPO

ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


def test_cpu_build_of_torch_fails():
    result = judge_torch("2.14.0+cpu", None, [], "sm_75", False, None)
    assert result.status is Status.FAIL and "CPU build" in result.message and "nvidia-*" in result.fix


def test_torch_without_the_device_arch_fails():
    result = judge_torch("2.14.0+cu130", "13.0", ["sm_80", "sm_90"], "sm_75", True, None)
    assert result.status is Status.FAIL and "sm_75" in result.message and "sm_75" in result.fix


def test_torch_without_a_visible_device_fails():
    result = judge_torch("2.14.0+cu130", "13.0", ARCHS, "sm_75", False, None)
    assert result.status is Status.FAIL and "sees no CUDA device" in result.message


def test_failed_matmul_fails_and_a_good_torch_passes():
    assert judge_torch("2.14.0+cu130", "13.0", ARCHS, "sm_75", True, "RuntimeError: no kernel").status is Status.FAIL
    assert judge_torch("2.14.0+cu130", "13.0", ARCHS, "sm_75", True, None).status is Status.PASS


def test_torch_that_does_not_import_fails_with_the_reinstall_fix(tmp_path, monkeypatch):
    # The failure of a CUDA torch installed without its NVIDIA wheels: at import it loads libcudart
    # from site-packages/nvidia/cu13/lib, which is not there.
    missing = tmp_path / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    (tmp_path / "standin_torch_without_nvidia_libs.py").write_text(f"import ctypes\nctypes.CDLL({str(missing)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = check_torch((7, 5), module="standin_torch_without_nvidia_libs")
    assert result.status is Status.FAIL and "libcudart.so.13" in result.message
    assert "nvidia-* dependency wheels" in result.fix


def test_clamp_module_absent_fails_with_the_rebuild_fix():
    result = check_clamp(module="patches.no_such_clamp")
    assert result.status is Status.FAIL and "build.py" in result.fix


@pytest.mark.parametrize("module", ["patches.no_such_fitcheck", "no_such_patches.fitcheck"])
def test_fit_check_absent_fails_with_the_rebuild_fix(tmp_path, module):
    (tmp_path / "config.json").write_text("{}")
    result = start_fit(str(tmp_path / "config.json"), {}, (7, 5), 65536, module=module)()
    assert result.status is Status.FAIL and f"{module} is not installed" in result.message
    assert "build.py" in result.fix


def fit_report(shared_by_tile):
    launches = [{"model": "config", "layer": "global", "head_size": 512, "path": "2d", "tile_size": tile,
                 "shared": shared, "limit": 65536, "fits": shared <= 65536} for tile, shared in shared_by_tile]
    return json.dumps({"launches": launches, "all_fit": all(l["fits"] for l in launches),
                       "max_shared": max(shared for _, shared in shared_by_tile)})


def test_fit_report_all_fitting_passes():
    result = judge_fit(0, fit_report([(16, 65536), (32, 49152)]), "", (7, 5), 65536)
    assert result.status is Status.PASS and "2 Triton launches" in result.message


def test_fit_report_with_a_launch_over_the_limit_names_it():
    result = judge_fit(1, fit_report([(32, 98304), (32, 49152)]), "", (7, 5), 65536)
    assert result.status is Status.FAIL and "head 512" in result.message and "98304" in result.message


@pytest.mark.parametrize("code,stdout,stderr", [(2, "", "fitcheck: --model-config x.json: no such file"),
                                                (1, "not json", "Traceback ...\nOutOfResources")])
def test_fit_check_without_a_report_fails_with_its_last_words(code, stdout, stderr):
    result = judge_fit(code, stdout, stderr, (7, 5), 65536)
    assert result.status is Status.FAIL and stderr.splitlines()[-1] in result.message


def test_the_fit_check_is_found_as_a_module_and_its_code_root_is_the_repository():

    from entrypoint.checks.clamp import code_root
    assert code_root("patches.fitcheck") == str(REPO)
    assert code_root("patches.fitcheck.proof") == str(REPO)


def test_the_fit_table_is_found_under_its_new_name_then_its_old_one(monkeypatch):
    from contract import layout
    from entrypoint.checks.clamp import _env

    old = next(o for o, new in layout.DEPRECATED_ENV_NAMES.items() if new == layout.ENV_FIT_TABLE)
    monkeypatch.delenv(layout.ENV_FIT_TABLE, raising=False)
    monkeypatch.setenv(old, "/old/fit-table.json")
    assert _env(layout.ENV_FIT_TABLE) == "/old/fit-table.json"
    monkeypatch.setenv(layout.ENV_FIT_TABLE, "/new/fit-table.json")
    assert _env(layout.ENV_FIT_TABLE) == "/new/fit-table.json"
