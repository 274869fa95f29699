"""Generated specs for `build.py units`: every accepted command line renders units that the real
tools accept (`docker compose config`, `quadlet -dryrun`, `systemd-analyze verify`, the pinned
Kubernetes schemas) and that hold exactly the keys the spec asked for: no `privileged`, no extra
service, no key a value smuggled in. The real tools run a bounded number of times (max_examples)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from buildtool.units.kubernetes import MANIFEST_PATH
from buildtool.units.policy import manifest_problems
from buildtool.units.serialize import Line, env_file, unit_file, unit_value, yaml_document
from contract.pins import KUBERNETES_VERSION
from tests.support.build_py import build_py
from tests.support.deploy_units import parse_unit

QUADLET = Path("/opt/vllm-turing-tools/bin/quadlet")
SYSTEMD_ANALYZE = Path("/usr/bin/systemd-analyze")
REAL_TOOL_EXAMPLES = settings(max_examples=15)

_alnum = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
_component = st.builds(lambda a, sep, b: a + sep + b if b else a, _alnum, st.sampled_from([".", "_", "__", "-", "--"]),
                       st.one_of(st.just(""), _alnum))
image_refs = st.builds(
    lambda domain, path, tag, digest: domain + "/".join(path) + tag + digest,
    st.sampled_from(["", "localhost/", "registry.example:5000/", "[::1]:5000/", "ghcr.io/"]),
    st.lists(_component, min_size=1, max_size=3),
    st.one_of(st.just(""), st.from_regex(r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)),
    st.one_of(st.just(""), st.just("@sha256:" + "ab" * 32)))
# Directories as a host has them, including systemd's specifier character (escaped as %%).
host_dirs = st.builds(lambda home, parts: ("~/" if home else "/") + "/".join(parts), st.booleans(),
                      st.lists(st.from_regex(r"[A-Za-z0-9._%@+=,-]{1,12}", fullmatch=True), min_size=1, max_size=3))
# one number is a count; indices are a comma list of two or more (a lone "0" would be a count of none)
gpu_flags = st.one_of(st.integers(1, 8).map(str),
                      st.sets(st.integers(0, 15), min_size=2, max_size=4).map(lambda s: ",".join(map(str, sorted(s)))))
bind_addresses = st.one_of(st.sampled_from(["127.0.0.1", "0.0.0.0", "::1", "::"]),
                           st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))


@st.composite
def unit_specs(draw) -> dict:
    return {"image": draw(image_refs), "gpus": draw(gpu_flags), "model_dir": draw(host_dirs),
            "lib_dir": "/" + draw(host_dirs).lstrip("~/"), "bind": draw(bind_addresses),
            "port": draw(st.integers(1, 65535)), "api_key_file": draw(st.one_of(st.none(), host_dirs)),
            "cdi": draw(st.booleans()), "ipc_host": draw(st.booleans())}


def argv_of(spec: dict) -> list[str]:
    argv = ["--defaults", "--image", spec["image"], "--gpus", spec["gpus"], "--model-dir", spec["model_dir"],
            "--lib-dir", spec["lib_dir"], f"--bind={spec['bind']}", "--port", str(spec["port"])]
    argv += ["--api-key-file", spec["api_key_file"]] if spec["api_key_file"] else []
    return argv + ["--cdi"] * spec["cdi"] + ["--ipc-host"] * spec["ipc_host"]


def run_tool(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


def expected_service_keys(spec: dict) -> set[str]:
    return ({"image", "env_file", "environment", "devices", "volumes", "ports", "ulimits", "cap_drop",
             "security_opt", "healthcheck", "depends_on", "restart", "stop_grace_period"}
            | {"ipc" if spec["ipc_host"] else "shm_size"} | ({"secrets"} if spec["api_key_file"] else set()))


FETCH_SERVICE_KEYS = {"image", "env_file", "profiles", "command", "environment", "volumes", "cap_drop", "security_opt",
                      "restart"}


def compose_config(out: Path, *files: str, profile: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TURING_", "NVIDIA_LIB_DIR", "MODEL_DIR"))}
    args = [a for f in files for a in ("-f", f)] + (["--profile", profile] if profile else [])
    done = run_tool(["docker", "compose", *args, "config", "--format", "json", "--no-interpolate"], cwd=out, env=env)
    assert done.returncode == 0, done.stderr
    interpolated = run_tool(["docker", "compose", *args, "config", "--format", "json"], cwd=out, env=env)
    assert interpolated.returncode == 0, interpolated.stderr
    return json.loads(interpolated.stdout)


def test_the_real_tools_are_here():
    assert shutil.which("docker") and run_tool(["docker", "compose", "version"]).returncode == 0, \
        "docker compose v2 (the docker CLI plugin) is needed for the generated unit tests"
    assert QUADLET.is_file(), f"{QUADLET} (podman's quadlet) is needed for the generated unit tests"


@REAL_TOOL_EXAMPLES
@given(spec=unit_specs())
@example(spec={"image": "vllm-turing:0.33.0", "gpus": "1", "model_dir": "~/models", "lib_dir": "/usr/lib64",
               "bind": "::1", "port": 8000, "api_key_file": "~/key%s", "cdi": False, "ipc_host": True})
@example(spec={"image": "0.0/0", "gpus": "1", "model_dir": "/0", "lib_dir": "/0", "bind": "127.0.0.1", "port": 1,
               "api_key_file": None, "cdi": False, "ipc_host": False})
def test_an_accepted_spec_renders_units_the_real_tools_accept_with_only_the_keys_asked_for(spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("units")
    assert build_py().main(["units", "--out", str(out), *argv_of(spec)]) == 0

    written = yaml.safe_load((out / "compose.yaml").read_text())
    assert set(written) == {"name", "services", "volumes"} | ({"secrets"} if spec["api_key_file"] else set())
    assert set(written["services"]) == {"vllm", "fetch"}
    assert set(written["services"]["vllm"]) == expected_service_keys(spec)
    assert set(written["services"]["fetch"]) == FETCH_SERVICE_KEYS

    config = compose_config(out, "compose.yaml")
    service = config["services"]["vllm"]
    assert set(config["services"]) == {"vllm"} and "privileged" not in service and "cap_add" not in service
    assert service["image"] == spec["image"]
    assert (service["ports"][0]["host_ip"], int(service["ports"][0]["published"])) == (spec["bind"], spec["port"])
    gpus = [d["source"] for d in service["devices"] if d["source"][len("/dev/nvidia"):].isdigit()]
    # one number is a count (the first N), a comma list the indices themselves
    wanted = map(int, spec["gpus"].split(",")) if "," in spec["gpus"] else range(int(spec["gpus"]))
    assert gpus == [f"/dev/nvidia{i}" for i in wanted]
    model = next(v for v in service["volumes"] if v["target"] == "/models")
    assert model["source"] == os.path.expanduser(spec["model_dir"]) and model["read_only"]
    toolkit = compose_config(out, "compose.yaml", "compose.toolkit.yaml")["services"]["vllm"]
    assert "privileged" not in toolkit and not toolkit.get("devices")
    fetching = compose_config(out, "compose.yaml", profile="fetch")["services"]
    assert set(fetching) == {"vllm", "fetch"} and fetching["fetch"]["command"] == ["fetch"]
    assert "privileged" not in fetching["fetch"] and not fetching["fetch"].get("devices")
    [fetch_model] = [v for v in fetching["fetch"]["volumes"] if v["target"] == "/models"]
    assert fetch_model["source"] == model["source"] and not fetch_model.get("read_only")
    assert fetching["fetch"]["environment"]["HF_HUB_OFFLINE"] == "0"

    unit_dir = out / "quadlet"
    generated = run_tool([str(QUADLET), "-dryrun", "-user"], env={**os.environ, "QUADLET_UNIT_DIRS": str(unit_dir)})
    assert generated.returncode == 0, generated.stderr
    unit = parse_unit((unit_dir / "vllm-turing.container").read_text())
    assert set(unit) == {"Unit", "Container", "Service", "Install"}
    container_keys = {"ContainerName", "Image", "Pull", "EnvironmentFile", "Environment", "AddDevice", "Volume",
                      "PublishPort", "Ulimit", "DropCapability", "NoNewPrivileges", "HealthCmd", "HealthInterval",
                      "HealthTimeout", "HealthRetries", "HealthStartPeriod", "Notify", "StopTimeout",
                      "PodmanArgs" if spec["ipc_host"] else "ShmSize"} | ({"Secret"} if spec["api_key_file"] else set())
    assert set(unit["Container"]) == container_keys
    # a reference names its registry when its first component looks like a host (a dot, a port, localhost)
    first = spec["image"].split("/")[0]
    qualified = "/" in spec["image"] and ("." in first or ":" in first or first == "localhost")
    assert unit["Container"]["Image"] == [spec["image"] if qualified else "localhost/" + spec["image"]]
    assert unit["Unit"]["Requires"] == unit["Unit"]["After"] == ["vllm-turing-fetch.service"]
    fetch_unit = parse_unit((unit_dir / "vllm-turing-fetch.container").read_text())
    assert fetch_unit["Service"]["Type"] == ["oneshot"] and fetch_unit["Container"]["Exec"] == ["fetch"]
    assert [v for v in fetch_unit["Container"]["Volume"] if v.endswith(":/models")]  # read-write: no :ro
    fetch_text = generated.stdout.split("---vllm-turing-fetch.service---", 1)[1].split("---", 1)[0]
    service_text = generated.stdout.split("---vllm-turing.service---", 1)[1]
    assert "--privileged" not in service_text and "--privileged" not in fetch_text
    if SYSTEMD_ANALYZE.is_file():
        # the generated service as systemd reads it; podman need not be installed to judge the syntax
        (out / "vllm-turing.service").write_text(service_text.replace("/usr/bin/podman", "/usr/bin/env"))
        (out / "vllm-turing-fetch.service").write_text(fetch_text.replace("/usr/bin/podman", "/usr/bin/env"))
        for name in ("vllm-turing.service", "vllm-turing-fetch.service"):
            verified = run_tool([str(SYSTEMD_ANALYZE), "verify", "--man=no", str(out / name)], cwd=out)
            assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr


_KUBE_NAME = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?)?"
_LABEL = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?"
node_labels = st.builds(lambda prefix, name, value: (prefix + "/" if prefix else "") + name + "=" + value,
                        st.one_of(st.just(""), st.from_regex(_KUBE_NAME, fullmatch=True)),
                        st.from_regex(_LABEL, fullmatch=True), st.one_of(st.just(""), st.from_regex(_LABEL, fullmatch=True)))


@st.composite
def cluster_specs(draw) -> dict:
    return {"replicas": draw(st.integers(1, 1000)), "gpus": draw(st.integers(1, 8)),
            "weights_gib": draw(st.floats(0.001, 4095, allow_nan=False, allow_infinity=False)),
            "model_claim": draw(st.from_regex(_KUBE_NAME, fullmatch=True)),
            "runtime_class": draw(st.one_of(st.none(), st.from_regex(_KUBE_NAME, fullmatch=True))),
            "node_selector": draw(st.lists(node_labels, max_size=3, unique_by=lambda x: x.split("=")[0])),
            "host_path": draw(st.booleans()), "model_dir": "/" + draw(host_dirs).lstrip("~/"),
            "image": draw(image_refs), "port": draw(st.integers(1, 65535)),
            "api_key_file": draw(st.one_of(st.none(), host_dirs)), "cpus": draw(st.one_of(st.none(), st.integers(1, 512)))}


@settings(max_examples=25)
@given(spec=cluster_specs())
def test_accepted_cluster_specs_render_manifests_the_pinned_schemas_accept_with_only_what_was_asked(spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("kube")
    argv = ["units", "--kubernetes", "--out", str(out), "--replicas", str(spec["replicas"]), "--gpus", str(spec["gpus"]),
            "--weights-gib", repr(spec["weights_gib"]), "--model-claim", spec["model_claim"],
            "--image", spec["image"], "--port", str(spec["port"]), "--model-dir", spec["model_dir"],
            "--model-volume", "hostPath" if spec["host_path"] else "pvc"]
    argv += ["--runtime-class", spec["runtime_class"]] if spec["runtime_class"] else []
    argv += [a for label in spec["node_selector"] for a in ("--node-selector", label)]
    argv += ["--api-key-file", spec["api_key_file"]] if spec["api_key_file"] else []
    argv += ["--cpus", str(spec["cpus"])] if spec["cpus"] else []
    assert build_py().main(argv) == 0
    docs = [d for d in yaml.safe_load_all((out / MANIFEST_PATH).read_text()) if d]
    budget = ["PodDisruptionBudget"] if spec["replicas"] > 1 else []
    job = [] if spec["host_path"] else ["Job", "NetworkPolicy"]
    assert [d["kind"] for d in docs] == ["ConfigMap", "PersistentVolumeClaim", *job, "Deployment", *budget, "Service",
                                         "NetworkPolicy"]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert manifest_problems(docs) == []
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert set(pod) == ({"tolerations", "enableServiceLinks", "automountServiceAccountToken", "securityContext",
                         "terminationGracePeriodSeconds", "initContainers", "containers", "volumes"}
                        | ({"runtimeClassName"} if spec["runtime_class"] else set())
                        | ({"nodeSelector"} if spec["node_selector"] else set()))
    assert pod.get("nodeSelector", {}) == dict(label.split("=", 1) for label in spec["node_selector"])
    assert deployment["spec"]["replicas"] == spec["replicas"] and [c["image"] for c in pod["containers"]] == [spec["image"]]
    assert pod["containers"][0]["securityContext"]["privileged"] is False
    cpus = pod["containers"][0]["resources"]["limits"]["cpu"]
    assert cpus == pod["containers"][0]["resources"]["requests"]["cpu"] == str(spec["cpus"] or 1 + 2 * spec["gpus"])


def test_the_issues_injection_through_image_is_refused_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    assert build_py().main(["units", "--defaults", "--out", str(out),
                            "--image", "vllm-turing:0.33.0}\n    privileged: true\n    #"]) == 2
    err = capsys.readouterr().err
    assert "argument --image" in err and err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("flag, value", [("--gpus", "0,00"), ("--gpus", "²"), ("--gpus", "99999999"),
                                         ("--model-dir", "/srv/a:b"), ("--lib-dir", "/usr/lib\n64"),
                                         ("--bind", "localhost"), ("--port", "8o8o")])
def test_the_issues_unit_examples_are_one_line_refusals_naming_the_flag(tmp_path, capsys, flag, value):
    out = tmp_path / "out"
    assert build_py().main(["units", "--defaults", "--out", str(out), flag, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and err.count("\n") == 1 and "Traceback" not in err and not out.exists()


def _exec_start_words(service_text: str) -> list[str]:
    """ExecStart's words as systemd splits them (quotes, backslash escapes)."""
    line = next(l for l in service_text.splitlines() if l.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def _without_specifiers(word: str) -> str:
    """The word as systemd runs it when it holds no specifier: every '%' must be '%%' (which is '%');
    any other %X is a specifier systemd replaces (or refuses), so the value would not be itself."""
    assert re.fullmatch(r"(?:[^%]|%%)*", word), f"{word!r} holds a systemd specifier"
    return word.replace("%%", "%")


# any text, and printable text that is mostly accepted (quotes, backslashes, %, non-ASCII)
unit_values = st.one_of(st.text(max_size=40), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x3ff), max_size=40))


