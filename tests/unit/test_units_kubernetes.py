"""`build.py units --kubernetes`: manifests from the UnitSpec, validated offline against the pinned
Kubernetes version's OpenAPI schemas (kubernetes-validate, strict) and the service's own policy;
`kubectl kustomize` over the shipped overlay; golden files for one and four replicas."""
from __future__ import annotations

import copy
import math
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from policy_guard.analyzers import pod_security
from policy_guard.models import PolicyLevel, Resource

from buildtool.units.compose import render_compose
from buildtool.units.envfile import parse as parse_env_file
from buildtool.units.kubernetes import GPU_RESOURCE, KUSTOMIZATION_PATH, MANIFEST_PATH, manifests, render_kubernetes, to_yaml
from buildtool.units.policy import manifest_problems
from buildtool.units.quadlet import render_env_file
from buildtool.units.spec import ClusterValues, HostValues, UnitSpec
from contract.layout import API_KEY_PATH, API_KEY_SECRET, ENV_API_KEY, ENV_API_KEY_FILE
from contract.pins import KUBERNETES_VERSION
from entrypoint.checks.memory import check_memory
from contract.verdict import Status
from door.problem import UsageError
from tests.support.build_py import build_py
from tests.support.deploy_units import interpolate_defaults, seconds, size_bytes
from tests.support.model_files import write_model_dir
from tests import REPO

GIB = 2**30
OVERLAY = REPO / "kubernetes/overlays/gke-t4"
# name -> (extra CLI arguments, the committed file it must equal). Regenerate with the command.
GOLDEN = {
    "one replica": ([], MANIFEST_PATH),
    "four replicas": (["--replicas", "4"], f"tests/unit/golden/replicas-4/{MANIFEST_PATH}"),
}
GOLDEN_WEIGHTS = ["--weights-gib", "10"]
ENV = parse_env_file(render_env_file(), "template")


def schema_errors(docs: list[dict]) -> list[str]:
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{doc['kind']}: {exc.message} at {'/'.join(map(str, exc.path))}")
    return errors


