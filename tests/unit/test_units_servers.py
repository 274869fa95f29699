"""Several servers on one host from several env files (`build.py units --env-file A --env-file B`):
the plan (names, ports, fractions) as a pure function, and the rendered compose, Quadlet and
Kubernetes files; refusals are one line, exit 2, with nothing written."""
from __future__ import annotations

import pathlib

import pytest
import yaml
from hypothesis import event, example, given, strategies as st

from buildtool.units.servers import CARD_BUDGET, MIN_FRACTION, ModelSize, ServerInput, distinct_slugs, plan_servers
from door.problem import UsageError
from entrypoint.settings import parse_settings
from tests.support.build_py import build_py
from tests.support.deploy_units import interpolate_defaults, parse_unit
from tests.support.model_files import write_model_dir

LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "hidden_size": 512, "max_position_embeddings": 8192}


def server(source: str, *, fraction: float | None = None, weights: int | None = 2**30, gpus=(0,), port=8000,
           served: str | None = None) -> ServerInput:
    env = {"MODEL": "/models/m", **({"GPU_MEMORY_UTILIZATION": str(fraction)} if fraction is not None else {}),
           **({"SERVED_MODEL_NAME": served} if served else {})}
    size = ModelSize(weights, 4096, 4096) if weights is not None else None
    return ServerInput(source, parse_settings(env), tuple(gpus), port, size, "" if size else "no config.json")


def gpu_sums(planned) -> dict[int, float]:
    sums: dict[int, float] = {}
    for p in planned:
        for gpu in p.input.gpus:
            sums[gpu] = sums.get(gpu, 0) + p.fraction
    return sums


def test_two_files_that_set_nothing_get_distinct_names_volumes_and_a_bigger_share_for_the_bigger_model():
    planned = plan_servers([server("conf/chat.env", weights=6 * 2**30), server("conf/embed.env", weights=2**29, port=8001)])
    names = [p.values.name for p in planned]
    assert len(set(names)) == 2 and len({p.values.volume_prefix for p in planned}) == 2
    served = [dict(p.values.settings)["SERVED_MODEL_NAME"] for p in planned]
    assert len(set(served)) == 2
    chat, embed = (p.fraction for p in planned)
    assert chat > embed >= MIN_FRACTION and chat + embed <= CARD_BUDGET


def test_same_named_files_in_two_folders_still_get_distinct_names():
    assert len(set(distinct_slugs(["a/chat.env", "b/chat.env", "c/embed.env"]))) == 3


def test_an_explicit_fraction_is_kept_and_the_other_gets_what_is_left():
    planned = plan_servers([server("a.env", fraction=0.3), server("b.env", port=8001)])
    assert [p.fraction for p in planned] == [0.3, pytest.approx(CARD_BUDGET - 0.3)]


def test_an_over_committed_gpu_is_refused_naming_both_files():
    with pytest.raises(UsageError) as refusal:
        plan_servers([server("a.env", fraction=0.6), server("b.env", fraction=0.5, port=8001)])
    assert "a.env" in str(refusal.value) and "b.env" in str(refusal.value) and "GPU 0" in str(refusal.value)
    assert "\n" not in str(refusal.value)


def test_servers_on_different_gpus_do_not_share_a_budget():
    planned = plan_servers([server("a.env", fraction=0.9), server("b.env", fraction=0.9, gpus=(1,), port=8001)])
    assert gpu_sums(planned) == {0: 0.9, 1: 0.9}


@pytest.mark.parametrize("first, second", [("a", "a"), (None, "a")])
def test_colliding_served_names_are_refused(first, second):
    """An explicit name that meets another (given or defaulted to the file's name); two defaulted
    names meet only where the units' names do, which buildtool/units/namespace.py refuses."""
    with pytest.raises(UsageError, match="a.env and b.env both use the served model name a; set a distinct "
                                        "SERVED_MODEL_NAME in b.env"):
        plan_servers([server("a.env", served=first), server("b.env", served=second, port=8001)])


def test_a_model_that_cannot_be_sized_needs_an_explicit_fraction():
    with pytest.raises(UsageError, match="b.env: GPU_MEMORY_UTILIZATION is unset"):
        plan_servers([server("a.env"), server("b.env", weights=None, port=8001)])
    assert plan_servers([server("a.env"), server("b.env", weights=None, fraction=0.2, port=8001)])


@given(st.lists(st.tuples(st.one_of(st.none(), st.floats(0.01, 1.0)), st.integers(1, 2**36),
                          st.sets(st.integers(0, 2), min_size=1)), min_size=2, max_size=5))
