"""The hostile harness, unit tier: every registered surface (tests/support/hostile/registry.py) driven
with every hostile file kind it takes, and with Hypothesis over words and file contents; one
invariant set judges them all. A build.py subcommand or a reader of outside data that no surface
drives fails here, so a new surface is hostile-tested the day it lands.

Each trial is a real process (build.py, the entrypoint, a bench script) in a folder of its own,
measured from outside (tests/support/hostile/drive.py). The surfaces of helpers still fixing them
(registry `owner`) fail some cases until their branches merge: those failures are findings, not
flakes, and the invariants are not bent for them."""
from __future__ import annotations

import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import build
from tests.support import door_scan
from tests.support.hostile import drive, registry
from tests.support.hostile.drive import Outcome
from tests.support.hostile import peer
from tests.support.slack import SCHEDULING_SLACK_S

UNIT_SURFACES = [s for s in registry.SURFACES if s.tier == "unit" and s.kinds != registry.PEER_KINDS]
TRIALS_AT_ONCE = 3  # processes of one surface run side by side: each mostly waits on its imports

def run_trial(surface, kind, folder: Path, good_units: Path | None = None) -> list[str]:
    trial = surface.trial(folder, kind)
    if trial.target is not None and good_units is not None:
        shutil.copytree(good_units, trial.target, symlinks=True)  # the previous good state
    kill_after = surface.deadline_s + SCHEDULING_SLACK_S + 5
    return registry.attempt(surface, kind, folder, trial, lambda a, e, c: drive.run(a, e, c, kill_after))


@pytest.fixture(scope="module")
def good_units(tmp_path_factory) -> dict[str, Path]:
    """The units a good env file writes (with and without --monitoring), made once: each trial
    starts from a byte-identical copy."""
    made = {}
    for extra in ((), ("--monitoring",)):
        folder = tmp_path_factory.mktemp("good-units")
        argv = registry.units_good_state(folder, *extra)
        done = drive.run(argv, registry._env(folder), folder)
        assert done.returncode == 0, done.stderr
        made[" ".join(extra)] = folder / "out"
    return made


@pytest.fixture(scope="module")
def repo_state():
    """Nothing a surface does may touch the checkout (its tracked and untracked files)."""
    before = _git_status()
    yield
    assert _git_status() == before, "a surface wrote into the repository"


def _git_status() -> str:
    """The checkout's changed and new files; the compile records aside (the image tier's background
    build may rewrite one while this module runs)."""
    import subprocess
    return subprocess.run(["git", "-C", str(drive.REPO), "status", "--porcelain", "--untracked-files=all", "--", ".",
                           ":!contract/compile-records"], capture_output=True, text=True, check=True).stdout


# --- registration --------------------------------------------------------------------------------

def test_every_build_py_subcommand_is_registered():
    missing = set(build.SUBCOMMANDS) - registry.registered_commands()
    assert not missing, f"build.py subcommands no hostile surface drives: {sorted(missing)}"


def test_every_reader_of_outside_data_is_registered():
    readers = door_scan.outside_readers()
    missing = sorted(set(readers) - registry.registered_readers())
    assert not missing, ("modules that read outside data through the door but no hostile surface drives "
                         f"(register them in tests/support/hostile/registry.py): {missing}")


def test_an_unregistered_reader_is_caught(tmp_path):
    shutil.copy(drive.REPO / "build.py", tmp_path / "build.py")
    (tmp_path / "buildtool").mkdir()
    (tmp_path / "buildtool" / "new_surface.py").write_text(
        "from door import files\n\ndef run(args):\n    return files.read_object(args.database, '--database')\n")
    assert set(door_scan.outside_readers(tmp_path)) - registry.registered_readers() == {"buildtool/new_surface.py"}


# --- the judge can fail --------------------------------------------------------------------------

def _outcome(code, stderr="", stdout="", wall=1.0, rss=10 * registry.MiB, survivors=False):
    return Outcome(["x"], code, stdout, stderr, wall, rss, survivors)


JUDGED = registry.Surface("judged", "x", (), (), None, deadline_s=5.0, memory_cap_bytes=100 * registry.MiB)


def test_a_report_surface_is_judged_by_its_report_line():
    trial = registry.Trial(["x"], {}, Path("."), ("http://",), report=r"NOT READY\b")
    good = _outcome(1, stdout="smoke test of http://h\nNOT READY: 403; set $OPENAI_API_KEY\n")
    assert registry.violations(JUDGED, "x", trial, good, {}, {}, {}, {}, []) == []
    for bad, says in ((_outcome(2, "x; give y\n"), "expected exit 1"),
                      (_outcome(1, stdout="smoke test of h\nNOT READY: 403; set it\n"), "names none"),
                      (_outcome(1, stdout="smoke test of http://h\nNOT READY: 403\n"), "no fix")):
        assert any(says in line for line in registry.violations(JUDGED, "x", trial, bad, {}, {}, {}, {}, [])), says


