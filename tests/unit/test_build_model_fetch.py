"""`build.py model fetch`: the command line typed by the fetch's own parsers, and the `docker run` of
the image's fetch it becomes (models folder at the units' mount, the token by name or as a mounted
file, never its value)."""
import dataclasses
import io
import subprocess
import sys

from hypothesis import given, strategies as st

from buildtool.model_fetch import CONTAINER_HF_HOME, ENV_IMAGE, TOKEN_MOUNT, docker_argv, fetch_run
from buildtool.units.spec import DEFAULT_IMAGE, MODEL_MOUNT
from tests.support.build_py import build_py
from tests import REPO



def argv_of(*words, env_names=frozenset()):
    return docker_argv(fetch_run(build_py().parse(["model", "fetch", *words]), uid=1000, gid=1000), set(env_names))


def test_the_fetch_runs_in_the_image_with_the_models_folder_at_the_units_mount(tmp_path):
    argv = argv_of("org/m@v1", "--model-dir", str(tmp_path), "--gpu", "sm75")
    assert argv == ["docker", "run", "--rm", "--user", "1000:1000", "-e", f"HF_HOME={CONTAINER_HF_HOME}",
                    "-v", f"{tmp_path}:{MODEL_MOUNT}", DEFAULT_IMAGE, "fetch", "org/m@v1",
                    "--models-dir", MODEL_MOUNT, "--gpu", "sm75"]


def test_without_a_named_gpu_the_host_gpus_are_given_to_judge_on():
    argv = argv_of("org/m", "--name", "m2")
    assert argv[argv.index("--gpus") + 1] == "all"
    assert argv[argv.index(DEFAULT_IMAGE):] == [DEFAULT_IMAGE, "fetch", "org/m@main", "--models-dir", MODEL_MOUNT,
                                                "--name", "m2"]


def test_the_image_is_compose_yamls_image_variable_where_it_is_set_and_image_wins(monkeypatch):
    monkeypatch.setenv(ENV_IMAGE, "registry.example/vllm-turing:mine")
    def image(*words):
        argv = argv_of("org/m", "--gpu", "t4", *words)
        return argv[argv.index("fetch") - 1]
    assert image() == "registry.example/vllm-turing:mine"
    assert image("--image", "other:1") == "other:1"
    monkeypatch.setenv(ENV_IMAGE, "")
    assert image() == DEFAULT_IMAGE


def test_a_terminal_gets_the_progress_bars_and_a_pipe_does_not(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe, whatever runs the tests
    run = fetch_run(build_py().parse(["model", "fetch", "org/m"]))
    assert "-t" not in docker_argv(run, set())
    assert "-t" in docker_argv(dataclasses.replace(run, terminal=True), set())


def test_a_drafter_is_fetched_as_one():
    assert argv_of("org/d", "--drafter", "--gpu", "sm86")[-3:] == ["--gpu", "sm86", "--drafter"]


def test_the_token_goes_by_name_or_as_a_mounted_file_never_as_a_value(tmp_path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text("hf_secretvalue")
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue")
    argv = argv_of("org/m", "--token-file", str(token_file), env_names={"HF_TOKEN", "HF_ENDPOINT", "PATH"})
    assert not any("hf_secretvalue" in word for word in argv)
    assert ["-e", "HF_TOKEN"] == argv[argv.index("HF_TOKEN") - 1:argv.index("HF_TOKEN") + 1]
    assert "-e" == argv[argv.index("HF_ENDPOINT") - 1] and "PATH" not in argv
    assert f"{token_file}:{TOKEN_MOUNT}:ro" in argv and f"HF_TOKEN_PATH={TOKEN_MOUNT}" in argv


@given(st.lists(st.text(max_size=30), max_size=4))
def test_any_words_are_a_run_or_one_line_naming_the_argument(words):
    try:
        argv_of(*words)
    except SystemExit as exit_:  # --help
        assert exit_.code == 0 and {"-h", "--help"} & set(words)
    except Exception as error:  # the parser's one-line refusal (build.py prints it and exits 2)
        assert type(error).__name__ == "UsageError" and "\n" not in str(error)


def test_a_bad_repository_is_refused_in_one_line_with_exit_2():
    run = subprocess.run([sys.executable, "build.py", "model", "fetch", "org/m@bad rev"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "REVISION" in run.stderr


def test_an_absent_local_image_is_refused_before_docker_asks_docker_hub_for_it():
    from buildtool.model_fetch import absent_image

    refusal = absent_image("vllm-turing:0.33.0", present=False)
    assert "--image vllm-turing:0.33.0 is not on this host" in str(refusal) and "python3 build.py" in str(refusal)
    assert absent_image("vllm-turing:0.33.0", present=True) is None
    assert absent_image("ghcr.io/org/vllm-turing:0.33.0", present=False) is None  # docker pulls it
