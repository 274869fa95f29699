"""Installed versions from dist-info folder names: the same answers as importlib.metadata on this
host, the import order's first folder winning, and nothing guessed from a folder that is not one."""
import importlib.metadata
import sys

from contract import distributions


def test_it_agrees_with_importlib_metadata_on_this_hosts_packages():
    for name in ("requests", "PyYAML", "hypothesis", "docker", "pytest"):
        assert distributions.installed_version(name) == importlib.metadata.version(name), name


def plant(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).mkdir()
    return str(folder)


def test_the_first_folder_on_the_path_wins_and_names_are_normalized(tmp_path):
    first = plant(tmp_path / "a", "nvidia_cuda_runtime_cu12-12.8.90.dist-info", "vllm-0.33.0.dist-info")
    second = plant(tmp_path / "b", "vllm-0.32.0.dist-info", "Triton-3.8.0.dist-info", "not_a_dist-1.0.egg")
    path = [first, second, str(tmp_path / "missing")]
    assert distributions.installed(path) == [("nvidia-cuda-runtime-cu12", "12.8.90"), ("triton", "3.8.0"),
                                             ("vllm", "0.33.0")]
    assert distributions.installed_version("nvidia.cuda_runtime-CU12", path) == "12.8.90"
    assert distributions.installed_version("not-a-dist", path) is None


def test_two_versions_in_one_folder_are_no_answer(tmp_path):
    folder = tmp_path / "site"
    plant(folder, "vllm-0.32.0.dist-info", "vllm-0.33.0.dist-info", "dist-info-only.dist-info")
    assert distributions.version_in(folder, "vllm") is None
    assert distributions.version_in(tmp_path / "nowhere", "vllm") is None
    assert sys.path  # the default path is the import system's
