"""Sweep definition, per-run seeds and the `vllm bench serve` command line."""
import json
import subprocess
import sys

import pytest

from tooling.servebench import vllm_bench_argv
from door.problem import UsageError
from tooling.servebench.sweep_runs import Sweep, derive_seed, runs
from tests.support import wire_failures
from tests.support.openai_standin_streaming import salt_problem
from tests import REPO



def test_seed_study_sweep_has_one_distinct_seed_per_cell_and_repeat():
    planned = runs(Sweep())
    assert len(planned) == 4 * 2 * 3
    assert len({r.seed for r in planned}) == len(planned)
    assert len({(r.concurrency, r.input_len, r.repeat) for r in planned}) == len(planned)
    # repeats interleave: every cell once before any cell a second time
    assert [r.repeat for r in planned[:8]] == [0] * 8


def test_seeds_depend_only_on_the_definition_and_the_run():
    again = runs(Sweep())
    assert [r.seed for r in runs(Sweep())] == [r.seed for r in again]
    assert {r.seed for r in runs(Sweep(base_seed=1))}.isdisjoint({r.seed for r in again})
    # adding a concurrency leaves the seeds of the runs both sweeps share untouched
    wider = {(r.concurrency, r.input_len, r.repeat): r.seed for r in runs(Sweep(concurrencies=(1, 2, 4, 8, 16)))}
    assert all(wider[(r.concurrency, r.input_len, r.repeat)] == r.seed for r in again)


def test_derived_seed_fits_numpy_and_differs_by_any_coordinate():
    seeds = {derive_seed(0, "random", 512, 128, c, k) for c in (1, 4) for k in range(3)}
    assert len(seeds) == 6 and all(0 <= s < 2**31 for s in seeds)


def test_prompt_counts():
    assert [r.num_prompts for r in runs(Sweep(concurrencies=(1, 4), input_lens=(512,), repeats=1))] == [8, 32]
    assert {r.num_prompts for r in runs(Sweep(num_prompts=1000, concurrencies=(32,)))} == {1000}


def test_sharegpt_cells_have_no_input_length():
    sweep = Sweep(dataset="sharegpt", dataset_file="sg.json", concurrencies=(32,), output_len=None,
                  num_prompts=1000, repeats=1)
    (run,) = runs(sweep)
    assert run.input_len is None and run.name == "c32-sharegpt-outds-r0"


@pytest.mark.parametrize("kwargs, word", [
    ({"concurrencies": (0, 4)}, "concurrencies"),
    ({"input_lens": ()}, "input lengths"),
    ({"dataset": "sonnet"}, "dataset"),
    ({"dataset": "sharegpt"}, "dataset file"),
    ({"output_len": None}, "output length"),
    ({"repeats": 0}, "repeats"),
])
def test_bad_definitions_are_refused(kwargs, word):
    with pytest.raises(UsageError, match=word):
        Sweep(**kwargs)


def test_definition_round_trips_through_json():
    sweep = Sweep(concurrencies=(1, 2), input_lens=(16,), base_seed=7)
    assert Sweep.from_dict(json.loads(json.dumps(sweep.to_dict()))) == sweep
    assert Sweep(repeats=2).differences(Sweep()) == ["repeats"]


def argv_for(tmp_path, tokenizer, sweep=Sweep(), dataset=None, env=None):
    run = runs(sweep)[0]
    target = vllm_bench_argv.Target(base_url="http://127.0.0.1:8000", model="m", tokenizer=tokenizer, image="img:1")
    return run, vllm_bench_argv.docker_argv(sweep=sweep, run=run, target=target, results_dir=tmp_path,
                                    partial_name=".partial/x.json", salt=vllm_bench_argv.cache_salt("abcd", run.name),
                                    container_name="n", env=env or {}, user="1000:1000", dataset_path=dataset)


