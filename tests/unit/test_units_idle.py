"""IDLE_AFTER (docs/deploy.md, "Idle"; docs/fleet.md, "Idle: scale to zero"): the setting typed once, the
socket-activated units that `build.py units` renders from it checked by the real tools (`quadlet -dryrun`,
`systemd-analyze verify`, `docker compose config`), the KEDA objects against KEDA's published schemas
(tests/support/schemas/keda/), and nothing of it without the setting. The chain itself runs with real
binaries in tests/serving/test_idle.py."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from buildtool.units import idle, keda
from contract.pins import KUBERNETES_VERSION
from entrypoint.settings import SettingsError, idle_after_setting
from tests.support.build_py import build_py
from tests.support.deploy_units import parse_unit
from tests import REPO

QUADLET = Path("/opt/vllm-turing-tools/bin/quadlet")
SYSTEMD_ANALYZE = Path("/usr/bin/systemd-analyze")
SCHEMAS = REPO / "tests" / "support" / "schemas" / "keda"
CRDS = {("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects-2.20.2.yaml",
        ("http.keda.sh/v1alpha1", "HTTPScaledObject"): "http.keda.sh_httpscaledobjects-0.15.0.yaml"}


def units(out: Path, *args: str) -> int:
    return build_py().main(["units", "--out", str(out), *args])


def env_file(folder: Path, name: str = "idle.env", **settings: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(f"{key}={value}\n" for key, value in {"MODEL": "/models/m", **settings}.items()))
    return path


@pytest.mark.parametrize("raw, seconds", [("900", 900), ("15min", 900), ("1h 30min", 5400), ("90s", 90), ("2 h", 7200),
                                          ("", None), ("0", None), ("off", None), ("5s", 5), ("7d", 7 * 86400)])
def test_idle_after_takes_systemd_time_spans(raw, seconds):
    assert idle_after_setting({"IDLE_AFTER": raw}) == seconds


@pytest.mark.parametrize("raw", ["4s", "8d", "1.5h", "-1", "15 fortnights", "１５min", "15min;rm", "9" * 40])
def test_a_bad_idle_after_is_refused_naming_the_setting(raw):
    with pytest.raises(SettingsError) as refusal:
        idle_after_setting({"IDLE_AFTER": raw})
    assert str(refusal.value).startswith("IDLE_AFTER=") and "15min" in str(refusal.value)


def test_a_bad_idle_after_in_an_env_file_is_one_line_naming_the_file_and_nothing_is_written(tmp_path, capsys):
    path = env_file(tmp_path, IDLE_AFTER="3s")
    out = tmp_path / "out"
    assert units(out, "--defaults", "--env-file", str(path)) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "IDLE_AFTER='3s'" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The units of one IDLE_AFTER server, written where a path has a space (systemd takes it as it is)."""
    root = tmp_path_factory.mktemp("idle")
    out = root / "my units"
    assert units(out, "--defaults", "--env-file", str(env_file(root, IDLE_AFTER="15min")), "--port", "8080",
                 "--bind", "0.0.0.0") == 0
    return out


def test_the_socket_holds_the_public_port_and_the_proxy_forwards_to_the_loopback_backend(rendered):
    for server_unit in ("vllm-turing", "vllm-turing-compose"):
        socket = parse_unit((rendered / idle.SYSTEMD_DIR / f"{server_unit}-proxy.socket").read_text())
        proxy = parse_unit((rendered / idle.SYSTEMD_DIR / f"{server_unit}-proxy.service").read_text())
        assert socket["Socket"]["ListenStream"] == ["0.0.0.0:8080"] and socket["Install"]["WantedBy"] == ["sockets.target"]
        assert proxy["Unit"]["Requires"] == [f"{server_unit}.service", f"{server_unit}-proxy.socket"]
        assert proxy["Unit"]["After"] == proxy["Unit"]["Requires"]
        assert proxy["Service"]["ExecStart"] == [f"{idle.PROXYD} --exit-idle-time=900s 127.0.0.1:18080"]


def test_the_quadlet_server_is_on_the_loopback_started_only_on_demand_and_stopped_when_unneeded(rendered):
    done = subprocess.run([str(QUADLET), "-dryrun", "-user"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "QUADLET_UNIT_DIRS": str(rendered / "quadlet")})
    assert done.returncode == 0, done.stderr
    service = parse_unit(done.stdout.split("---vllm-turing.service---", 1)[1].split("\n---", 1)[0])
    assert service["Unit"]["StopWhenUnneeded"] == ["yes"] and "Install" not in service
    assert service["X-Container"]["PublishPort"] == ["127.0.0.1:18080:8000"]
    assert service["X-Container"]["Notify"] == ["healthy"] and service["X-Container"]["HealthInterval"] == ["5s"]


