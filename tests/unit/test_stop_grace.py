"""Drain on stop: one setting, STOP_GRACE_SECONDS, sizes vLLM's --shutdown-timeout (vLLM's default,
0, aborts every request in flight at SIGTERM) in the argv the entrypoint builds, unless the user gave
one, and `build.py units` renders the units' grace (compose, Quadlet, Kubernetes) from the same setting
of each server's env file."""
import pytest
import yaml
from hypothesis import given, strategies as st

from buildtool.units.kubernetes import PRE_STOP_S
from buildtool.units.spec import FETCH_PROFILE
from contract.layout import (SERVER_HTTP_DRAIN_S, STOP_GRACE_MAX_S, STOP_GRACE_MIN_S, STOP_GRACE_S,
                             shutdown_timeout_s)
from entrypoint.server_command import SHUTDOWN_TIMEOUT, server_argv
from entrypoint.settings import SettingsError, parse_settings
from tests.support.build_py import build_py
from tests.support.deploy_units import interpolate_defaults, parse_unit, seconds
from tests.support.bad_model_folders import LLAMA
from tests.support.model_files import write_model_dir
from tests import REPO

BASE = {"MODEL": "/models/m"}


def drain_of(argv):
    return [argv[i + 1] for i, word in enumerate(argv) if word == SHUTDOWN_TIMEOUT]


@given(st.integers(STOP_GRACE_MIN_S, STOP_GRACE_MAX_S))
def test_the_drain_and_the_http_bound_fit_inside_any_accepted_grace(grace):
    settings = parse_settings({**BASE, "STOP_GRACE_SECONDS": str(grace)})
    [drain] = drain_of(server_argv(settings, None))
    assert 1 <= int(drain) and int(drain) + SERVER_HTTP_DRAIN_S < grace
    assert int(drain) == shutdown_timeout_s(grace)


def test_the_default_grace_is_the_units_and_drains_for_40_s():
    assert parse_settings(BASE).stop_grace_s == STOP_GRACE_S
    assert drain_of(server_argv(parse_settings(BASE), None)) == [str(STOP_GRACE_S - SERVER_HTTP_DRAIN_S - 5)] == ["40"]


@pytest.mark.parametrize("words, container_args", [
    ("--shutdown-timeout 7", ()), ("--shutdown-timeout=7", ()), ("", ("--shutdown-timeout", "7")),
    ("", ("--shutdown-timeout=7",))])
def test_a_shutdown_timeout_the_user_gave_is_theirs_alone(words, container_args):
    argv = server_argv(parse_settings({**BASE, "VLLM_EXTRA_ARGS": words}), None, container_args)
    assert sum(word.startswith(SHUTDOWN_TIMEOUT) for word in argv) == 1 and argv[-1].endswith("7")


@given(st.text(max_size=12))
def test_a_bad_grace_is_refused_naming_the_setting(raw):
    try:
        value = parse_settings({**BASE, "STOP_GRACE_SECONDS": raw}).stop_grace_s
    except SettingsError as error:
        assert str(error).startswith("STOP_GRACE_SECONDS=") and "\n" not in str(error)
        assert error.variable == "STOP_GRACE_SECONDS"
    else:
        assert STOP_GRACE_MIN_S <= value <= STOP_GRACE_MAX_S


@pytest.mark.parametrize("raw", ["0", "20", "3601", "-5", "60s", "1e3"])
def test_a_grace_too_short_to_drain_or_not_seconds_is_refused(raw):
    with pytest.raises(SettingsError, match=f"an integer from {STOP_GRACE_MIN_S} to {STOP_GRACE_MAX_S}"):
        parse_settings({**BASE, "STOP_GRACE_SECONDS": raw})


