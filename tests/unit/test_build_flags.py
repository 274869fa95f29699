"""Generated values for every flag of build.py's subcommands: whatever the text, the command line
ends in a typed value or in one line that names the flag (exit 2), within bounded time and memory,
before any work. Accepted `units` values then render, or are refused in one line: never a traceback."""
from __future__ import annotations

import argparse
import contextlib
import io
import ipaddress
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from buildtool import flags
from door.problem import UsageError
from tests.support.build_py import build_py
from tests.support.slack import SCHEDULING_SLACK_S
from tests import REPO

# (subcommand, flag, what an accepted value is)
FLAGS = [
    ("build", "--base", str), ("build", "--tag", flags.ImageRef), ("build", "--vllm-version", str),
    ("build", "--base-tag", flags.ImageRef), ("build", "--os-image", flags.ImageRef), ("build", "--ca-cert", Path),
    ("build", "--extras", str),
    ("base", "--vllm-version", str), ("base", "--os-image", flags.ImageRef), ("base", "--base-tag", flags.ImageRef),
    ("base", "--ca-cert", Path),
    ("vehicle", "--tag", flags.ImageRef), ("vehicle", "--base-tag", flags.ImageRef),
    ("vehicle", "--os-image", flags.ImageRef), ("vehicle", "--ca-cert", Path),
    ("verify", "image", str),
    ("units", "--out", Path), ("units", "--gpus", list), ("units", "--env-file", list), ("units", "--lib-dir", str),
    ("units", "--model-dir", str), ("units", "--image", flags.ImageRef),
    ("units", "--bind", (ipaddress.IPv4Address, ipaddress.IPv6Address)), ("units", "--port", list),
    ("units", "--api-key-file", str), ("units", "--replicas", int), ("units", "--weights-gib", float),
    ("units", "--weights-from", Path), ("units", "--model-volume", str), ("units", "--model-claim", str),
    ("units", "--runtime-class", str), ("units", "--node-selector", list),
]
# What the flags are fed: any text (line breaks, control characters, every script's digits), and
# the kinds that broke flags before: long digit strings, non-ASCII digits, separators.
values = st.one_of(
    st.text(),
    st.text(alphabet="0123456789,.:/-_eE+ ", max_size=40),
    st.from_regex(r"[0-9]{1,5000}", fullmatch=True),
    st.text(alphabet="²³¹١٢٣०१२౦౧൦൧𝟎𝟏０１", min_size=1, max_size=6),
    st.sampled_from(["all", "0", "00", "0,00", "1,1", "-1", "nan", "inf", "1e400", "::1", "127.1", "0x10",
                     "Vllm:1", "a..b:1", "a:b", "/srv/a:b", "/srv/${HOME}", "~/m", "k=v", "=v", "a/b=c"]),
)
# The repeatable flags (one value per server, buildtool/units/servers.py) and each value's type.
REPEATED = {"--gpus": flags.GpuSelection, "--port": int, "--env-file": Path}
MEMORY_LIMIT = 8 * 2**20
TIME_LIMIT_S = SCHEDULING_SLACK_S    # a parse that blows up takes far longer, or the memory


def argv_for(command: str, flag: str, value: str) -> list[str]:
    return [command, "--", value] if not flag.startswith("-") else [command, f"{flag}={value}"]


def parse(argv: list[str]):
    try:
        return build_py().parse(argv), None
    except UsageError as exc:
        return None, str(exc)


def parsed_or_refused(command: str, flag: str, value: str):
    """(namespace, None) or (None, the refusal), measured. The same parse runs once unmeasured first:
    a command's first parse imports its modules (`build` ~600 of them, 29 MB and seconds under
    tracemalloc), which is no property of the value."""
    parse(argv_for(command, flag, value))
    tracemalloc.start()
    started = time.monotonic()
    try:
        return parse(argv_for(command, flag, value))
    finally:
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < TIME_LIMIT_S and peak < MEMORY_LIMIT, (elapsed, peak)


@pytest.mark.parametrize("command, flag, kind", FLAGS, ids=[f"{c} {f}" for c, f, _ in FLAGS])
@settings(max_examples=30)  # per flag: 31 flags, each parse of the whole command line measured
@given(value=values)
@example(value="0,00").via("the issue: a GPU twice")
@example(value="²").via("the issue: a non-ASCII digit")
@example(value="99999999").via("the issue: a count that exhausted memory")
@example(value="vllm-turing:0.33.0}\n    privileged: true\n    #").via("the issue: a key through --image")
@example(value="--").via("found: argparse < 3.12 handed `--flag=--` to the action as [], untyped")
def test_every_flag_ends_in_a_typed_value_or_one_line_naming_it(command, flag, kind, value):
    args, refusal = parsed_or_refused(command, flag, value)
    if refusal is not None:
        assert "\n" not in refusal and "Traceback" not in refusal
        assert f"argument {flag}" in refusal or f"argument {flag.lstrip('-').replace('-', '_')}" in refusal, refusal
        return
    typed = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert isinstance(typed, kind), (flag, typed)
    if kind is list and flag in REPEATED:  # a repeatable flag: a list of its one typed value
        assert len(typed) == 1 and isinstance(typed[0], REPEATED[flag]), (flag, typed)