def test_command_runs_vllm_bench_serve_from_the_image_with_the_runs_seed_and_salt(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    run, argv = argv_for(tmp_path, str(tok), env={"HF_TOKEN": "secret"})
    assert argv[:2] == ["docker", "run"] and argv[argv.index("--entrypoint") + 1] == "vllm"
    assert argv[argv.index("--network") + 1] == "host"
    image_at = argv.index("img:1")
    assert argv[image_at + 1: image_at + 3] == ["bench", "serve"]
    assert f"{tok}:/tokenizer:ro" in argv and argv[argv.index("--tokenizer") + 1] == "/tokenizer"
    assert argv[argv.index("--seed") + 1] == str(run.seed)
    salt = json.loads(argv[argv.index("--extra-body") + 1])["cache_salt"]
    assert salt_problem(salt) is None and run.name in salt
    for flag, value in (("--random-prefix-len", "0"), ("--ready-check-timeout-sec", "0"), ("--num-warmups", "0"),
                        ("--max-concurrency", str(run.concurrency)), ("--random-input-len", str(run.input_len))):
        assert argv[argv.index(flag) + 1] == value
    assert "--save-result" in argv and "--save-detailed" in argv
    assert "secret" not in " ".join(argv) and argv[argv.index("HF_TOKEN") - 1] == "-e"


def test_hugging_face_tokenizer_id_is_passed_not_mounted(tmp_path):
    _, argv = argv_for(tmp_path, "google/gemma-4-e4b-it")
    assert argv[argv.index("--tokenizer") + 1] == "google/gemma-4-e4b-it"
    assert not any(a.endswith(":/tokenizer:ro") for a in argv)


def test_sharegpt_command_mounts_the_file(tmp_path):
    data = tmp_path / "sg.json"
    data.write_text("[]")
    sweep = Sweep(dataset="sharegpt", dataset_file="sg.json", concurrencies=(32,), num_prompts=1000)
    _, argv = argv_for(tmp_path, "tok-id", sweep=sweep, dataset=data)
    assert f"{data}:/data/sg.json:ro" in argv
    assert argv[argv.index("--dataset-path") + 1] == "/data/sg.json"
    assert argv[argv.index("--sharegpt-output-len") + 1] == "128" and "--ignore-eos" in argv


def serve(*args):
    return subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), *map(str, args)],
                          capture_output=True, text=True)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    for args in (["run", "--out", tmp_path, "--concurrency", "1,x"],
                 ["run", "--out", tmp_path, "--repeats", "0", "--dry-run"],
                 ["report", tmp_path]):
        done = serve(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9"])
def test_cli_a_ready_timeout_no_timer_can_wait_is_one_line_and_exit_2(tmp_path, value):
    done = serve("depth", "--out", tmp_path, "--depths", "64", "--ready-timeout", value)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"--ready-timeout: '{value}': expected seconds from 0 (one try) to 604800 (a week)" in done.stderr


def test_cli_unreachable_endpoint_is_a_failed_check(tmp_path):
    url = wire_failures.refused_url()
    done = serve("run", "--out", tmp_path / "s", "--base-url", url, "--ready-timeout", "0")
    assert done.returncode == 1
    assert done.stderr.startswith(f"bench/serve_sweep: GET /v1/models: connection refused: nothing listens on "
                                  f"{url.removeprefix('http://')}") and "Traceback" not in done.stderr
    assert not (tmp_path / "s").exists()


def test_dry_run_lists_every_run_with_its_seed(tmp_path):
    done = serve("run", "--out", tmp_path, "--dry-run", "--concurrency", "1,2", "--input-len", "16", "--repeats", "2")
    assert done.returncode == 0, done.stderr
    expected = runs(Sweep(concurrencies=(1, 2), input_lens=(16,), repeats=2))
    lines = done.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"{r.name} seed {r.seed}" for r in expected]


def test_an_interrupt_before_the_container_exists_kills_it_once_it_does():
    # The `docker run` client (here a real process) ends only when its container is killed, and
    # the container exists only from the third kill on: the first two find nothing. Before, one
    # kill was sent and the sweep then waited on the client for ever.
    from tooling.servebench.driver import stop_container

    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    kills = []

    def kill_standin():
        kills.append(1)
        if len(kills) == 3:
            client.terminate()

    stop_container(client, kill_standin)
    assert len(kills) == 3 and client.returncode is not None


def test_a_client_that_never_ends_is_killed_after_its_tries():
    from tooling.servebench.driver import stop_container

    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    stop_container(client, lambda: None, tries=2)
    assert client.returncode == -9