def test_the_compose_unit_runs_compose_in_the_units_folder_and_compose_publishes_the_backend_only(rendered):
    unit = parse_unit((rendered / idle.SYSTEMD_DIR / "vllm-turing-compose.service").read_text())
    assert unit["Unit"]["StopWhenUnneeded"] == ["yes"] and unit["Service"]["WorkingDirectory"] == [str(rendered)]
    assert unit["Service"]["ExecStart"][0].split()[-1] == "vllm" and "--wait" in unit["Service"]["ExecStart"][0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TURING_", "NVIDIA_LIB_DIR", "MODEL_DIR"))}
    done = subprocess.run(["docker", "compose", "config", "--format", "json"], cwd=rendered, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    service = json.loads(done.stdout)["services"]["vllm"]
    assert [(p["host_ip"], p["published"]) for p in service["ports"]] == [("127.0.0.1", "18080")]
    assert service["restart"] == "on-failure" and service["healthcheck"]["interval"] == "5s"


@pytest.mark.skipif(not SYSTEMD_ANALYZE.is_file(), reason="systemd-analyze is not installed (Debian: systemd)")
def test_systemd_analyze_verifies_the_socket_proxy_and_compose_units(rendered, tmp_path):
    """Verified beside the service Quadlet generates for the container (its podman is not needed to load it)."""
    units_dir = tmp_path / "user"
    units_dir.mkdir()
    done = subprocess.run([str(QUADLET), "-user", str(units_dir)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "QUADLET_UNIT_DIRS": str(rendered / "quadlet")})
    assert done.returncode == 0, done.stderr
    ours = sorted(p.name for p in (rendered / idle.SYSTEMD_DIR).iterdir())
    for name in ours:
        (units_dir / name).write_text((rendered / idle.SYSTEMD_DIR / name).read_text())
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    done = subprocess.run([str(SYSTEMD_ANALYZE), "verify", "--man=no", "--user", *ours], cwd=units_dir,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units_dir}:", "XDG_RUNTIME_DIR": str(runtime)})
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    (units_dir / "vllm-turing-compose.service").write_text(
        (units_dir / "vllm-turing-compose.service").read_text().replace("ExecStart=", "ExecStrat="))
    broken = subprocess.run([str(SYSTEMD_ANALYZE), "verify", "--man=no", "--user", "vllm-turing-compose.service"],
                            cwd=units_dir, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units_dir}:", "XDG_RUNTIME_DIR": str(runtime)})
    assert "ExecStrat" in broken.stderr, "verify sees a planted unknown key"


def test_without_idle_after_nothing_is_socket_activated(tmp_path):
    out = tmp_path / "out"
    assert units(out, "--defaults", "--env-file", str(env_file(tmp_path, IDLE_AFTER=""))) == 0
    assert not (out / idle.SYSTEMD_DIR).exists()
    assert "StopWhenUnneeded" not in (out / "quadlet" / "vllm-turing.container").read_text()


def test_an_idle_servers_backend_port_clashing_with_another_servers_port_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    first = env_file(tmp_path, "chat.env", IDLE_AFTER="10min", GPU_MEMORY_UTILIZATION="0.4")
    second = env_file(tmp_path, "embed.env", GPU_MEMORY_UTILIZATION="0.4")
    assert units(out, "--defaults", "--env-file", str(first), "--env-file", str(second),
                 "--port", "8000", "--port", "18000") == 2
    err = capsys.readouterr().err
    assert f"{first} (its loopback backend, port + 10000 (IDLE_AFTER)) and {second} (server) both use the port 18000" in err
    assert err.count("\n") == 1
    assert not out.exists()


def test_prometheus_labels_an_idle_servers_target_so_the_down_alert_leaves_it_alone(tmp_path):
    out = tmp_path / "out"
    first = env_file(tmp_path, "chat.env", IDLE_AFTER="10min", GPU_MEMORY_UTILIZATION="0.4")
    second = env_file(tmp_path, "embed.env", GPU_MEMORY_UTILIZATION="0.4")
    assert units(out, "--defaults", "--monitoring", "--env-file", str(first), "--env-file", str(second)) == 0
    config = yaml.safe_load((out / "monitoring" / "prometheus.yml").read_text())
    groups = config["scrape_configs"][0]["static_configs"]
    assert groups == [{"targets": ["embed:8000"]}, {"targets": ["chat:8000"], "labels": {"idle": "true"}}]
    assert len(list((out / idle.SYSTEMD_DIR).glob("vllm-turing-chat*"))) == 5


def crd_schema(doc: dict) -> dict:
    crd = yaml.safe_load((SCHEMAS / CRDS[(doc["apiVersion"], doc["kind"])]).read_text())
    version = doc["apiVersion"].split("/")[1]
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    return served["schema"]["openAPIV3Schema"]


def crd_errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(crd_schema(doc))
    return [f"{doc['kind']}: {e.message} at {'/'.join(map(str, e.path))}" for e in validator.iter_errors(doc)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("cluster")
    out = root / "out"
    assert units(out, "--defaults", "--kubernetes", "--weights-gib", "4", "--replicas", "3",
                 "--env-file", str(env_file(root, IDLE_AFTER="20min"))) == 0
    return [doc for doc in yaml.safe_load_all((out / "kubernetes/base/vllm-turing.yaml").read_text()) if doc]


def test_kubernetes_gets_keda_objects_that_validate_against_kedas_published_schemas(cluster):
    ours = [doc for doc in cluster if (doc["apiVersion"], doc["kind"]) in CRDS]
    assert sorted(doc["kind"] for doc in ours) == ["HTTPScaledObject", "ScaledObject"]
    assert [error for doc in ours for error in crd_errors(doc)] == []
    for doc in cluster:
        if (doc["apiVersion"], doc["kind"]) not in CRDS:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    scaled = next(doc for doc in ours if doc["kind"] == "ScaledObject")["spec"]
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"], scaled["cooldownPeriod"]) == (0, 3, 1200)
    assert [t["type"] for t in scaled["triggers"]] == ["external-push", "prometheus"]
    assert "vllm:num_requests_running" in scaled["triggers"][1]["metadata"]["query"]
    http = next(doc for doc in ours if doc["kind"] == "HTTPScaledObject")
    assert http["metadata"]["annotations"] == {keda.SKIP_SCALED_OBJECT: "true"}
    assert http["spec"]["replicas"] == {"min": 0, "max": 3} and http["spec"]["scaledownPeriod"] == 1200


def test_the_schemas_catch_a_planted_mistake(cluster):
    scaled = next(doc for doc in cluster if doc["kind"] == "ScaledObject")
    broken = {**scaled, "spec": {**scaled["spec"], "minReplicaCount": "zero"}}
    assert any("minReplicaCount" in error for error in crd_errors(broken))
    http = next(doc for doc in cluster if doc["kind"] == "HTTPScaledObject")
    broken = {**http, "spec": {k: v for k, v in http["spec"].items() if k != "scaleTargetRef"}}
    assert any("scaleTargetRef" in error for error in crd_errors(broken))


def test_the_network_policy_admits_the_interceptor_of_an_idle_server(cluster):
    policy = next(doc for doc in cluster if doc["kind"] == "NetworkPolicy" and doc["metadata"]["name"] == "vllm-turing")
    sources = [source for rule in policy["spec"]["ingress"] for source in rule["from"]]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": keda.ADDON_NAMESPACE}}} in sources


def test_a_prometheus_url_with_a_password_is_refused(tmp_path, capsys):
    assert units(tmp_path / "out", "--defaults", "--kubernetes", "--weights-gib", "4",
                 "--prometheus-url", "http://user:pw@prometheus:9090") == 2
    err = capsys.readouterr().err
    assert "--prometheus-url: 'http://***@prometheus:9090'" in err and "user:pw" not in err and err.count("\n") == 1


def test_a_render_that_fails_halfway_leaves_every_unit_already_there_byte_identical(tmp_path, capsys):
    out = tmp_path / "out"
    assert units(out, "--defaults", "--env-file", str(env_file(tmp_path, IDLE_AFTER="15min"))) == 0
    fetch_unit = out / "quadlet" / "vllm-turing-fetch.container"
    fetch_unit.unlink()
    fetch_unit.mkdir()  # one target that cannot be written, after others that can
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert units(out, "--defaults", "--env-file", str(env_file(tmp_path, "new.env", IDLE_AFTER="20min"))) == 2
    assert "vllm-turing-fetch.container" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before, "an earlier unit was replaced"