def load(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def deployment(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "Deployment")


def container(docs: list[dict]) -> dict:
    return deployment(docs)["spec"]["template"]["spec"]["containers"][0]


def generate(out: Path, *args: str) -> int:
    return build_py().main(["units", "--kubernetes", "--out", str(out), *args])


def spec(**cluster) -> UnitSpec:
    gpus = cluster.pop("gpus", 1)
    return UnitSpec(HostValues(gpu_indices=tuple(range(gpus)), model_dir="/srv/models"),
                    cluster=ClusterValues(**{"weight_bytes": 10 * GIB, **cluster}))


VARIANTS = {
    "default": spec(),
    "API key as a file": UnitSpec(HostValues(model_dir="/srv/models", api_key_file="key.txt"),
                                  cluster=ClusterValues(weight_bytes=10 * GIB)),
    "four replicas": spec(replicas=4),
    "hostPath model": spec(model_volume="hostPath"),
    "tensor-parallel pair, runtime class, GPU pool": spec(
        gpus=2, runtime_class="nvidia", node_selector=(("cloud.google.com/gke-accelerator", "nvidia-tesla-t4"),)),
}


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_files_are_exactly_what_the_generator_writes(tmp_path, name):
    extra, committed = GOLDEN[name]
    assert generate(tmp_path, *GOLDEN_WEIGHTS, *extra) == 0
    command = " ".join(["python3 build.py units --kubernetes", *GOLDEN_WEIGHTS, *extra,
                        "--out", str(Path(committed).parents[2]) if extra else "."])
    assert (REPO / committed).read_text() == (tmp_path / MANIFEST_PATH).read_text(), \
        f"{committed} differs from the generator: regenerate it with `{command}`"


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_files_validate_against_the_pinned_kubernetes_schemas(name):
    docs = load((REPO / GOLDEN[name][1]).read_text())
    budget = ["PodDisruptionBudget"] if deployment(docs)["spec"]["replicas"] > 1 else []
    assert [d["kind"] for d in docs] == ["ConfigMap", "PersistentVolumeClaim", "Job", "NetworkPolicy", "Deployment", *budget, "Service",
                                         "NetworkPolicy"]
    assert schema_errors(docs) == [] and manifest_problems(docs) == []


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_validates_and_its_yaml_reads_back_as_the_objects(name):
    objects = manifests(VARIANTS[name], ENV)
    assert load(to_yaml(objects)) == objects
    assert schema_errors(objects) == [] and manifest_problems(objects) == []


def test_the_shipped_overlay_builds_with_kubectl_kustomize_and_validates():
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in kustomize) is needed for this test: install kubectl 1.32"
    built = subprocess.run([kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    docs = load(built.stdout)
    assert schema_errors(docs) == [] and manifest_problems(docs) == [] and pod_security_violations(docs) == []
    pod = deployment(docs)["spec"]["template"]["spec"]
    assert deployment(docs)["spec"]["replicas"] == 4
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    # the overlay's settings merge into the ConfigMap the pods read, under its unchanged name
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config["data"]["DTYPE"] == "float16" and config["data"]["MODEL"] == ENV["MODEL"]
    assert pod["containers"][0]["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]


def test_replicas_and_gpus_map_to_the_deployment_and_the_gpu_limit():
    docs = manifests(spec(replicas=4, gpus=2), ENV)
    assert deployment(docs)["spec"]["replicas"] == 4
    assert container(docs)["resources"]["limits"][GPU_RESOURCE] == 2
    assert container(docs)["resources"]["requests"][GPU_RESOURCE] == 2
    pvc = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]  # four nodes mount one cache claim
    assert next(d for d in manifests(spec(), ENV) if d["kind"] == "PersistentVolumeClaim")[
        "spec"]["accessModes"] == ["ReadWriteOnce"]


def standin_cgroup(root: Path, limit: int, current: int) -> str:
    root.mkdir()
    (root / "memory.max").write_text(f"{limit}\n")
    (root / "memory.current").write_text(f"{current}\n")
    return str(root)


@pytest.mark.parametrize("weights_gib", [2.5, 10, 31])
def test_the_memory_limit_passes_the_entrypoints_memory_check_and_two_gib_less_would_not(tmp_path, weights_gib):
    weights = int(weights_gib * GIB)
    limits = container(manifests(spec(weight_bytes=weights), ENV))["resources"]["limits"]
    limit = size_bytes(limits["memory"].removesuffix("i"))
    meminfo = f"MemAvailable: {256 * 2**20} kB\nSwapFree: 0 kB\n"  # a big node: the cgroup limit decides
    preflight_use = 500 * 2**20
    inside = check_memory(weights, meminfo, standin_cgroup(tmp_path / "fits", limit, preflight_use))
    assert inside.status is Status.PASS, inside.message
    smaller = check_memory(weights, meminfo, standin_cgroup(tmp_path / "less", limit - 2 * GIB, preflight_use))
    assert smaller.status is not Status.PASS


def test_the_kubernetes_manifests_carry_what_compose_carries():
    unit_spec = spec()
    service = yaml.safe_load(interpolate_defaults(render_compose(unit_spec)))["services"]["vllm"]
    docs = manifests(unit_spec, ENV)
    main = container(docs)
    pod = deployment(docs)["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in main["env"] if "value" in e}
    # HOME: an emptyDir over the image's (the root is read-only); the secrets' files: always in the pods
    assert {k: v for k, v in env.items() if k not in ("HOME", ENV_API_KEY_FILE, "HF_TOKEN_PATH")} == \
        {k: v for k, v in service["environment"].items() if k != "NVIDIA_VISIBLE_DEVICES"}
    cache_mounts = {m["subPath"]: m["mountPath"] for m in main["volumeMounts"] if m["name"] == "cache"}
    assert cache_mounts == unit_spec.cache_volumes == \
        {v.split(":")[0]: v.split(":")[1] for v in service["volumes"] if isinstance(v, str)}
    # the preStop delay runs inside Kubernetes' grace: the server gets compose's grace after SIGTERM
    assert pod["terminationGracePeriodSeconds"] == seconds(service["stop_grace_period"]) + \
        main["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert main["livenessProbe"]["periodSeconds"] == seconds(service["healthcheck"]["interval"])
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]
    assert shm["medium"] == "Memory" and size_bytes(shm["sizeLimit"].removesuffix("i")) == size_bytes(service["shm_size"])
    # the startup probe waits at least as long as compose's start period, and systemd's start timeout
    startup = main["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= seconds(service["healthcheck"]["start_period"])
    assert ENV == {k: str(v) for k, v in docs[0]["data"].items()}
    assert not main["securityContext"]["privileged"]


@pytest.mark.parametrize("name", VARIANTS)
def test_no_secret_reaches_the_environment_not_even_by_reference(name):
    main = container(manifests(VARIANTS[name], ENV))
    assert not [e for e in main["env"] if "valueFrom" in e]
    assert {e["name"] for e in main["env"]}.isdisjoint({"HF_TOKEN", ENV_API_KEY})


# The negative cases: each one broken copy of valid manifests, and what must catch it.
def _break_probe_type(docs):
    probe = container(docs)["livenessProbe"]
    probe["httpGett"] = probe.pop("httpGet")


def _readiness_on_health_alone(docs):
    container(docs)["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}


def _drop_gpu_limit(docs):
    for side in ("limits", "requests"):
        del container(docs)["resources"][side][GPU_RESOURCE]


def _secret_in_env(docs):
    container(docs)["env"].append({"name": "HF_TOKEN_FALLBACK", "value": "hf_" + "a1B2" * 9})


def _secret_in_config_map(docs):
    docs[0]["data"]["OPENAI_API_KEY"] = "not-empty"


def _privileged(docs):
    container(docs)["securityContext"]["privileged"] = True


def _all_gpus_env(docs):
    container(docs)["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})


@pytest.mark.parametrize("breaks, schema_catches, policy_says", [
    (_break_probe_type, True, "livenessProbe is not an HTTP GET"),
    (_readiness_on_health_alone, False, "readinessProbe does not run `python3 -m entrypoint.ready`"),
    (_drop_gpu_limit, False, f"no {GPU_RESOURCE} limit"),
    (_secret_in_env, False, "HF_TOKEN_FALLBACK carries what looks like a token"),
    (_secret_in_config_map, False, "OPENAI_API_KEY is a secret given in plain text"),
    (_privileged, False, "privileged"),
    (_all_gpus_env, False, "NVIDIA_VISIBLE_DEVICES"),
])
def test_broken_manifests_fail_validation(breaks, schema_catches, policy_says):
    docs = copy.deepcopy(manifests(spec(), ENV))
    breaks(docs)
    assert bool(schema_errors(docs)) is schema_catches
    problems = manifest_problems(docs)
    assert len(problems) == 1 and policy_says in problems[0], problems


def test_ordinary_settings_named_like_tokens_are_not_secrets():
    docs = manifests(spec(), {**ENV, "TOKENIZER": "/models/tok", "MAX_NUM_BATCHED_TOKENS": "8192", "HF_TOKEN": ""})
    assert manifest_problems(docs) == []


@pytest.mark.parametrize("name, value, secret", [("HF_TOKEN", "hf_" + "Zx9" * 12, "vllm-turing-hf"),
                                                 ("VLLM_API_KEY", "sk-" + "Q7" * 16, "vllm-api-key")])
def test_a_secret_in_the_env_file_is_refused_naming_its_secret_unprinted_and_nothing_is_written(
        tmp_path, capsys, name, value, secret):
    env_file = tmp_path / "quadlet/vllm-turing.env"
    env_file.parent.mkdir()
    env_file.write_text(render_env_file() + f"{name}={value}\n")
    assert generate(tmp_path, *GOLDEN_WEIGHTS) == 2
    err = capsys.readouterr().err
    assert f"ConfigMap: {name} " in err and f"{name} in the Secret {secret}" in err
    assert value not in err and err.count("\n") == 1
    assert not (tmp_path / MANIFEST_PATH).exists()


def test_the_env_file_in_out_becomes_the_config_map(tmp_path):
    env_file = tmp_path / "quadlet/vllm-turing.env"
    env_file.parent.mkdir()
    env_file.write_text("# mine\nMODEL=/models/gemma-4-E4B-it\nDTYPE=float16\n")
    assert generate(tmp_path, *GOLDEN_WEIGHTS) == 0
    assert load((tmp_path / MANIFEST_PATH).read_text())[0]["data"] == {"MODEL": "/models/gemma-4-E4B-it",
                                                                      "DTYPE": "float16"}


def test_weights_from_a_model_directory_size_the_memory(tmp_path):
    weights = write_model_dir(tmp_path / "model", shards=2)
    assert generate(tmp_path / "out", "--weights-from", str(tmp_path / "model")) == 0
    limits = container(load((tmp_path / "out" / MANIFEST_PATH).read_text()))["resources"]["limits"]
    assert limits["memory"] == f"{math.ceil((2 * weights + 3 * GIB + GIB) / GIB)}Gi"


@pytest.mark.parametrize("args, says", [
    ([], "neither of --weights-gib and --weights-from"),
    (["--weights-gib", "4", "--weights-from", "/"], "both"),
    (["--weights-gib", "0"], "argument --weights-gib: '0'"),
    (["--weights-from", "/nonexistent/model"], "argument --weights-from: '/nonexistent/model': no such directory"),
    (["--weights-from", "/"], "no config.json"),
    (["--weights-gib", "4", "--replicas", "0"], "argument --replicas: '0'"),
    (["--weights-gib", "4", "--gpus", "two"], "argument --gpus: 'two'"),
    (["--weights-gib", "4", "--gpus", "0,1"], "--gpus: in a cluster the device plugin picks the GPUs"),
    (["--weights-gib", "4", "--node-selector", "pool"], "argument --node-selector: 'pool'"),
    (["--weights-gib", "4", "--model-volume", "hostPath"], "absolute path"),
])
def test_bad_input_is_refused_in_one_line(tmp_path, capsys, args, says):
    assert generate(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / MANIFEST_PATH).exists()


def test_a_malformed_env_file_line_is_named():
    with pytest.raises(UsageError, match="line 2"):
        parse_env_file("A=1\nexport B=2\n", "env")


# ---- the Restricted Pod Security Standard, judged by a packaged checker (k8s-policy-guard) ------

# Its rules beyond the standard's text: a read-only root filesystem and the service-account token
# are good practice it files under "restricted", but the Pod Security Standards do not require them
# (the standard's Restricted list: kubernetes.io/docs/concepts/security/pod-security-standards).
NOT_IN_THE_STANDARD = {"PG-PSS-018"}


def pod_security_violations(docs: list[dict]) -> list[str]:
    resources = [Resource(kind=d["kind"], name=d["metadata"]["name"], spec=d.get("spec") or {}, raw=d,
                          annotations=d["metadata"].get("annotations") or {}) for d in docs]
    return sorted(f"{v.rule_id}: {v.message}" for v in pod_security.analyze(resources)
                  if v.policy_level in (PolicyLevel.BASELINE, PolicyLevel.RESTRICTED)
                  and v.rule_id not in NOT_IN_THE_STANDARD)


@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "hostPath model"])
def test_the_pods_pass_the_restricted_pod_security_standard(name):
    assert pod_security_violations(manifests(VARIANTS[name], ENV)) == []


def test_the_committed_manifests_pass_the_restricted_standard():
    assert pod_security_violations(load((REPO / MANIFEST_PATH).read_text())) == []


def test_a_hostpath_model_is_baseline_only_and_the_render_says_so():
    assert "Baseline Pod Security Standard, not Restricted" in render_kubernetes(VARIANTS["hostPath model"], ENV)
    assert "Baseline" not in render_kubernetes(spec(), ENV)
    assert pod_security_violations(manifests(VARIANTS["hostPath model"], ENV)) == [
        "PG-PSS-005: Volume 'models' mounts hostPath '/srv/models'",
        "PG-PSS-016: Volume 'models' uses type 'hostPath' (not in restricted allow-list)"]


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
def test_the_restricted_fields_are_set_as_the_standard_names_them(kind):
    """The standard's Restricted list read field by field, so a checker's blind spot cannot pass it:
    the server's pod (its init container the fetch gate) and the fetch Job's."""
    docs = manifests(spec(), ENV)
    pod = next(d for d in docs if d["kind"] == kind)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0 and pod["securityContext"]["runAsGroup"] == 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"] + pod.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        assert not sc["capabilities"].get("add") and not sc.get("privileged")
        assert not any(p.get("hostPort") for p in c.get("ports", []))
    allowed = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
               "projected", "secret"}
    assert {next(k for k in v if k != "name") for v in pod["volumes"]} <= allowed
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))


def _no_run_as_non_root(docs):
    del deployment(docs)["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]
    del container(docs)["securityContext"]["runAsNonRoot"]
    del deployment(docs)["spec"]["template"]["spec"]["securityContext"]["runAsUser"]


def _escalation(docs):
    container(docs)["securityContext"]["allowPrivilegeEscalation"] = True


def _capabilities_kept(docs):
    del container(docs)["securityContext"]["capabilities"]


def _no_seccomp(docs):
    del deployment(docs)["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]


def _root_uid(docs):
    deployment(docs)["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 0


@pytest.mark.parametrize("breaks, rule", [(_no_run_as_non_root, "PG-PSS-009"), (_escalation, "PG-PSS-017"),
                                          (_capabilities_kept, "PG-PSS-008"), (_no_seccomp, "PG-PSS-011"),
                                          (_root_uid, "PG-PSS-010")])
def test_the_checker_catches_each_restricted_field_taken_away(breaks, rule):
    """Proves the empty verdicts above mean something: the checker finds each one planted."""
    docs = copy.deepcopy(manifests(spec(), ENV))
    breaks(docs)
    # one violation per container the break reaches (the server and its fetch gate share the pod's fields)
    assert {v.split(":")[0] for v in pod_security_violations(docs)} == {rule}


# ---- the network policy --------------------------------------------------------------------------

def test_the_network_policy_admits_only_the_namespaces_pods_on_the_server_port():
    docs = manifests(spec(), ENV)
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "vllm-turing")["spec"]
    assert policy["podSelector"]["matchLabels"] == deployment(docs)["spec"]["selector"]["matchLabels"]
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    # podSelector {} and no namespaceSelector: every pod of this namespace, nothing outside it
    assert rule["from"] == [{"podSelector": {}}]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert container(docs)["ports"][0]["name"] == "http"


def test_the_fetch_jobs_pod_admits_nothing_and_the_servers_policy_does_not_select_it():
    docs = manifests(spec(), ENV)
    job = next(d for d in docs if d["kind"] == "Job")
    job_labels = job["spec"]["template"]["metadata"]["labels"]
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == job["metadata"]["name"])
    assert policy["spec"] == {"podSelector": {"matchLabels": job_labels}, "policyTypes": ["Ingress"]}
    server = deployment(docs)["spec"]["selector"]["matchLabels"]
    assert not set(server.items()) <= set(job_labels.items())  # no Service or server policy reaches the Job


# ---- secrets: only references, only from Secrets ---------------------------------------------------

def test_the_api_key_is_a_required_file_and_the_hub_token_an_optional_one():
    docs = manifests(spec(), ENV)
    main, pod = container(docs), deployment(docs)["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in main["env"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    key = next(m for m in main["volumeMounts"] if m["mountPath"] == env[ENV_API_KEY_FILE] == API_KEY_PATH)
    # no Secret, no pod: /v1 is never served without the key
    assert volumes[key["name"]]["secret"] == {"secretName": API_KEY_SECRET, "defaultMode": 0o440}
    token_dir, token_file = env["HF_TOKEN_PATH"].rsplit("/", 1)
    token = next(m for m in main["volumeMounts"] if m["mountPath"] == token_dir)
    # a whole-directory mount of an optional Secret: without it the file is absent, the Hub asked anonymously
    assert "subPath" not in token and token["readOnly"] is True and token_file == "HF_TOKEN"
    assert volumes[token["name"]]["secret"] == {"secretName": "vllm-turing-hf", "defaultMode": 0o440, "optional": True}


def test_an_api_key_file_mounts_the_secret_as_a_file_named_by_api_key_file(tmp_path):
    docs = manifests(VARIANTS["API key as a file"], ENV)
    main, pod = container(docs), deployment(docs)["spec"]["template"]["spec"]
    env = {e["name"]: e for e in main["env"]}
    assert env[ENV_API_KEY_FILE]["value"] == API_KEY_PATH and ENV_API_KEY not in env
    mount = next(m for m in main["volumeMounts"] if m["mountPath"] == API_KEY_PATH)
    # a Secret volume is a directory: subPath makes the mount point the key's file itself
    assert mount["subPath"] == API_KEY_SECRET and mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == API_KEY_SECRET
    assert volume["secret"]["defaultMode"] == 0o440  # root and group 0 (the pod's gid) read it
    assert not any(d["kind"] == "Secret" for d in docs)  # the key itself is never in the manifests
    assert generate(tmp_path, *GOLDEN_WEIGHTS, "--api-key-file", "/etc/vllm-turing/key") == 0
    text = (tmp_path / MANIFEST_PATH).read_text()
    assert f"kubectl create secret generic {API_KEY_SECRET} --from-file={API_KEY_SECRET}=/etc/vllm-turing/key" in text


def test_the_pods_run_as_a_non_root_uid_of_group_0_with_a_writable_home():
    pod = deployment(manifests(spec(), ENV))["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"],
            pod["securityContext"]["fsGroup"]) == (10001, 0, 0)
    home = next(e["value"] for e in pod["containers"][0]["env"] if e["name"] == "HOME")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == home)
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert pod["automountServiceAccountToken"] is False


# ---- docs/fleet.md's path: --out elsewhere, then an overlay beside it ------------------------------

def test_out_elsewhere_writes_a_base_an_overlay_copied_beside_it_builds(tmp_path):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in kustomize) is needed for this test: install kubectl 1.32"
    fleet = tmp_path / "fleet"
    assert generate(fleet, *GOLDEN_WEIGHTS, "--replicas", "4") == 0
    assert (fleet / KUSTOMIZATION_PATH).read_text() == (REPO / KUSTOMIZATION_PATH).read_text()
    shutil.copytree(OVERLAY, fleet / "kubernetes/overlays/mine")
    built = subprocess.run([kubectl, "kustomize", str(fleet / "kubernetes/overlays/mine")],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    docs = load(built.stdout)
    assert schema_errors(docs) == [] and manifest_problems(docs) == [] and pod_security_violations(docs) == []


def fenced_yaml(doc: Path, first_line: str) -> str:
    """The ```yaml block of a doc that starts with `first_line`."""
    blocks = re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S)
    return next(b for b in blocks if b.startswith(first_line))