@example([(None, 1, {0}), (None, 2**36, {0})])  # a tiny model beside a huge one: below MIN_FRACTION
@example([(0.9, 1, {0}), (None, 1, {0, 1})])
def test_a_plan_never_over_commits_a_gpu(rows):
    servers = [server(f"s{i}.env", fraction=None if f is None else round(f, 2), weights=w, gpus=sorted(g), port=8000 + i)
               for i, (f, w, g) in enumerate(rows)]
    try:
        planned = plan_servers(servers)
    except UsageError as refusal:
        assert "\n" not in str(refusal) and ".env" in str(refusal)
        return
    assert all(total <= CARD_BUDGET + 1e-9 for total in gpu_sums(planned).values())
    assert all(MIN_FRACTION <= p.fraction <= 1 for p in planned)


# ---- build.py units --env-file ... ----

@pytest.fixture
def two_models(tmp_path):
    models = tmp_path / "models"
    write_model_dir(models / "chat", LLAMA, elements=2**20)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "chat.env").write_text("MODEL=/models/chat\nMAX_MODEL_LEN=4096\n")
    (conf / "embed.env").write_text("MODEL=/models/embed\nGPU_MEMORY_UTILIZATION=0.2\n")
    return models, conf / "chat.env", conf / "embed.env"


def units(out: pathlib.Path, *args: str) -> int:
    return build_py().main(["units", "--out", str(out), "--defaults", *args])


