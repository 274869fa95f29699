"""Several units, one namespace (issue 60): `build.py units` with several env files refuses, before
anything is written, two owners of one name or port (servers, their fetch steps, Prometheus); an env
file is read once, through the door, by the rule compose and podman both honour; a value reaches the
server as the same bytes through compose, Quadlet and Kubernetes, as the real tools read them; a path
with a space is written in systemd's quoting, not refused."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings, strategies as st

from buildtool.units import envfile
from buildtool.units.namespace import Claim, refuse_clashes
from door.problem import UsageError
from tests.support.build_py import build_py
from tests.support.deploy_units import option_values, parse_unit, podman_environment

QUADLET = Path("/opt/vllm-turing-tools/bin/quadlet")
SYSTEMD_ANALYZE = Path("/usr/bin/systemd-analyze")
TOOLS_PATH = f"/opt/vllm-turing-tools/bin:{os.environ.get('PATH', '')}"
SETTINGS = "MODEL=/models/chat\nGPU_MEMORY_UTILIZATION=0.2\n"


def units(out: Path, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `build.py units --defaults --out OUT ...` run in this process."""
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = build_py().main(["units", "--out", str(out), "--defaults", *args])
    return code, err.getvalue()


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def env_files(root: Path, *names: str, text: str = SETTINGS) -> list[str]:
    args = []
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        args += ["--env-file", str(path)]
    return args


def refused_keeping(out: Path, args: list[str], good: list[str]) -> str:
    """Renders `good` into `out`, then `args`: refused (exit 2, one line) with `out` byte-identical."""
    assert units(out, *good)[0] == 0
    before = tree(out)
    code, err = units(out, *args)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert tree(out) == before
    return err


# ---- the namespace ----

def test_two_owners_of_one_name_are_refused_and_one_owner_may_share():
    refuse_clashes([Claim("volume", "chat-hf-cache", "chat.env", "server"),
                    Claim("volume", "chat-hf-cache", "chat.env", "fetch step")])
    with pytest.raises(UsageError, match=r"^a.env \(server\) and b.env \(fetch step\) both use the compose "
                                             r"service x; rename one of the env files"):
        refuse_clashes([Claim("compose service", "x", "a.env", "server"),
                        Claim("compose service", "x", "b.env", "fetch step")])


@pytest.mark.parametrize("names, says", [
    (("a/chat.env", "chat-1.env", "b/chat.env"), "a/chat.env (server) and {root}/chat-1.env (server) both use the "
                                                 "compose service chat-1"),
    (("chat.env", "chat-fetch.env"), "chat.env (fetch step) and {root}/chat-fetch.env (server) both use the "
                                     "compose service chat-fetch"),
    (("prometheus.env", "embed.env", "--monitoring"), "prometheus.env (server) and --monitoring (Prometheus) both "
                                                      "use the compose service prometheus"),
])
def test_the_issues_clashing_env_file_names_are_refused_naming_both_and_nothing_is_written(tmp_path, names, says):
    args = env_files(tmp_path, *(n for n in names if n.endswith(".env"))) + [n for n in names if n.startswith("--")]
    good = env_files(tmp_path / "good", "chat.env", "embed.env")
    err = refused_keeping(tmp_path / "out", ["--model-dir", str(tmp_path), *args], ["--model-dir", str(tmp_path), *good])
    assert says.format(root=tmp_path) in err and "rename one of the env files" in err


def test_the_second_server_and_prometheus_on_one_port_are_refused(tmp_path):
    args = ["--model-dir", str(tmp_path), *env_files(tmp_path, "chat.env", "embed.env"), "--monitoring"]
    err = refused_keeping(tmp_path / "out", [*args, "--port", "9089"], args)
    assert f"{tmp_path}/embed.env (server) and --monitoring (Prometheus) both use the port 9090" in err
    assert "--port" in err
    code, _ = units(tmp_path / "ok", *args, "--port", "9089", "--port", "9091")
    assert code == 0  # once per --env-file, around Prometheus's port
    err = refused_keeping(tmp_path / "one", ["--port", "9090", "--monitoring"], [])
    assert "(Prometheus) both use the port 9090" in err


def test_kubernetes_objects_of_one_kind_and_name_are_refused(tmp_path):
    args = ["--model-dir", str(tmp_path), "--kubernetes", "--weights-gib", "1"]
    err = refused_keeping(tmp_path / "out", [*args, *env_files(tmp_path, "chat.env", "chat-fetch.env")],
                          [*args, *env_files(tmp_path / "good", "chat.env", "embed.env")])
    assert "chat.env (fetch step) and" in err and "chat-fetch.env (server) both use the Kubernetes NetworkPolicy name " \
                                                  "vllm-turing-chat-fetch" in err


