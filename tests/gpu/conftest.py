"""GPU tier: every test here needs a CUDA device and is skipped with the reason "no GPU"
where torch is absent or sees none. tests/gpu/run-on-device runs the tier on the GPU machine."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPORT_ENV = "VLLM_TURING_GPU_REPORT"  # a folder: the tier writes numerics.json there


def gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_runtest_setup(item):
    if not gpu_available():
        pytest.skip("no GPU")


@pytest.fixture(scope="session")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gpu-tier")


@pytest.fixture(scope="session")
def vllm_site(scratch) -> Path:
    from tooling.gpu_site import ensure_site

    return ensure_site(scratch)


@pytest.fixture(scope="session")
def fit_table(vllm_site, scratch) -> Path:
    from tooling.gpu_site import ensure_fit_table

    return ensure_fit_table(vllm_site, scratch)


@pytest.fixture(scope="session")
def ampere(vllm_site, scratch):
    """{dtype: the runs on the Ampere-lowered proxy in that dtype} (tests/gpu/ampere_proxy.py): in fp16
    every case of the unified kernel, in bf16 the Gemma 4 cases (those the bf16 ranking was timed on), both
    with the encoder heads; all started in the background at the first request."""
    from tests.gpu.ampere_proxy import AmpereRuns
    from tooling.attention_cases import ALL_CASE_NAMES, CASE_NAMES
    from tooling.encoder_attention_run import HEADS

    runs = {"float16": AmpereRuns(vllm_site, scratch, "float16", ALL_CASE_NAMES, HEADS),
            "bfloat16": AmpereRuns(vllm_site, scratch, "bfloat16", CASE_NAMES, HEADS)}
    yield runs
    for dtype_runs in runs.values():
        dtype_runs.close()


@pytest.fixture(scope="session")
def figures():
    """Figures the tests measured, written to $VLLM_TURING_GPU_REPORT/numerics.json at the end."""
    collected: dict = {}
    yield collected
    folder = os.environ.get(REPORT_ENV)
    if folder and collected:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "numerics.json").write_text(json.dumps(collected, indent=2, sort_keys=True))