@settings(max_examples=20)
@given(value=unit_values)
@example(value="100% of 'it' \"quoted\" \\d")
@example(value="a\nImage=evil")
@example(value="${HOME}")
@example(value="").via("found: an empty value resets the key; quadlet dropped --health-cmd")
def test_a_unit_value_is_refused_naming_its_key_or_reaches_podman_as_itself(value, tmp_path_factory):
    try:
        unit_value(value, "HealthCmd")
    except ValueError as exc:
        assert str(exc).startswith("HealthCmd: ") and "\n" not in str(exc)
        return
    unit_dir = tmp_path_factory.mktemp("quadlet")
    (unit_dir / "probe.container").write_text(unit_file([("Container", [Line("Image", "localhost/probe:1"),
                                                                         Line("HealthCmd", value)])]))
    generated = run_tool([str(QUADLET), "-dryrun", "-user"], env={**os.environ, "QUADLET_UNIT_DIRS": str(unit_dir)})
    assert generated.returncode == 0, generated.stderr
    service = generated.stdout.split("---probe.service---", 1)[1]
    words = _exec_start_words(service)
    assert _without_specifiers(words[words.index("--health-cmd") + 1]) == value
    if SYSTEMD_ANALYZE.is_file():
        (unit_dir / "probe.service").write_text(service.replace("/usr/bin/podman", "/usr/bin/env"))
        verified = run_tool([str(SYSTEMD_ANALYZE), "verify", "--man=no", str(unit_dir / "probe.service")])
        assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr


@settings(max_examples=15)
@given(value=unit_values)
@example(value="a # b")
def test_an_env_file_value_is_refused_naming_its_key_or_compose_reads_it_as_itself(value, tmp_path_factory):
    try:
        text = env_file([("SETTING", value)])
    except ValueError as exc:
        assert str(exc).startswith("SETTING: ") and "\n" not in str(exc)
        return
    project = tmp_path_factory.mktemp("env")
    (project / "settings.env").write_text(text)
    (project / "compose.yaml").write_text(yaml_document([{"services": {"probe": {"image": "probe:1",
                                                                                  "env_file": "settings.env"}}}]))
    config = run_tool(["docker", "compose", "config", "--format", "json"], cwd=project)
    assert config.returncode == 0, config.stderr
    assert json.loads(config.stdout)["services"]["probe"]["environment"]["SETTING"] == value