class _NoDuplicateKeys(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; this loader refuses them, to judge the written files."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        assert len(keys) == len(set(keys)), f"a key twice in one mapping: {keys}"
        return super().construct_mapping(node, deep=deep)


_NoDuplicateKeys.add_constructor("!reset", lambda loader, node: None)
_NoDuplicateKeys.add_constructor("!override", lambda loader, node: None)


@settings(max_examples=30)
@given(names=st.lists(st.sampled_from(["chat", "Chat", "chat-1", "chat_1", "chat-fetch", "chat-fetch-fetch", "fetch",
                                       "prometheus", "vllm", "a/chat", "b/chat", "c/chat-2"]), min_size=2, max_size=4),
       monitoring=st.booleans())
@example(names=["a/chat", "chat-1", "b/chat"], monitoring=False)
def test_any_env_file_names_render_distinct_units_or_are_refused_naming_two(tmp_path_factory, names, monitoring):
    root = tmp_path_factory.mktemp("names")
    args = [a for i, name in enumerate(names) for a in env_files(root / f"d{i}", f"{name}.env")]
    out = root / "out"
    code, err = units(out, "--model-dir", str(root), *args, *(["--monitoring"] if monitoring else []))
    if code == 2:
        assert err.count("\n") == 1 and err.count(".env") + err.count("--monitoring") >= 2 and not out.exists(), err
        return
    assert code == 0, err
    compose = yaml.load((out / "compose.yaml").read_text(), Loader=_NoDuplicateKeys)
    assert len([s for s in compose["services"].values() if "profiles" not in s]) == len(names)
    units_written = list((out / "quadlet").glob("*.container"))
    assert len(units_written) == 2 * len(names)
    names_given = [parse_unit(u.read_text())["Container"]["ContainerName"][0] for u in units_written]
    assert len(set(names_given)) == len(names_given)
    ports = [s["ports"][0] for s in compose["services"].values() if "ports" in s]
    assert len(set(ports)) == len(ports)


# ---- the env file: one parse, through the door ----

@pytest.mark.parametrize("content, says", [
    (b'SERVED_MODEL_NAME="chat #1"\n', "line 2: SERVED_MODEL_NAME='\"chat #1\"' starts with a quote"),
    (b"SERVED_MODEL_NAME='chat'\n", "starts with a quote"),
    (b"SERVED_MODEL_NAME=chat #1\n", "holds ' #'"),
    (b"SERVED_MODEL_NAME=$USER\n", "holds '$'"),
    (b"SERVED_MODEL_NAME=chat \n", "white space at an end"),
    (b"SERVED_MODEL_NAME =chat\n", "is not KEY=value"),
    (b"export SERVED_MODEL_NAME=chat\n", "is not KEY=value"),
    (b"MODEL=/models/other\n", "MODEL is given again (first on line 1)"),
    (b"SERVED_MODEL_NAME=\xff\n", "not UTF-8 text"),
    (b"SERVED_MODEL_NAME=chat\r\n", "CR (Windows) line ends"),
])
def test_what_compose_and_podman_read_differently_is_refused_naming_file_and_line(tmp_path, content, says):
    bad = tmp_path / "bad.env"
    bad.write_bytes(SETTINGS.encode()[:SETTINGS.index("\n") + 1] + content)
    good = env_files(tmp_path, "chat.env")
    err = refused_keeping(tmp_path / "out", ["--env-file", str(bad)], good)
    assert f"--env-file {bad}" in err and says in err, err


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize("make, says", [
    (_fifo, "a named pipe (FIFO), not a regular file"),
    (Path.mkdir, "a directory, not a regular file"),
    (lambda p: p.write_bytes(b"A=" + b"x" * envfile.ENV_FILE_CAP + b"\n"), "more than the 64 KiB"),
    (lambda p: p.write_bytes(envfile.BOM + SETTINGS.encode()), "byte-order mark"),
    (lambda p: p.write_bytes(b""), "is empty"),
    (lambda p: None, "does not exist"),
])
def test_an_env_file_that_is_no_regular_small_text_file_is_refused_without_blocking(tmp_path, make, says):
    bad = tmp_path / "bad.env"
    make(bad)
    good = env_files(tmp_path, "chat.env")
    for args in (["--env-file", str(bad)], ["--env-file", str(bad), *good]):
        err = refused_keeping(tmp_path / "out", args, good)
        assert err.startswith(f"build.py units: --env-file {bad}") and says in err, err


def test_the_env_file_kept_in_out_is_read_through_the_door_too(tmp_path):
    out = tmp_path / "out"
    assert units(out, "--kubernetes", "--weights-gib", "1")[0] == 0
    (out / "quadlet").mkdir()
    os.mkfifo(out / "quadlet/vllm-turing.env")
    before = tree(out)
    code, err = units(out, "--kubernetes", "--weights-gib", "1")
    assert code == 2 and "quadlet/vllm-turing.env is a named pipe (FIFO)" in err and tree(out) == before


def test_a_value_cannot_become_another_key_in_the_podman_command(tmp_path):
    """The issue's example: the whole line is SERVED_MODEL_NAME's value, in every format."""
    value = "chat VLLM_EXTRA_ARGS=--trust-remote-code"
    args = env_files(tmp_path, "chat.env", "embed.env")
    (tmp_path / "chat.env").write_text(SETTINGS + f"SERVED_MODEL_NAME={value}\n")
    out = tmp_path / "out"
    assert units(out, "--model-dir", str(tmp_path), *args)[0] == 0
    argv = _podman_argv(out / "quadlet", "vllm-turing-chat")
    assert [e for e in option_values(argv, "--env") if "SERVED_MODEL_NAME" in e or "EXTRA" in e] == [
        f"SERVED_MODEL_NAME={value}"]
    assert _compose(out)["services"]["chat"]["environment"]["SERVED_MODEL_NAME"] == value
    _verify(_quadlet(out / "quadlet"), tmp_path, "vllm-turing-chat", "vllm-turing-chat-fetch")


def _verify(generated: str, folder: Path, *names: str) -> list[str]:
    """`systemd-analyze verify` of the generated services (podman need not be here to judge their
    syntax): exit 0, and the lines it printed."""
    if not SYSTEMD_ANALYZE.is_file():
        return []
    for name in names:  # a server Requires its fetch step: both written, then each judged
        (folder / f"{name}.service").write_text(_service_text(generated, name).replace("/usr/bin/podman", "/usr/bin/env"))
    said = []
    for name in names:
        verified = _run([str(SYSTEMD_ANALYZE), "verify", "--man=no", str(folder / f"{name}.service")])
        assert verified.returncode == 0, verified.stderr
        said += [line for line in verified.stderr.splitlines() if line.strip()]
    return said


# ---- the same bytes through compose, Quadlet and Kubernetes ----

def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


def _quadlet(unit_dir: Path) -> str:
    done = _run([str(QUADLET), "-dryrun", "-user"], env={**os.environ, "QUADLET_UNIT_DIRS": str(unit_dir)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _service_text(generated: str, name: str) -> str:
    return generated.split(f"---{name}.service---", 1)[1].split("\n---", 1)[0]


def _exec_words(service: str) -> list[str]:
    """ExecStart's words as systemd reads them: quotes and backslashes (shlex's POSIX rules agree for
    printable text), then '%%' as '%' (a unit value holds no other specifier)."""
    line = next(l for l in service.splitlines() if l.startswith("ExecStart="))
    return [word.replace("%%", "%") for word in shlex.split(line[len("ExecStart="):])]


def _podman_argv(unit_dir: Path, name: str) -> list[str]:
    return _exec_words(_service_text(_quadlet(unit_dir), name))


def _compose(out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TURING_", "NVIDIA_LIB_DIR", "MODEL_DIR"))}
    done = _run(["docker", "compose", "config", "--format", "json"], cwd=out, env={**env, "PATH": TOOLS_PATH})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _kubernetes_environment(docs: list[dict], deployment: str) -> dict[str, str]:
    """A server container's environment as the kubelet builds it: envFrom's ConfigMap, then env."""
    maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
    pod = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment)
    container = pod["spec"]["template"]["spec"]["containers"][0]
    environment = {k: v for source in container.get("envFrom", []) for k, v in maps[source["configMapRef"]["name"]].items()}
    environment.update({item["name"]: item["value"] for item in container.get("env", [])})
    return environment


# what an env file value may hold: spaces, quotes inside, '#', '%', '=', backslashes, non-ASCII; the
# ones compose and podman would read differently are refused by the parse (checked below, cheaply)
env_values = st.text(st.sampled_from(list("aZ09 -_=#%:/.,'\"\\`{}[]@é€\t")) | st.characters(min_codepoint=0x20,
                                                                                            max_codepoint=0x2ff),
                     max_size=24)


@settings(max_examples=12, deadline=None)
@given(values=st.lists(env_values, min_size=1, max_size=8), served=env_values)
@example(values=['--override-generation-config {"temperature": 0.5}', "a#b", "100%", "x\\", "é € ü", "a = b"],
         served="chat VLLM_EXTRA_ARGS=--trust-remote-code")
@example(values=['"chat #1"', "chat #1", " lead", "$HOME"], served="chat #1")
def test_every_accepted_env_value_reaches_the_server_as_the_same_bytes_in_every_format(tmp_path_factory, values, served):
    accepted = {}
    for i, value in enumerate(values):
        if envfile.value_problem(value) is None:
            accepted[f"X_SETTING_{i}"] = value
        else:
            with pytest.raises(UsageError, match=rf"^e line 1: X_{i}="):
                envfile.parse(f"X_{i}={value}\n", "e")
    name = served if envfile.value_problem(served) is None and served.strip() else None
    root = tmp_path_factory.mktemp("values")
    (root / "chat.env").write_text(SETTINGS + "".join(f"{k}={v}\n" for k, v in accepted.items())
                                   + (f"SERVED_MODEL_NAME={name}\n" if name else ""))
    (root / "embed.env").write_text(SETTINGS)
    wanted = {**accepted, "SERVED_MODEL_NAME": name or "chat", "MODEL": "/models/chat"}
    args = ["--model-dir", str(root), "--env-file", str(root / "chat.env"), "--env-file", str(root / "embed.env")]
    code, err = units(root / "out", *args)
    assert code == 0, err
    code, err = units(root / "kube", "--kubernetes", "--weights-gib", "1", *args)
    assert code == 0, err

    compose = _compose(root / "out")["services"]["chat"]["environment"]
    quadlet = podman_environment(_podman_argv(root / "out/quadlet", "vllm-turing-chat"),
                                 lambda path: Path(path).read_text(encoding="utf-8"))
    docs = list(yaml.safe_load_all((root / "kube/kubernetes/base/vllm-turing.yaml").read_text()))
    kubernetes = _kubernetes_environment(docs, "vllm-turing-chat")
    for key, value in wanted.items():
        assert (compose[key], quadlet[key], kubernetes[key]) == (value, value, value), key


# ---- paths with a space ----

def test_paths_with_a_space_are_written_in_systemds_quoting_and_reach_podman_and_compose_as_given(tmp_path):
    models, libs, key = "/srv/my models", "/usr/lib/my drivers", "/etc/vllm key/api key"
    out = tmp_path / "out"
    code, err = units(out, "--model-dir", models, "--lib-dir", libs, "--api-key-file", key)
    assert code == 0, err
    unit = parse_unit((out / "quadlet/vllm-turing.container").read_text())
    libraries = ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1")
    assert unit["Unit"]["RequiresMountsFor"] == [*(f'"{libs}/{name}"' for name in libraries), f'"{models}"']
    assert parse_unit((out / "quadlet/vllm-turing-fetch.container").read_text())["Unit"]["RequiresMountsFor"] == [
        f'"{models}"']
    generated = _quadlet(out / "quadlet")
    argv = _exec_words(_service_text(generated, "vllm-turing"))
    assert f"{models}:/models:ro" in option_values(argv, "-v")
    assert f"{libs}/libcuda.so.1:/usr/local/nvidia/lib64/libcuda.so.1:ro" in option_values(argv, "-v")
    fetch = _exec_words(_service_text(generated, "vllm-turing-fetch"))
    assert f"{models}:/models" in option_values(fetch, "-v")
    service = _compose(out)["services"]["vllm"]
    assert {v["source"] for v in service["volumes"] if v["type"] == "bind"} >= {models, f"{libs}/libcuda.so.1"}
    assert shlex.quote(key) in (out / "quadlet/vllm-turing.container").read_text()
    assert units(tmp_path / "kube", "--kubernetes", "--weights-gib", "1", "--model-volume", "hostPath",
                 "--model-dir", models, "--api-key-file", key)[0] == 0
    manifest = (tmp_path / "kube/kubernetes/base/vllm-turing.yaml").read_text()
    create = next(line for line in manifest.splitlines() if "create secret generic vllm-api-key" in line)
    assert shlex.split(create.lstrip("# "))[-1] == f"--from-file=vllm-api-key={key}"
    pod = next(d for d in yaml.safe_load_all(manifest) if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert {"name": "models", "hostPath": {"path": models, "type": "Directory"}} in pod["volumes"]
    # Quadlet 5.4 writes its own RequiresMountsFor= unquoted (podman issue 21607, fixed upstream by PR 27385): systemd
    # ignores the words after the first space, which is all it says; ours names the whole path
    ignored = _verify(generated, tmp_path, "vllm-turing", "vllm-turing-fetch")
    assert all("RequiresMountsFor= path is not absolute, ignoring:" in line for line in ignored), ignored
    assert {line.rsplit(": ", 1)[1] for line in ignored} <= {
        "models", *(f"drivers/{name}" for name in libraries)}


def test_a_path_in_the_home_with_a_space_needs_no_mount_line(tmp_path):
    out = tmp_path / "out"
    assert units(out, "--model-dir", "~/my models")[0] == 0
    generated = _quadlet(out / "quadlet")
    argv = _exec_words(_service_text(generated, "vllm-turing"))
    assert "%h/my models:/models:ro" in option_values(argv, "-v")
    assert "RequiresMountsFor" not in (out / "quadlet/vllm-turing.container").read_text()
    assert _verify(generated, tmp_path, "vllm-turing", "vllm-turing-fetch") == []
