"""A build whose BuildKit session was lost after a long step is run once more; any other failure is not.
The docker CLI is a standin script on PATH (what BuildKit prints for a lost session cannot be provoked
on demand): it fails as BuildKit failed in a cold CI, then succeeds."""
import io
import os
import stat
from pathlib import Path

import pytest

from buildtool.docker import buildkit
from buildtool.docker.progress import ProgressView
from door.problem import Problem

STANDIN_DOCKER = """#!/bin/sh
# standin docker CLI: each call appends a line to $CALLS; fails with $FIRST_FAILURE on the first call
echo call >> "$CALLS"
calls=$(wc -l < "$CALLS")
if [ "$calls" -eq 1 ]; then
    echo "#10 [6/14] RUN --mount=type=secret,id=ca pip install extras"
    echo "#10 ERROR: $FIRST_FAILURE"
    echo "ERROR: failed to solve: $FIRST_FAILURE"
    exit 1
fi
while [ "$1" != "--iidfile" ]; do shift; done
echo "sha256:standin" > "$2"
"""


@pytest.fixture
def standin_docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(STANDIN_DOCKER)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CALLS", str(tmp_path / "calls"))
    return tmp_path / "calls"


def request(tmp_path: Path) -> buildkit.BuildRequest:
    return buildkit.BuildRequest(context=tmp_path, dockerfile=tmp_path / "Dockerfile", tag="vllm-turing:test")


def test_a_lost_session_is_built_once_more_and_says_why(standin_docker, tmp_path, monkeypatch):
    monkeypatch.setenv("FIRST_FAILURE", "no active session for pqa0eslmos3qzp50g9t1tulhs: context deadline exceeded")
    shown = io.StringIO()
    assert buildkit.build(request(tmp_path), ProgressView(shown, live=False)) == "sha256:standin"
    assert len(standin_docker.read_text().splitlines()) == 2
    assert "BuildKit lost its session with the client" in shown.getvalue() and "from the cache" in shown.getvalue()


def test_any_other_failure_is_not_built_again(standin_docker, tmp_path, monkeypatch):
    monkeypatch.setenv("FIRST_FAILURE", "process did not complete successfully: exit code: 2")
    with pytest.raises(Problem, match="exit code: 2"):
        buildkit.build(request(tmp_path), ProgressView(io.StringIO(), live=False))
    assert len(standin_docker.read_text().splitlines()) == 1
