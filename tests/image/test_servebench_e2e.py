"""bench/serve_sweep end to end: the real `vllm bench serve` of the image against a STAND-IN
streaming OpenAI server (no GPU here), a cell whose requests all fail, an interrupted
sweep resumed, and the report on the JSON it produced.

Run against an existing image with `--image REF` (or VLLM_TURING_TEST_IMAGE=REF); any
image with vLLM 0.33.0 works, e.g. vllm-turing-base:0.33.0.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tooling.servebench import results
from tooling.servebench.sweep_runs import Sweep, runs
from tests.support.openai_standin_streaming import StreamingCompletionsStandIn
from tests.support.word_tokenizer import write_word_tokenizer
from tests import REPO

SERVE = REPO / "bench" / "serve_sweep"
# in=200 plus 8 output tokens exceeds the stand-in's 100-token context: that cell fails
SWEEP = Sweep(concurrencies=(1, 2), input_lens=(16, 200), output_len=8, repeats=2, prompts_per_stream=2)
SWEEP_ARGS = ["--concurrency", "1,2", "--input-len", "16,200", "--output-len", "8", "--repeats", "2",
              "--prompts-per-stream", "2"]
MAX_MODEL_LEN = 100


def serve_cmd(image, tokenizer, url, out, *extra):
    return [sys.executable, str(SERVE), "run", "--image", image, "--tokenizer", str(tokenizer), "--base-url", url,
            "--out", str(out), "--ready-timeout", "10", *extra]


def env():
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def session_of(stdout: str) -> str:
    return re.search(r"\(session ([0-9a-f]+)\)", stdout).group(1)


def salted_runs(standin, session):
    """Run names whose requests reached the stand-in under this session's salts."""
    return {c.cache_salt.split("-", 1)[1] for c in standin.completions if c.cache_salt.startswith(session + "-")}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    folder = write_word_tokenizer(tmp_path_factory.mktemp("tokenizer"))
    for path in (folder, *folder.iterdir()):   # the container runs as this user, but keep it readable
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def interruptible() -> None:
    """In the sweep's process before it starts: SIGINT as at a terminal. A test run started in the
    background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python then never
    raises KeyboardInterrupt, so the interrupt this module sends would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def sweep(image, tokenizer, tmp_path_factory):
    """Start a sweep, interrupt it after its first complete run, resume it to the end. The stand-in
    holds every request after the warm-up's and the first run's salts until the interrupt has been
    sent, so the sweep cannot finish first, however slow or fast the machine."""
    out = tmp_path_factory.mktemp("sweep") / "standin"
    with StreamingCompletionsStandIn(max_model_len=MAX_MODEL_LEN, token_interval_s=0.004,
                                     hold_after_salts=2) as standin:
        first = subprocess.Popen(serve_cmd(image, tokenizer, standin.url, out, *SWEEP_ARGS),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                                 preexec_fn=interruptible)
        deadline = time.monotonic() + 300
        while not list((out / results.RUNS).glob("*.json")) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        first.send_signal(signal.SIGINT)
        first_out, first_err = first.communicate(timeout=120)
        standin.release()
        done_before = {p.stem for p in (out / results.RUNS).glob("*.json")}
        session1 = session_of(first_out)
        leftover = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=vllm-bench-{session1}"],
                                  capture_output=True, text=True).stdout.split()
        for _ in range(20):   # --rm removal of a killed container is asynchronous
            if not leftover:
                break
            time.sleep(0.5)
            leftover = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=vllm-bench-{session1}"],
                                      capture_output=True, text=True).stdout.split()
        resumed = subprocess.run(serve_cmd(image, tokenizer, standin.url, out, *SWEEP_ARGS, "--warmup-prompts", "0"),
                                 capture_output=True, text=True, env=env(), timeout=1200)
    return {"out": out, "standin": standin, "first": (first.returncode, first_out, first_err),
            "done_before": done_before, "leftover": leftover, "session1": session1,
            "resumed": resumed, "session2": session_of(resumed.stdout)}


def test_interrupted_sweep_keeps_complete_runs_and_leaves_no_container(sweep):
    rc, stdout, stderr = sweep["first"]
    assert rc == 130, stderr
    assert "run the same command to resume" in stderr and "Traceback" not in stderr
    assert len(sweep["done_before"]) == 1  # the first run, and nothing the held second run could finish
    assert sweep["leftover"] == []


def test_resumed_sweep_runs_only_what_was_missing(sweep):
    resumed, standin = sweep["resumed"], sweep["standin"]
    # exit 1: the in=200 cell had failed requests
    assert resumed.returncode == 1, resumed.stderr
    assert f"{len(sweep['done_before'])} done" in resumed.stdout
    all_names = {r.name for r in runs(SWEEP)}
    assert salted_runs(standin, sweep["session2"]) == all_names - sweep["done_before"]
    assert {p.stem for p in (sweep["out"] / results.RUNS).glob("*.json")} == all_names
    assert results.pending_runs(sweep["out"], runs(SWEEP)) == []
    assert list((sweep["out"] / results.PARTIAL).iterdir()) == []


def test_every_run_used_its_seed_and_sized_prompts_with_the_tokenizer(sweep):
    for run in runs(SWEEP):
        saved = json.loads(results.run_path(sweep["out"], run).read_text())
        assert saved["seed"] == str(run.seed) and saved["max_concurrency"] == run.concurrency
        if run.input_len == 16:
            assert (saved["completed"], saved["failed"]) == (run.num_prompts, 0)
            assert saved["total_input_tokens"] == 16 * run.num_prompts
            assert saved["total_output_tokens"] == 8 * run.num_prompts
            assert saved["median_tpot_ms"] > 0
    served = [c for c in sweep["standin"].completions if c.status == 200]
    assert served and all(c.prompt_tokens == 16 and c.max_tokens == 8 for c in served)


def test_failing_cell_is_recorded_not_lost(sweep):
    refused = [c for c in sweep["standin"].completions if c.status == 400]
    assert refused and all(c.prompt_tokens + c.max_tokens > MAX_MODEL_LEN for c in refused)
    for run in runs(SWEEP):
        if run.input_len == 200:
            saved = json.loads(results.run_path(sweep["out"], run).read_text())
            assert (saved["completed"], saved["failed"]) == (0, run.num_prompts)


def test_no_request_could_be_served_from_the_prefix_cache(sweep):
    standin = sweep["standin"]
    assert standin.cache_hits == 0
    salts = {c.cache_salt for c in standin.completions}
    assert None not in salts
    # warm-up, then one salt per run and invocation
    assert f"{sweep['session1']}-warmup" in salts


def test_report_shows_the_seed_study_table(sweep):
    done = subprocess.run([sys.executable, str(SERVE), "report", str(sweep["out"]), "--ceiling", "500"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| c | input | total tok/s | per-stream tok/s | TTFT ms | failed |" in lines
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[:2]): line
            for line in lines if re.match(r"\| \d+ \| \d+ \|", line)}
    assert set(rows) == {("1", "16"), ("2", "16"), ("1", "200"), ("2", "200")}
    assert rows[("1", "16")].endswith("| 0/4 |") and rows[("2", "200")].endswith("| 8/8 |")
    assert re.search(r"\| \d+\.\d \(\d+\.\d–\d+\.\d\) \|", rows[("1", "16")])   # mean (low–high) of 2 repeats
    assert "— | — | — | 4/4 |" in rows[("1", "200")]
    assert re.search(r"\| standin \| 16 \| .* \| 500\.0 \| \d+\.\d% \|", done.stdout)


def test_two_endpoints_get_the_same_prompts_under_different_salts(image, tokenizer, tmp_path):
    args = ["--concurrency", "1", "--input-len", "16", "--output-len", "4", "--repeats", "1",
            "--prompts-per-stream", "3", "--warmup-prompts", "0"]
    sent = {}
    for label in ("A", "B"):
        with StreamingCompletionsStandIn(max_model_len=MAX_MODEL_LEN) as standin:
            done = subprocess.run(serve_cmd(image, tokenizer, standin.url, tmp_path / label, "--label", label, *args),
                                  capture_output=True, text=True, env=env(), timeout=600)
            assert done.returncode == 0, done.stdout + done.stderr
            sent[label] = standin.completions
    assert sorted(c.prompt for c in sent["A"]) == sorted(c.prompt for c in sent["B"])
    assert len({c.prompt for c in sent["A"]}) == 3
    assert {c.cache_salt for c in sent["A"]}.isdisjoint({c.cache_salt for c in sent["B"]})
    ab = subprocess.run([sys.executable, str(SERVE), "report", str(tmp_path / "A"), str(tmp_path / "B")],
                        capture_output=True, text=True)
    assert ab.returncode == 0, ab.stderr
    assert "| c | input | A | B | B vs A |" in ab.stdout and "### failed requests" in ab.stdout
