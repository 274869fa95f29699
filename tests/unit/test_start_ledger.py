"""The start ledger and the self-healing compile cache (entrypoint/start_ledger.py): the pure
decision over typed values, the ELF integrity check on a real shared object built with gcc and then
cut, and the effects on real folders."""
import fcntl
import json
import logging
import os
import subprocess

import pytest
from hypothesis import example, given, strategies as st

from contract.layout import CACHE_STAMP_NAME, START_LEDGER_NAME
from entrypoint import start_ledger, start_report
from entrypoint.start_ledger import ASIDE_DIR, CacheFindings, Damage, Last

NOW = 1_796_000_000.0


@pytest.fixture(scope="module")
def real_so(tmp_path_factory) -> bytes:
    """A real shared object, as Triton builds its launcher stubs (gcc -shared)."""
    folder = tmp_path_factory.mktemp("elf")
    (folder / "main.c").write_text("int launch(int x) { return x + 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "main.so"), str(folder / "main.c")], check=True)
    return (folder / "main.so").read_bytes()


def problem_of(content: bytes) -> str:
    return start_ledger.elf_problem(len(content), content[:64])


def test_a_whole_shared_object_passes_and_a_cut_empty_or_foreign_one_does_not(real_so):
    assert problem_of(real_so) == ""
    assert problem_of(b"") == "empty"
    assert problem_of(b"#!/bin/sh\n" * 10).startswith("not an ELF")
    assert problem_of(real_so[:len(real_so) // 2]).startswith("truncated")
    assert problem_of(real_so[:20]).startswith("truncated")


def test_every_cut_of_a_real_shared_object_is_found(real_so):
    # gcc writes the section header table last: any cut shortens it.
    for length in range(0, len(real_so), max(len(real_so) // 200, 1)):
        assert problem_of(real_so[:length]), length
    assert problem_of(real_so[:-1])


@given(st.binary(max_size=128), st.integers(0, 2**64))
@example(b"\x7fELF\x02\x01" + b"\0" * 58, 64)  # a 64-bit header of zeros: no tables, nothing to cut
@example(b"\x7fELF\x09\x01" + b"\0" * 10, 16)  # an unknown class
@example(b"\x7fE", 2)  # a file cut inside the magic
def test_any_bytes_get_an_answer_without_raising(header, size):
    assert isinstance(start_ledger.elf_problem(size, header), str)


def findings(setting="VLLM_CACHE_ROOT", entries=True, damage=(), ledger=True):
    return CacheFindings(setting, "/cache/vllm" if ledger else "/cache/triton", entries, tuple(damage), ledger)


def test_a_start_that_died_before_healthy_heals_the_ledgers_cache_only():
    heals = start_ledger.decide(Last("started", NOW), False, [findings(), findings("TRITON_CACHE_DIR", ledger=False)])
    assert [heal.setting for heal in heals] == ["VLLM_CACHE_ROOT"]
    assert "died before it became healthy" in heals[0].reason and "2026" in heals[0].reason


@pytest.mark.parametrize("last", [Last("healthy", NOW), Last("none"), Last("unreadable")])
def test_a_healthy_unknown_or_first_start_heals_nothing(last):
    assert start_ledger.decide(last, False, [findings(), findings("TRITON_CACHE_DIR", ledger=False)]) == []


def test_an_empty_cache_of_a_dead_start_is_left_as_it_is():
    assert start_ledger.decide(Last("started", NOW), False, [findings(entries=False)]) == []


def test_damage_heals_its_cache_whatever_the_ledger_says_and_names_the_files():
    damage = [Damage(f"/cache/triton/k{i}/main.so", "empty") for i in range(5)]
    heals = start_ledger.decide(Last("healthy", NOW), False, [findings(), findings("TRITON_CACHE_DIR", damage=damage,
                                                                                   ledger=False)])
    assert [heal.setting for heal in heals] == ["TRITON_CACHE_DIR"]
    assert "k0/main.so (empty)" in heals[0].reason and "and 2 more" in heals[0].reason


def test_a_cache_another_server_holds_is_never_moved():
    damaged = findings(damage=[Damage("/cache/vllm/a.so", "empty")])
    assert start_ledger.decide(Last("started", NOW), True, [damaged]) == []


@given(st.lists(st.from_regex(r"20[0-9]{6}T[0-9]{6}Z(-[2-9])?", fullmatch=True), unique=True, max_size=8),
       st.integers(0, 4))
def test_only_the_oldest_asides_beyond_the_kept_count_are_deleted(names, keep):
    deleted = start_ledger.to_delete(names, keep)
    assert len(names) - len(deleted) == min(len(names), keep)
    assert all(old < new for old in deleted for new in set(names) - set(deleted))


# --- effects, on real folders ---------------------------------------------------------------------

def cache_with(root, real_so, cut=False):
    kernel = root / "torch_compile_cache" / "abc" / "inductor"
    kernel.mkdir(parents=True)
    (kernel / "main.so").write_bytes(real_so[:100] if cut else real_so)
    (root / CACHE_STAMP_NAME).write_text("{}")
    return kernel / "main.so"


def start(tmp_path, lines, now=NOW):
    """One start's ledger work, as the entrypoint does it; the ledger's descriptor closed after (the
    server's exit)."""
    path = start_ledger.prepare(str(tmp_path / "vllm"), str(tmp_path / "triton"), now, lines.append)
    return path


def close_inherited(path):
    """Ends the 'server' that holds the ledger: closes every descriptor of this process on it."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == path:
                os.close(int(fd))
        except OSError:
            continue


def test_a_dead_start_moves_the_cache_aside_and_a_healthy_one_keeps_it(tmp_path, real_so):
    root = tmp_path / "vllm"
    root.mkdir()
    cache_with(root, real_so)
    lines = []
    ledger = start(tmp_path, lines)
    assert lines == [] and json.loads(open(ledger).read())["state"] == "started"
    close_inherited(ledger)  # the server died before it was ready
    ledger = start(tmp_path, lines, NOW + 60)
    assert len(lines) == 1 and lines[0].startswith("vllm-turing: cache healed: VLLM_CACHE_ROOT")
    assert "died before it became healthy" in lines[0]
    assert sorted(p.name for p in root.iterdir()) == sorted([ASIDE_DIR, CACHE_STAMP_NAME, START_LEDGER_NAME])
    [aside] = (root / ASIDE_DIR).iterdir()
    assert aside.name == "20261130T005420Z" and (aside / "torch_compile_cache" / "abc").is_dir()
    assert aside.as_posix() in lines[0]
    # this start becomes healthy (the start report marks it); the next one keeps what it compiled
    (root / "torch_compile_cache").mkdir()
    start_report.mark_ledger(ledger)
    close_inherited(ledger)
    lines.clear()
    start(tmp_path, lines, NOW + 120)
    assert lines == [] and (root / "torch_compile_cache").is_dir()


def test_a_cut_so_in_the_triton_cache_is_moved_aside_and_at_most_two_asides_are_kept(tmp_path, real_so):
    triton = tmp_path / "triton"
    triton.mkdir()
    for attempt in range(4):
        (triton / "k" / "x").mkdir(parents=True, exist_ok=True)
        (triton / "k" / "x" / "main.so").write_bytes(real_so[:len(real_so) - 1])
        lines = []
        ledger = start(tmp_path, lines, NOW + attempt)
        start_report.mark_ledger(ledger)
        close_inherited(ledger)
        assert len(lines) == 1 and "TRITON_CACHE_DIR" in lines[0] and "k/x/main.so (truncated" in lines[0], lines
        assert not (triton / "k").exists()
    assert len(list((triton / ASIDE_DIR).iterdir())) == start_ledger.KEEP_ASIDE


def test_a_whole_cache_of_a_healthy_start_is_left_alone(tmp_path, real_so):
    root = tmp_path / "vllm"
    root.mkdir()
    cache_with(root, real_so)
    lines = []
    start_report.mark_ledger(start(tmp_path, lines))
    close_inherited(str(root / START_LEDGER_NAME))
    start(tmp_path, lines)
    assert lines == [] and (root / "torch_compile_cache").is_dir()
    close_inherited(str(root / START_LEDGER_NAME))


def test_a_ledger_another_live_server_holds_leaves_its_caches_alone(tmp_path, real_so):
    root = tmp_path / "vllm"
    root.mkdir()
    cut = cache_with(root, real_so, cut=True)
    holder = os.open(root / START_LEDGER_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        lines = []
        assert start(tmp_path, lines) is None
        assert len(lines) == 1 and "another server holds" in lines[0] and cut.exists()
    finally:
        os.close(holder)


def test_a_cache_root_that_cannot_hold_a_ledger_still_heals_nothing_and_starts(tmp_path):
    (tmp_path / "vllm").write_text("not a folder")
    lines = []
    assert start(tmp_path, lines) is None and lines == []


def test_the_ready_line_marks_the_ledger_healthy(tmp_path, capsys):
    ledger = tmp_path / START_LEDGER_NAME
    ledger.write_bytes(start_ledger.ledger_text("started", NOW))
    state = json.loads(start_report.exec_env(1.0, ledger=str(ledger))[start_report.START_ENV])
    recorder = start_report.PhaseRecorder({**state, "phases_file": str(tmp_path / "phases"), "server_pid": os.getpid()},
                                          logging.getLogRecordFactory())
    recorder("vllm.entrypoints", logging.INFO, __file__, 1, "Starting vLLM API server 0 on http://0.0.0.0:8000", (),
             None)
    assert start_ledger.parse_ledger(ledger.read_bytes()) == Last("healthy", NOW)
    assert "vllm-turing: started in" in capsys.readouterr().out


def test_the_exec_d_server_holds_the_ledger_locked_and_the_next_start_sees_its_death(tmp_path, real_so):
    """The real entrypoint execs a stand-in server (it cannot start vLLM on CPU here): the server
    finds the ledger locked by its own inherited descriptor; it dies without the ready line, so the
    next start moves the compile cache aside."""
    from tests.support.entrypoint_cli import REPO, run_entrypoint
    from tests.support.model_files import write_model_dir
    from tests.support.standin_vllm import write_standin_vllm
    from tooling.serving_stack import free_port
    import sys

    write_model_dir(tmp_path / "model")
    root = tmp_path / "vllm"
    probe = ("import fcntl, os; fd = os.open(os.path.join(os.environ['VLLM_CACHE_ROOT'], "
             f"'{START_LEDGER_NAME}'), os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('ledger free')\n"
             "except OSError:\n    print('ledger held')\n")
    standin = write_standin_vllm(tmp_path / "standin", probe)
    env = {"MODEL": str(tmp_path / "model"), "SKIP_CHECKS": "devices,driver,torch,clamp,fit", "VLLM_CACHE_ROOT": str(root),
           "TRITON_CACHE_DIR": str(tmp_path / "triton"), "HF_HOME": str(tmp_path / "hf"), "PORT": str(free_port()),
           "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "PYTHONPATH": f"{standin}:{REPO}"}
    done = run_entrypoint(env)
    assert done.returncode == 0 and "ledger held" in done.stdout, done.stdout + done.stderr
    cache_with(root, real_so)
    done = run_entrypoint(env)
    assert "vllm-turing: cache healed: VLLM_CACHE_ROOT" in done.stderr and "died before it became healthy" in done.stderr
    assert not (root / "torch_compile_cache").exists() and (root / CACHE_STAMP_NAME).exists()


def test_a_triton_cache_inside_the_vllm_cache_is_scanned_once_and_moved_with_it(tmp_path, real_so):
    root = tmp_path / "vllm"
    (root / "triton" / "k").mkdir(parents=True)
    (root / "triton" / "k" / "main.so").write_bytes(b"")
    lines = []
    ledger = start_ledger.prepare(str(root), str(root / "triton"), NOW, lines.append)
    close_inherited(ledger)
    assert len(lines) == 1 and "VLLM_CACHE_ROOT" in lines[0] and "triton/k/main.so (empty)" in lines[0], lines
    assert not (root / "triton").exists() and (root / START_LEDGER_NAME).exists()