@pytest.mark.parametrize("outcome, says", [
    (_outcome(None, wall=99), "hang"),
    (_outcome(1, "Traceback (most recent call last):\n  File x\nValueError: y\n"), "traceback"),
    (_outcome(0), "expected 2"),
    (_outcome(2, "--env-file x: bad\nmore\n"), "expected one"),
    (_outcome(2, "something went wrong; give another\n"), "names none"),
    (_outcome(2, "--env-file x is a FIFO\n"), "no fix"),
    (_outcome(2, "--env-file x: bad; give a file\n", wall=5 + SCHEDULING_SLACK_S + 1), "took"),
    (_outcome(2, "--env-file x: bad; give a file\n", rss=200 * registry.MiB), "peak memory"),
    (_outcome(2, f"--env-file x: bad {registry.SECRET}; give a file\n"), "secret in its output"),
    (_outcome(2, "--env-file x: bad; give a file\n", survivors=True), "outlived"),
])
def test_each_invariant_fails_what_it_states(outcome, says):
    trial = registry.Trial(["x"], {}, Path("."), ("--env-file",))
    found = registry.violations(JUDGED, "fifo", trial, outcome, {}, {}, {}, {}, [])
    assert any(says in line for line in found), found


def test_the_state_checks_and_the_secret_search_find_what_is_planted(tmp_path):
    trial = registry.Trial(["x"], {}, tmp_path, ("--env-file",))
    refusal = _outcome(2, "--env-file x: bad; give a file\n")
    assert registry.violations(JUDGED, "fifo", trial, refusal, {}, {}, {}, {}, []) == []
    (tmp_path / "written").write_text(f"token={registry.SECRET}\n")
    written = registry.written_secrets(tmp_path)
    assert written == [f"written: {registry.SECRET}"]
    found = registry.violations(JUDGED, "fifo", trial, refusal, {"a": "1"}, {"a": "2"}, {"u": "1"}, {"u": "2"}, written)
    assert [line.split(":")[0] for line in found] == ["a planted secret in a written file", "wrote outside its target",
                                                      "the previous good state changed on failure"]


