"""Every benchmark script under bench/ starts: its imports resolve and `--help` answers (a renamed
module once left bench/preflight_gpu failing at its first line, found only on the GPU machine)."""
import subprocess
import sys

import pytest
from tests import REPO

SCRIPTS = sorted(path.name for path in (REPO / "bench").iterdir() if path.is_file() and path.stat().st_mode & 0o111)


def test_the_bench_folder_has_its_scripts():
    assert {"preflight", "preflight_gpu", "clamp_gpu", "warm_start"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_bench_script_answers_help(script):
    done = subprocess.run([sys.executable, str(REPO / "bench" / script), "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "usage" in done.stdout.lower(), done.stderr[-1000:]


@pytest.mark.parametrize("probe, argv", [("tooling.probes.ssm.probe", ["[]", "{}"]),
                                         ("tooling.probes.gdn.probe", ["[]", "{}", "[]"])])
def test_each_kernel_probe_runs_as_its_container_runs_it(probe, argv):
    """`python3 -m PROBE` from the checkout's root with it on PYTHONPATH (tooling/probes/container.py):
    with no family and no device it records nothing and prints nothing."""
    done = subprocess.run([sys.executable, "-m", probe, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout == "", done.stderr[-1000:]