def test_fleet_docs_widening_patch_builds_and_admits_the_ingress_namespace(tmp_path):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in kustomize) is needed for this test: install kubectl 1.32"
    overlay = tmp_path / "kubernetes/overlays/mine"
    shutil.copytree(REPO / "kubernetes/base", tmp_path / "kubernetes/base")
    shutil.copytree(OVERLAY, overlay)
    patch = yaml.safe_load(fenced_yaml(REPO / "docs/fleet.md", "patches:"))["patches"]
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    kustomization["patches"] += patch
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    docs = load(built.stdout)
    assert schema_errors(docs) == []
    rules = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]["ingress"]
    assert rules[0] == {"from": [{"podSelector": {}}], "ports": [{"port": "http", "protocol": "TCP"}]}
    assert rules[1]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]


def test_fleet_docs_ingress_validates_and_routes_v1_to_the_service():
    ingress = yaml.safe_load(fenced_yaml(REPO / "docs/fleet.md", "apiVersion: networking.k8s.io/v1\nkind: Ingress"))
    assert schema_errors([ingress]) == []
    [path] = ingress["spec"]["rules"][0]["http"]["paths"]
    service = next(d for d in manifests(spec(), ENV) if d["kind"] == "Service")
    assert path["path"] == "/v1" and path["backend"]["service"]["name"] == service["metadata"]["name"]
    assert path["backend"]["service"]["port"]["name"] == service["spec"]["ports"][0]["name"]