UNIT_FLAGS = ["--gpus", "--lib-dir", "--model-dir", "--image", "--bind", "--port", "--api-key-file", "--env-file"]
KUBERNETES_FLAGS = ["--gpus", "--image", "--port", "--replicas", "--weights-gib", "--model-claim", "--runtime-class",
                    "--node-selector", "--model-dir", "--api-key-file"]


@pytest.mark.parametrize("kubernetes, flag", [(False, f) for f in UNIT_FLAGS] + [(True, f) for f in KUBERNETES_FLAGS])
@settings(max_examples=30)  # per flag: each example writes the units
@given(value=values)
@example(value="0,00")
@example(value="~")
def test_an_accepted_units_value_renders_or_is_refused_in_one_line(tmp_path_factory, kubernetes, flag, value):
    out = tmp_path_factory.mktemp("out")
    mode = ["--kubernetes", "--weights-gib", "4"] if kubernetes and flag != "--weights-gib" else \
        ["--kubernetes"] if kubernetes else ["--defaults"]
    with contextlib.redirect_stderr(io.StringIO()) as stderr, contextlib.redirect_stdout(io.StringIO()):
        code = build_py().main(["units", "--out", str(out), *mode, f"{flag}={value}"])
    err = stderr.getvalue()
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err and flag in err, err


@pytest.mark.parametrize("argv, flag", [
    (["--tag", "Vllm-Turing:1"], "--tag"), (["--tag", "a..b:1"], "--tag"), (["--tag", "a\nb:1"], "--tag"),
    (["--tag", "me/x@sha256:" + "a" * 64], "--tag"), (["base", "--vllm-version", "0.33.0\n"], "--vllm-version"),
    (["vehicle", "--os-image", "Debian:12"], "--os-image"), (["--base", "PyPI"], "--base"),
])
def test_a_tag_docker_refuses_is_refused_before_any_build_in_one_line(argv, flag):
    # DOCKER_HOST points nowhere: a refusal that came after connecting would say so instead
    repo = REPO
    run = subprocess.run([sys.executable, str(repo / "build.py"), *argv], cwd=repo, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}, timeout=60)
    assert run.returncode == 2
    assert f"argument {flag}:" in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_a_typed_flag_parser_refuses_with_argparses_error_type():
    for parse, text in ((flags.gpus, "x"), (flags.port, "0"), (flags.image_reference, "A"), (flags.gib, "nan"),
                        (flags.node_label, "a"), (flags.kubernetes_name, "A"), (flags.bind_address, "fe80::1%eth0")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)



# Every subcommand (model's through its one action), and options none of them has (no flag begins "--zz").
COMMANDS = ["build", "base", "verify", "units", "vehicle", "smoke", "lock", "audit", "model fetch"]


@pytest.mark.parametrize("command", COMMANDS)
@settings(max_examples=15)
@given(option=st.from_regex(r"--zz[a-z-]{0,12}", fullmatch=True), positional=values)
@example(option="--from", positional="/nonexistent").via("found: `model fetch` typed REPO before naming --from")
def test_an_option_the_command_lacks_is_named_before_any_value_is_typed(command, option, positional):
    argv = command.split() + [option] + (["--", positional] if positional.startswith("-") else [positional])
    _, refusal = parse(argv)
    assert refusal is not None and f"unrecognized arguments: {option}" in refusal and "\n" not in refusal, refusal


@pytest.mark.parametrize("command", ["build", "base", "verify", "units", "vehicle", "smoke", "audit"])
def test_a_host_without_requirements_txt_gets_one_line_naming_the_module_and_the_install(command):
    """`python3 -S`: no site-packages, so each subcommand meets the first library of requirements.txt
    it imports missing, as on a host where the README's pip install was not run."""
    run = subprocess.run([sys.executable, "-S", str(REPO / "build.py"), command, "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == "", run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"build.py {command} needs the Python module '") and \
        line.endswith("python3 -m pip install -r requirements.txt"), line


def test_a_missing_module_of_our_own_is_a_bug_and_keeps_its_traceback():
    import build

    packages = {folder.parent.name for folder in REPO.glob("*/__init__.py")} - {"tests"}
    assert packages <= set(build.OWN_PACKAGES), "a package of ours would be called a missing library"
    assert build.host_lacks("units", ModuleNotFoundError(name="buildtool.units.gone")) is None
    assert "'yaml'" in str(build.host_lacks("units", ModuleNotFoundError(name="yaml")))
