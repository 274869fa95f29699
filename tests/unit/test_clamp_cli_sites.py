"""`python -m patches.turing_clamp` over the sites of an installed vLLM: every site by default (a host
install gets the encoder clamp too), --site picks one, each site judged on its own."""
import contextlib
import io
import json
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import example, given, strategies as st

from patches import turing_clamp
from patches.turing_clamp import __main__ as cli
from patches.turing_clamp.placement import ENCODER, UNIFIED
from tooling import clamp_cycle
from tooling.clamp_cycle import run_cli

RELEASE = "0.33.0"


def test_the_cli_acts_on_every_site_by_default_and_site_picks_one(tmp_path):
    unified = clamp_cycle.copy_release("0.33.0", tmp_path, UNIFIED)
    encoder = clamp_cycle.copy_release("0.33.0", tmp_path, ENCODER)
    env = {"PYTHONPATH": f"{unified.parents[4]}:{clamp_cycle.REPO}", "PATH": "/usr/bin:/bin"}
    picked = run_cli("apply", "--site", "encoder", "--json", env=env)
    assert picked.returncode == 0 and json.loads(picked.stdout)["file"] == str(encoder)
    assert turing_clamp.check(unified).outcome is turing_clamp.Outcome.ABSENT
    half = run_cli("check", env=env)  # the worst site's exit code, one line per site
    assert half.returncode == 1 and [line.split(":")[0] for line in half.stdout.splitlines()] == ["absent", "present"]
    placed = run_cli("apply", "--json", env=env)
    assert placed.returncode == 0, placed.stderr
    assert {name: report["outcome"] for name, report in json.loads(placed.stdout).items()} == \
        {"unified": "applied", "encoder": "already"}
    checked = run_cli("check", "--json", env=env)
    assert checked.returncode == 0
    assert {name: report["outcome"] for name, report in json.loads(checked.stdout).items()} == \
        {"unified": "present", "encoder": "present"}
    assert run_cli("show", env=env).stdout == ""
    assert set(json.loads(run_cli("show", "--json", env=env).stdout)) == set(turing_clamp.SITES)


def in_process(argv: list[str], targets: dict) -> tuple[int, str, str]:
    """The CLI in this process, each site's launcher found at targets[name] (as find_target would)."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(cli, "find_target", lambda site: targets[site.name]), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


LAUNCHERS = {}


def launcher_text(site) -> bytes:
    """The release's launcher of `site`, read once."""
    if site.name not in LAUNCHERS:
        with tempfile.TemporaryDirectory() as folder:
            LAUNCHERS[site.name] = clamp_cycle.copy_release(RELEASE, Path(folder), site).read_bytes()
    return LAUNCHERS[site.name]


SITE_FILE = st.one_of(st.just(None), st.binary(max_size=200),
                      st.text(max_size=200).map(lambda text: text.encode("utf-8")))


@given(unified=SITE_FILE, encoder=SITE_FILE)
@example(unified=None, encoder=b"def context_attention_fwd(:\n")  # one site refused: the other still placed
@example(unified=b"\xff\xfe", encoder=None)  # not UTF-8
def test_apply_over_every_site_judges_each_site_on_its_own(unified, encoder):
    """None: the release's own launcher, else these bytes. A site's launcher is placed or refused on its
    own; a refused file is unchanged and its refusal names it on stderr; the exit code is the worst
    site's; never a traceback."""
    with tempfile.TemporaryDirectory() as folder:
        targets, given_bytes = {}, {}
        for site, content in ((UNIFIED, unified), (ENCODER, encoder)):
            given_bytes[site.name] = launcher_text(site) if content is None else content
            targets[site.name] = Path(folder) / site.target_in_package.name
            targets[site.name].write_bytes(given_bytes[site.name])
        code, out, err = in_process(["apply", "--json"], targets)
        reports = json.loads(out)
        assert list(reports) == list(turing_clamp.SITES) and "Traceback" not in err
        assert code == max(turing_clamp.Outcome[r["outcome"].upper()].exit_code for r in reports.values())
        for name, report in reports.items():
            if report["outcome"] != "applied":
                assert targets[name].read_bytes() == given_bytes[name]
            if report["outcome"] == "refused":
                assert str(targets[name]) in err
        for site, content in ((UNIFIED, unified), (ENCODER, encoder)):
            if content is None:
                assert reports[site.name]["outcome"] == "applied"
                assert turing_clamp.check(targets[site.name]).outcome is turing_clamp.Outcome.PRESENT