# ---- checkov's restricted checks, field by field (tests/unit/test_units_checkov.py runs checkov) -----

def test_cpu_request_and_limit_are_sized_from_the_gpus_unless_given():
    one, pair = container(manifests(spec(), ENV)), container(manifests(spec(gpus=2), ENV))
    assert one["resources"]["requests"]["cpu"] == one["resources"]["limits"]["cpu"] == "3"
    assert pair["resources"]["requests"]["cpu"] == pair["resources"]["limits"]["cpu"] == "5"
    given = container(manifests(spec(cpus=12), ENV))["resources"]
    assert given["requests"]["cpu"] == given["limits"]["cpu"] == "12"


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "many", "513"])
def test_a_bad_cpu_count_is_refused_naming_the_flag(tmp_path, capsys, value):
    assert generate(tmp_path, *GOLDEN_WEIGHTS, "--cpus", value) == 2
    err = capsys.readouterr().err
    assert "--cpus" in err and f"{value!r}" in err and err.count("\n") == 1
    assert not (tmp_path / MANIFEST_PATH).exists()


def test_the_root_is_read_only_and_every_place_the_server_writes_is_a_writable_volume():
    """The server's write paths as the entrypoint derives them from the pod's environment (the settings
    the preflight's cache and disk checks probe), each under a mount that is not read-only."""
    from entrypoint.settings import parse_settings
    docs = manifests(spec(), ENV)
    main = container(docs)
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    settings = parse_settings({**ENV, **{e["name"]: e["value"] for e in main["env"]}})
    written = [settings.tmpdir, settings.triton_cache_dir, settings.vllm_cache_root, settings.hf_hub_cache,
               settings.cache_home, settings.cuda_cache_path, "/dev/shm",
               next(e["value"] for e in main["env"] if e["name"] == "HOME")]
    writable = [m["mountPath"] for m in main["volumeMounts"] if not m.get("readOnly")]
    for path in written:
        assert any(path == mount or path.startswith(mount + "/") for mount in writable), path
    read_only = {m["mountPath"] for m in main["volumeMounts"] if m.get("readOnly")}
    assert read_only == {"/models", API_KEY_PATH, settings.hf_token_path.rsplit("/", 1)[0]}


def test_more_than_one_replica_gets_a_disruption_budget_of_one_pod_over_the_same_pods():
    assert not [d for d in manifests(spec(), ENV) if d["kind"] == "PodDisruptionBudget"]
    docs = manifests(spec(replicas=4), ENV)
    [budget] = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert budget["spec"] == {"maxUnavailable": 1, "selector": deployment(docs)["spec"]["selector"]}


def test_readiness_asks_for_the_served_model_and_liveness_stays_on_health():
    main = container(manifests(spec(), ENV))
    assert main["readinessProbe"]["exec"]["command"] == ["python3", "-m", "entrypoint.ready"]
    assert main["livenessProbe"]["httpGet"]["path"] == main["startupProbe"]["httpGet"]["path"] == "/health"
    # the kubelet kills the probe at timeoutSeconds: the request gives up before it, with its own line
    from entrypoint.ready import REQUEST_TIMEOUT_S
    assert REQUEST_TIMEOUT_S < main["readinessProbe"]["timeoutSeconds"]