def test_two_env_files_give_two_services_in_compose_quadlet_and_kubernetes(tmp_path, two_models):
    models, chat, embed = two_models
    out = tmp_path / "out"
    common = ("--model-dir", str(models), "--env-file", str(chat), "--env-file", str(embed))
    assert units(out, *common) == 0
    everything = yaml.safe_load(interpolate_defaults((out / "compose.yaml").read_text()))["services"]
    services = {name: s for name, s in everything.items() if "profiles" not in s}
    assert set(services) == {"chat", "embed"}
    fetches = {name: s for name, s in everything.items() if s.get("profiles") == ["fetch"]}
    assert {name: s["env_file"] for name, s in fetches.items()} == {
        "chat-fetch": "quadlet/vllm-turing-chat.env", "embed-fetch": "quadlet/vllm-turing-embed.env"}
    assert [s["depends_on"] for s in services.values()] == [
        {f"{name}-fetch": {"condition": "service_completed_successfully", "required": False}} for name in services]
    assert [s["ports"][0].split(":")[1] for s in services.values()] == ["8000", "8001"]
    volumes = [{v for v in s["volumes"] if isinstance(v, str)} for s in services.values()]
    assert not volumes[0] & volumes[1]
    shares = [float(s["environment"]["GPU_MEMORY_UTILIZATION"]) for s in services.values()]
    assert shares[1] == 0.2 and sum(shares) <= CARD_BUDGET
    toolkit = yaml.safe_load((out / "compose.toolkit.yaml").read_text().replace("!reset", "").replace("!override", ""))
    assert set(toolkit["services"]) == {"chat", "embed"}
    for name, env in (("chat", chat), ("embed", embed)):
        unit = parse_unit((out / f"quadlet/vllm-turing-{name}.container").read_text())["Container"]
        assert unit["ContainerName"] == [f"vllm-turing-{name}"] and unit["EnvironmentFile"] == [f"vllm-turing-{name}.env"]
        assert (out / f"quadlet/vllm-turing-{name}.env").read_text() == env.read_text()
    assert units(out, "--kubernetes", *common) == 2  # the embedding model is not here to size its pod's memory
    assert units(out, "--kubernetes", "--weights-gib", "1", *common) == 0
    docs = list(yaml.safe_load_all((out / "kubernetes/base/vllm-turing.yaml").read_text()))
    deployments = [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"]
    assert deployments == ["vllm-turing-chat", "vllm-turing-embed"]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Job"] == ["vllm-turing-chat-fetch", "vllm-turing-embed-fetch"]
    selectors = [d["spec"]["selector"]["matchLabels"] for d in docs if d["kind"] == "Deployment"]
    assert selectors[0] != selectors[1]


@pytest.mark.parametrize("extra, named", [
    (("--port", "8000", "--port", "8000"), "port 8000"),
    (("--port", "1", "--port", "2", "--port", "3"), "--port given 3 times"),
    (("--port", "65535"), "past 65535"),
])
def test_colliding_or_miscounted_ports_are_refused_and_nothing_is_written(tmp_path, two_models, capsys, extra, named):
    models, chat, embed = two_models
    out = tmp_path / "out"
    assert units(out, "--model-dir", str(models), "--env-file", str(chat), "--env-file", str(embed), *extra) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1
    assert not out.exists() or not any(out.iterdir())


def test_an_over_committed_card_is_refused_before_anything_is_written(tmp_path, two_models, capsys):
    models, chat, embed = two_models
    chat.write_text("MODEL=/models/chat\nGPU_MEMORY_UTILIZATION=0.9\n")
    out = tmp_path / "out"
    assert units(out, "--model-dir", str(models), "--env-file", str(chat), "--env-file", str(embed)) == 2
    assert "over-committed" in capsys.readouterr().err and not (out / "compose.yaml").exists()


def test_an_unsized_model_without_a_fraction_is_refused_in_one_line(tmp_path, two_models, capsys):
    models, chat, embed = two_models
    embed.write_text("MODEL=/models/embed\n")
    assert units(tmp_path / "out", "--model-dir", str(models), "--env-file", str(chat), "--env-file", str(embed)) == 2
    err = capsys.readouterr().err
    assert f"{embed}: GPU_MEMORY_UTILIZATION is unset" in err and err.count("\n") == 1


def test_a_bad_setting_in_an_env_file_is_refused_naming_the_file(tmp_path, two_models, capsys):
    models, chat, embed = two_models
    embed.write_text("MODEL=/models/embed\nGPU_MEMORY_UTILIZATION=2\n")
    assert units(tmp_path / "out", "--model-dir", str(models), "--env-file", str(chat), "--env-file", str(embed)) == 2
    err = capsys.readouterr().err
    assert str(embed) in err and "GPU_MEMORY_UTILIZATION" in err and "Traceback" not in err


def test_one_env_file_renders_exactly_the_single_server_units_with_its_settings(tmp_path, two_models):
    models, chat, _ = two_models
    assert units(tmp_path / "plain", "--model-dir", str(models)) == 0
    assert units(tmp_path / "one", "--model-dir", str(models), "--env-file", str(chat)) == 0
    for name in ("compose.yaml", "compose.toolkit.yaml", "quadlet/vllm-turing.container"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "plain" / name).read_text()
    assert (tmp_path / "one/quadlet/vllm-turing.env").read_text() == chat.read_text()


SETTING_VALUES = {
    "MODEL": st.sampled_from(["/models/chat", "/models/missing", "/models", "org/hub-model", "/models/../etc", ""]),
    "GPU_MEMORY_UTILIZATION": st.one_of(st.sampled_from(["0.1", "0.5", "0.9", "1", "0", "2", "nan", ""]),
                                        st.text(max_size=8)),
    "SERVED_MODEL_NAME": st.one_of(st.sampled_from(["chat", "a b", "x:y", "${X}", "'q'", ""]), st.text(max_size=12)),
    "MAX_MODEL_LEN": st.sampled_from(["4096", "1", "99999999999", "x", ""]),
    "MAX_NUM_SEQS": st.sampled_from(["8", "65536", "0", ""]),
    "KV_CACHE_DTYPE": st.sampled_from(["fp8", "auto", "int4", ""]),
}
SETTING_VALUES["MODEL"] = st.sampled_from(["/models/chat"] * 4 + ["/models/missing", "/models", "org/hub-model", ""])
SETTING_VALUES["GPU_MEMORY_UTILIZATION"] = st.one_of(st.sampled_from(["0.1", "0.3", "0.5", "0.9"]),
                                                     SETTING_VALUES["GPU_MEMORY_UTILIZATION"])
env_files = st.lists(st.fixed_dictionaries({"MODEL": SETTING_VALUES["MODEL"]},
                                           optional={k: v for k, v in SETTING_VALUES.items() if k != "MODEL"}),
                     min_size=2, max_size=3)


@given(files=env_files, names=st.lists(st.sampled_from(["chat", "Chat", "a.b", "-", "x" * 60, "émbed"]),
                                       min_size=3, max_size=3))
@example(files=[{"MODEL": "/models/chat"}, {"MODEL": "/models/chat"}], names=["chat", "Chat", "x"])
@example(files=[{"MODEL": "/models/chat", "SERVED_MODEL_NAME": "a\u2028b"}, {"MODEL": "/models/missing",
                                                                             "GPU_MEMORY_UTILIZATION": "0.1"}],
         names=["chat", "embed", "x"])
def test_any_env_files_render_within_the_budget_or_are_refused_in_one_line(tmp_path_factory, files, names):
    root = tmp_path_factory.mktemp("host")
    write_model_dir(root / "models" / "chat", LLAMA, elements=2**10)
    args = ["--model-dir", str(root / "models")]
    for i, (settings, name) in enumerate(zip(files, names)):
        folder = root / f"conf{i}"
        folder.mkdir()
        (folder / f"{name}.env").write_text("".join(f"{key}={value}\n" for key, value in settings.items()
                                                    if "\n" not in value and "\r" not in value))
        args += ["--env-file", str(folder / f"{name}.env")]
    out = root / "out"
    import contextlib
    import io
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = units(out, *args)
    assert code in (0, 2), err.getvalue()
    event(f"exit {code}")
    if code == 2:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()
        assert not out.exists() or not any(out.iterdir())
        return
    services = {name: service for name, service in
                yaml.safe_load(interpolate_defaults((out / "compose.yaml").read_text()))["services"].items()
                if "profiles" not in service}  # the servers, not their fetch steps
    shares = [float(service["environment"]["GPU_MEMORY_UTILIZATION"]) for service in services.values()]
    assert len(services) == len(files) and sum(shares) <= CARD_BUDGET + 1e-9