def test_the_driver_measures_a_hang_a_survivor_and_memory(tmp_path):
    hang = drive.run([sys.executable, "-c", "import time; time.sleep(60)"], {}, tmp_path, kill_after_s=1)
    assert hang.returncode is None
    left = drive.run(["sh", "-c", "sleep 30 & echo started"], {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert left.returncode == 0 and left.survivors
    big = drive.run([sys.executable, "-c", "x = bytearray(300 * 2**20)"], {}, tmp_path)
    assert big.returncode == 0 and big.peak_rss_bytes > 300 * registry.MiB
    endless = drive.run([sys.executable, "-c", "open('/dev/zero', 'rb').read()"], {}, tmp_path)
    assert endless.returncode == 1 and "MemoryError" in endless.stderr


# --- every registered surface, every hostile file kind -----------------------------------------------

@pytest.mark.parametrize("surface", UNIT_SURFACES, ids=[s.name for s in UNIT_SURFACES])
def test_every_hostile_file_is_refused_in_one_line_within_bounds(surface, tmp_path, good_units, repo_state):
    good = good_units.get("--monitoring" if "--monitoring" in surface.name else "") if surface.command == "units" \
        else None

    def one(kind):
        folder = tmp_path / kind
        folder.mkdir()
        return kind, run_trial(surface, kind, folder, good)

    with ThreadPoolExecutor(TRIALS_AT_ONCE) as pool:
        found = {kind: lines for kind, lines in pool.map(one, surface.kinds) if lines}
    assert not found, f"{surface.name}" + (f" ({surface.owner}'s area)" if surface.owner else "") + ":\n" + \
        "\n".join(f"  {kind}: {line}" for kind, lines in found.items() for line in lines)


# --- the image's fetch against a hostile Hub -----------------------------------------------------

PEER = {  # the fetch helper's hostile peer (tests/support/hostile/peer.py), one fault on every route
    "stall-after-headers": peer.stall_after_headers(),
    "huge-content-length": peer.lying_length(b"{}" + b" " * 2046),
    "auth-echo-403": peer.echo_authorization(403),
    "endless-body": peer.huge_body(),
}


PEER_SURFACES = [s for s in registry.SURFACES if s.kinds == registry.PEER_KINDS]


def against_peer(surface, folder: Path, kind: str) -> tuple[str, list[str]]:
    """One of PEER's faults against `surface`'s trial, on a peer of its own."""
    with peer.HostilePeer().route("/", PEER[kind]) as server:
        trial = surface.trial(folder, kind)
        registry.PEER_URL[surface.name](trial, server.url)
        kill_after = surface.deadline_s + SCHEDULING_SLACK_S + 5
        return kind, registry.attempt(surface, kind, folder, trial, lambda a, e, c: drive.run(a, e, c, kill_after))


@pytest.fixture(scope="module")
def peer_trials(tmp_path_factory):
    """Every peer surface's every fault, started side by side once: most of them wait out a deadline
    (a stall is judged when the surface gives up), so the waits overlap instead of adding up."""
    with ThreadPoolExecutor(len(PEER_SURFACES) * len(PEER)) as pool:
        yield {surface.name: [pool.submit(against_peer, surface, tmp_path_factory.mktemp("peer"), kind)
                              for kind in sorted(PEER)] for surface in PEER_SURFACES}


@pytest.mark.parametrize("surface", PEER_SURFACES, ids=lambda s: s.name)
def test_a_remote_read_holds_against_the_hostile_peer(surface, peer_trials, repo_state):
    found = {kind: lines for kind, lines in (trial.result() for trial in peer_trials[surface.name]) if lines}
    assert not found, f"{surface.name} ({surface.owner}'s area):\n" + "\n".join(
        f"  {kind}: {line}" for kind, lines in found.items() for line in lines)


# --- Hypothesis: words and contents ----------------------------------------------------------------

@settings(max_examples=12)
@given(words=registry.ARGV_WORDS)
def test_entrypoint_argv_words_are_judged_in_one_line(tmp_path_factory, words):
    folder = tmp_path_factory.mktemp("argv")
    env = registry._env(folder, MODEL=str(registry._model(folder)), VLLM_EXTRA_ARGS=" ".join(words).replace("\x00", ""))
    done = drive.run(drive.python("-m", "entrypoint", "print-command"), env, folder)
    _judge_words(done, ("VLLM_EXTRA_ARGS",))


ENV_VALUES = st.one_of(st.sampled_from(['"chat #1"', "chat\\nVLLM_EXTRA_ARGS=--trust-remote-code", "a b",
                                        "'quoted'", "x=y", "\u00e9t\u00e9", "--model", "$HOME", "\\"]),
                       st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30))


@settings(max_examples=8)
@given(name=ENV_VALUES, extra=ENV_VALUES)
def test_units_env_values_are_written_or_refused_in_one_line(tmp_path_factory, name, extra):
    folder = tmp_path_factory.mktemp("envvalues")
    env_file = folder / "chat.env"
    env_file.write_text(f"MODEL=/models/chat\nSERVED_MODEL_NAME={name}\nVLLM_EXTRA_ARGS={extra}\n", encoding="utf-8")
    done = drive.run(drive.python(str(drive.REPO / "build.py"), "units", "--defaults", "--env-file", str(env_file),
                                  "--out", str(folder / "out")), registry._env(folder), folder)
    _judge_words(done, ("--env-file", "chat.env", "SERVED_MODEL_NAME", "VLLM_EXTRA_ARGS"))


FLAG_WORDS = st.one_of(registry.LOOKALIKE, st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60))


WORD_FLAGS = [("build", "--tag"), ("build", "--base"), ("build", "--extras"), ("build", "--vllm-version"),
              ("build", "--os-image"), ("build", "--base-tag"), ("model fetch", ""), ("verify", "")]


@settings(max_examples=12)
@given(where=st.sampled_from(WORD_FLAGS), word=FLAG_WORDS)
def test_build_word_flags_parse_or_refuse_in_one_line(tmp_path_factory, where, word):
    """A flag's word (or `model fetch REPO`'s, `verify IMAGE`'s) parsed as build.py parses it."""
    folder = tmp_path_factory.mktemp("flags")
    command, flag = where
    word = word.replace("\x00", "")
    argv = [*command.split(), *([flag, word] if flag else ["--", word])]
    done = drive.run(registry._parse_only(*argv), registry._env(folder), folder)
    _judge_words(done, (flag or command.split()[-1], "argument", "REPO", "IMAGE"))


def _judge_words(done: Outcome, names: tuple[str, ...]) -> None:
    """A word is accepted (exit 0) or refused in one line naming where it came from; never a
    traceback, never a secret, within bounds."""
    trial = registry.Trial(done.argv, {}, Path("."), names, accept_ok=True)
    found = registry.violations(registry.Surface("words", "x", (), (), None), "word", trial, done,
                                {}, {}, {}, {}, [])
    assert not found, f"{done.argv[-4:]}: " + "; ".join(found)
