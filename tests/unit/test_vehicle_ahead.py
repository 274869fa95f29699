"""The serving tier's vehicle build started beside the image build (tooling/serving_stack.py
VehicleAhead): it waits for the OS image the two share, or for the image build's end, and reports a
failed build in one error. The commands here are small Python processes standing in for build.py."""
import subprocess
import sys

import pytest

from tooling.serving_stack import VehicleAhead


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_without_the_os_image_the_vehicle_build_starts_only_after_the_image_build_ended():
    image_build = subprocess.Popen(python("import sys; sys.stdin.read()"), stdin=subprocess.PIPE, text=True)
    # the vehicle command fails unless the image build's process is gone (reaped) when it runs
    ahead = VehicleAhead(lambda: False, image_build, python(
        f"import os, sys\ntry:\n    os.kill({image_build.pid}, 0)\nexcept ProcessLookupError:\n    sys.exit(0)\nsys.exit(5)"))
    image_build.communicate("")
    assert ahead.wait() >= 0


def test_with_the_os_image_there_it_starts_while_the_image_build_runs():
    image_build = subprocess.Popen(python("import sys; sys.stdin.read()"), stdin=subprocess.PIPE, text=True)
    try:
        ahead = VehicleAhead(lambda: True, image_build, python(
            f"import os\nos.kill({image_build.pid}, 0)"))  # fails if the image build were gone
        assert ahead.wait() >= 0
    finally:
        image_build.communicate("")


def test_a_failed_vehicle_build_is_one_error_naming_its_exit_and_last_words():
    image_build = subprocess.Popen(python("pass"))
    ahead = VehicleAhead(lambda: True, image_build, python("import sys; sys.exit('no space left on device')"))
    with pytest.raises(RuntimeError, match=r"build\.py vehicle .*exited 1: no space left on device"):
        ahead.wait()
    image_build.wait()