def test_the_committed_units_give_the_server_the_settings_default_grace():
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["vllm"]
    assert compose["stop_grace_period"] == f"{STOP_GRACE_S}s"
    quadlet = parse_unit((REPO / "quadlet/vllm-turing.container").read_text())["Container"]
    assert quadlet["StopTimeout"] == [str(STOP_GRACE_S)]
    docs = list(yaml.safe_load_all((REPO / "kubernetes/base/vllm-turing.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["lifecycle"]["preStop"]["sleep"]["seconds"] == PRE_STOP_S
    assert pod["terminationGracePeriodSeconds"] == STOP_GRACE_S + PRE_STOP_S
    env_file = dict(line.split("=", 1) for line in (REPO / "quadlet/vllm-turing.env").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert env_file["STOP_GRACE_SECONDS"] == str(STOP_GRACE_S)
    assert parse_settings({**BASE, **env_file}).stop_grace_s == STOP_GRACE_S


def test_the_committed_units_restart_a_server_that_exits_non_zero():
    """What the fault suite measures only for compose (no systemd or cluster on the CI machines): a server
    whose engine died exits 3 (entrypoint/graceful_stop.py), and each unit starts it again."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["vllm"]
    assert compose["restart"] == "unless-stopped"
    service = parse_unit((REPO / "quadlet/vllm-turing.container").read_text())["Service"]
    assert service["Restart"] == ["on-failure"]  # systemd restarts on any exit code but 0
    docs = list(yaml.safe_load_all((REPO / "kubernetes/base/vllm-turing.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod.get("restartPolicy", "Always") == "Always"  # a Deployment's pods admit no other


def rendered_graces(out) -> set[int]:
    """(compose's and Quadlet's graces of every server, Kubernetes' pod grace) as rendered in `out`; the
    one-shot fetch units are not servers."""
    services = yaml.safe_load(interpolate_defaults((out / "compose.yaml").read_text()))["services"]
    graces = {seconds(s["stop_grace_period"]) for s in services.values() if FETCH_PROFILE not in s.get("profiles", [])}
    graces |= {int(parse_unit(unit.read_text())["Container"]["StopTimeout"][0])
               for unit in (out / "quadlet").glob("*.container") if not unit.name.endswith("-fetch.container")}
    return graces


def pod_grace(out) -> set[int]:
    docs = yaml.safe_load_all((out / "kubernetes/base/vllm-turing.yaml").read_text())
    return {d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] for d in docs if d["kind"] == "Deployment"}


@pytest.mark.parametrize("grace", [STOP_GRACE_MIN_S, 120, STOP_GRACE_MAX_S])
def test_the_units_grace_is_the_env_files_stop_grace_seconds(tmp_path, grace):
    env = tmp_path / "chat.env"
    env.write_text(f"MODEL=/models/chat\nSTOP_GRACE_SECONDS={grace}\n")
    out = tmp_path / "out"
    assert build_py().main(["units", "--out", str(out), "--defaults", "--env-file", str(env)]) == 0
    assert rendered_graces(out) == {grace}
    assert build_py().main(["units", "--out", str(out), "--defaults", "--env-file", str(env), "--kubernetes",
                            "--weights-gib", "1"]) == 0
    assert pod_grace(out) == {grace + PRE_STOP_S}


def test_the_grace_of_the_env_file_kept_in_out_is_rendered_again(tmp_path):
    out = tmp_path / "out"
    assert build_py().main(["units", "--out", str(out), "--defaults"]) == 0
    env = out / "quadlet/vllm-turing.env"
    env.write_text(env.read_text().replace(f"STOP_GRACE_SECONDS={STOP_GRACE_S}", "STOP_GRACE_SECONDS=90"))
    assert build_py().main(["units", "--out", str(out), "--defaults"]) == 0
    assert rendered_graces(out) == {90}


def test_several_servers_each_get_their_own_grace(tmp_path):
    models = tmp_path / "models"
    write_model_dir(models / "chat", LLAMA, elements=2**20)
    (tmp_path / "chat.env").write_text("MODEL=/models/chat\nMAX_MODEL_LEN=4096\nSTOP_GRACE_SECONDS=45\n")
    (tmp_path / "embed.env").write_text("MODEL=/models/embed\nGPU_MEMORY_UTILIZATION=0.2\n")
    out = tmp_path / "out"
    assert build_py().main(["units", "--out", str(out), "--defaults", "--model-dir", str(models), "--env-file",
                            str(tmp_path / "chat.env"), "--env-file", str(tmp_path / "embed.env")]) == 0
    services = yaml.safe_load(interpolate_defaults((out / "compose.yaml").read_text()))["services"]
    assert {name: seconds(s["stop_grace_period"]) for name, s in services.items()
            if FETCH_PROFILE not in s.get("profiles", [])} == {"chat": 45, "embed": STOP_GRACE_S}


@pytest.mark.parametrize("raw", ["20", "60s"])
def test_a_bad_grace_in_the_env_file_is_refused_naming_file_and_setting(tmp_path, capsys, raw):
    env = tmp_path / "chat.env"
    env.write_text(f"MODEL=/models/chat\nSTOP_GRACE_SECONDS={raw}\n")
    out = tmp_path / "out"
    assert build_py().main(["units", "--out", str(out), "--defaults", "--env-file", str(env)]) == 2
    err = capsys.readouterr().err
    assert str(env) in err and "STOP_GRACE_SECONDS" in err and err.count("\n") == 1
    assert not (out / "compose.yaml").exists()
