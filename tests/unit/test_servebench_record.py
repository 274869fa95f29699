"""Benchmark records from `vllm bench serve` result JSON and from vLLM's /metrics text, the
memory figure's meaning, and records side by side."""
import json
import subprocess
import sys
import time

import pytest

from tooling.servebench import driver, memory, prom, record
from door.problem import Problem, UsageError
from tests import REPO

# vLLM 0.33.0's TIME_TO_FIRST_TOKEN_BUCKETS (vllm/v1/metrics/buckets.py), the bounds its /metrics shows
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
LABELS = 'engine="0",model_name="gemma-4-e4b-it"'


def histogram(name, bounds, observations, doc):
    lines = [f"# HELP {name} {doc}", f"# TYPE {name} histogram"]
    for le in (*bounds, "+Inf"):
        n = sum(1 for o in observations if le == "+Inf" or o <= le)
        lines.append(f'{name}_bucket{{engine="0",le="{le}",model_name="gemma-4-e4b-it"}} {float(n)}')
    lines += [f"{name}_count{{{LABELS}}} {float(len(observations))}", f"{name}_sum{{{LABELS}}} {float(sum(observations))}",
              f"# HELP {name.replace('_seconds', '_seconds_created')} {doc}",
              f"{name}_created{{{LABELS}}} 1.7644952e+09"]
    return lines


def vllm_metrics(*, running=0, waiting=0, kv=0.0, preemptions=0, prompt_tokens=0, generation_tokens=0,
                 stop=0, length=0, ttfts=(), tpots=(), utilisation="0.85"):
    """/metrics as vLLM 0.33.0 serves it (prometheus_client's exposition: sorted labels,
    counters with _total and _created, cumulative buckets, an info gauge), with process metrics."""
    lines = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 12734.0',
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        "process_resident_memory_bytes 1.288192e+09",
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{LABELS}}} {float(running)}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{LABELS}}} {float(waiting)}",
        f'vllm:num_requests_waiting_by_reason{{engine="0",model_name="gemma-4-e4b-it",reason="capacity"}} {float(waiting)}',
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} {kv}",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{LABELS}}} {float(preemptions)}",
        f"vllm:num_preemptions_created{{{LABELS}}} 1.7644952e+09",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{LABELS}}} {float(prompt_tokens)}",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{LABELS}}} {float(generation_tokens)}",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="gemma-4-e4b-it"}} {float(stop)}',
        f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="gemma-4-e4b-it"}} {float(length)}',
        f'vllm:request_success_total{{engine="0",finished_reason="abort",model_name="gemma-4-e4b-it"}} 0.0',
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",'
        f'enable_prefix_caching="True",engine="0",gpu_memory_utilization="{utilisation}",'
        'kv_cache_memory_bytes="None",num_cpu_blocks="None",num_gpu_blocks="10836",'
        'prefix_caching_hash_algo="sha256",sliding_window="None"} 1.0',
    ]
    lines += histogram("vllm:time_to_first_token_seconds", TTFT_BOUNDS, ttfts, "Histogram of time to first token in seconds.")
    lines += histogram("vllm:request_time_per_output_token_seconds", TPOT_BOUNDS, tpots,
                       "Histogram of time_per_output_token_seconds per request.")
    return "\n".join(lines) + "\n"


def test_metrics_text_parses_sums_series_and_reads_info_labels():
    snap = prom.Snapshot.of(vllm_metrics(running=2, waiting=1, kv=0.97, stop=3, length=5))
    assert (snap.total(prom.RUNNING), snap.total(prom.WAITING), snap.total(prom.KV_USAGE)) == (2, 1, 0.97)
    assert snap.total(prom.REQUEST_SUCCESS) == 8           # stop + length + abort series
    info = snap.labels(prom.CACHE_CONFIG)
    assert info["gpu_memory_utilization"] == "0.85" and info["num_gpu_blocks"] == "10836"
    assert snap.total("process_resident_memory_bytes") == 1.288192e9


def test_metrics_errors_name_what_is_missing():
    with pytest.raises(Problem, match="vllm:num_requests_running"):
        prom.Snapshot.of("process_resident_memory_bytes 1.0\n").total(prom.RUNNING)
    with pytest.raises(Problem, match="line 2"):
        prom.parse("# HELP x y\n<html>not metrics</html>\n")


def test_histogram_median_is_prometheus_histogram_quantile():
    # 2 at or below 0.1 s, 6 at or below 0.25 s, 8 in all: rank 4 lies in (0.1, 0.25]
    assert prom.quantile(0.5, [(0.1, 2.0), (0.25, 6.0), (float("inf"), 8.0)]) == pytest.approx(0.175)
    assert prom.quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert prom.quantile(0.5, [(0.1, 0.0), (float("inf"), 3.0)]) == 0.1   # in +Inf: the highest finite bound


WORKLOAD = record.Workload("sharegpt", "ShareGPT_V3_unfiltered_cleaned_split.json", None, None, 32, 1000, 0, 900.0)


def bench_result(**over):
    """A `vllm bench serve --save-result` JSON (vLLM 0.33.0 keys) of a finished ShareGPT run."""
    data = {"date": "20261130-101500", "endpoint_type": "openai", "backend": "openai", "label": None,
            "model_id": "gemma-4-e4b-it", "tokenizer_id": "/tokenizer", "num_prompts": 1000,
            "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 32, "duration": 400.0,
            "completed": 998, "failed": 2, "total_input_tokens": 220000, "total_output_tokens": 196000,
            "request_throughput": 2.495, "request_goodput": None, "output_throughput": 490.0,
            "total_token_throughput": 1040.0, "max_output_tokens_per_s": 640.0, "max_concurrent_requests": 32,
            "mean_ttft_ms": 310.2, "median_ttft_ms": 250.5, "std_ttft_ms": 80.1, "p99_ttft_ms": 900.3,
            "mean_tpot_ms": 61.0, "median_tpot_ms": 58.25, "std_tpot_ms": 9.0, "p99_tpot_ms": 90.0,
            "median_itl_ms": 55.0, "median_e2el_ms": 12000.0, "seed": "123"}
    return {**data, **over}


def test_record_from_a_finished_run():
    rec = record.from_bench_result(bench_result(), label="QAT", model="gemma-4-e4b-it", workload=WORKLOAD,
                                   readiness_s=131.4, peak_memory_bytes=int(13.5 * 2**30),
                                   memory_meaning=record.memory_meaning("gpu", {"gpu_memory_utilization": "0.85"}))
    assert rec.prefill_tok_s == 550.0 and rec.decode_tok_s == 490.0      # 220000 / 400 s
    assert (rec.completed, rec.failed, rec.stopped_at_cap) == (998, 2, False)
    text = record.render([rec])
    for row in ("| prefill tok/s | 550.0 |", "| decode tok/s | 490.0 |", "| median TTFT ms | 250 |",
                "| median TPOT ms | 58.2 |", "| request throughput req/s | 2.50 |", "| completed requests | 998/1000 |",
                "| failed requests | 2 |", "| time to readiness s | 131 |", "| peak memory | 13.50 GiB |",
                "| run | complete in 400 s |"):
        assert row in text
    assert "vLLM KV reservation at utilisation 0.85, not the checkpoint" in text
    assert "ShareGPT (ShareGPT_V3_unfiltered_cleaned_split.json), output lengths from the dataset, concurrency 32, " \
           "1000 prompts, seed 0, capped at 15 min" in text
    assert record.Record.from_dict(json.loads(rec.to_json())) == rec


def test_record_of_a_run_stopped_at_its_cap_comes_from_the_server_counters():
    before = prom.Snapshot.of(vllm_metrics(prompt_tokens=1000, generation_tokens=500, stop=4, ttfts=[0.05] * 4,
                                           tpots=[0.02] * 4))
    # in 900 s: 600 requests more, 4 of 6 new TTFTs at or below 0.25 s, all new TPOTs in (0.05, 0.075]
    after = prom.Snapshot.of(vllm_metrics(prompt_tokens=1000 + 135000, generation_tokens=500 + 90000, stop=4 + 150,
                                          length=450, ttfts=[0.05] * 4 + [0.2] * 4 + [0.6] * 2,
                                          tpots=[0.02] * 4 + [0.06] * 600))
    rec = record.from_server_counters(before, after, 900.0, label="bf16", model="m", workload=WORKLOAD,
                                      readiness_s=None, peak_memory_bytes=None,
                                      memory_meaning=record.memory_meaning(None, {}))
    assert (rec.completed, rec.failed, rec.stopped_at_cap) == (600, None, True)
    assert (rec.prefill_tok_s, rec.decode_tok_s) == (150.0, 100.0)
    # TTFT: rank 3 of 6 new, 4 in (0.1, 0.25]: 0.1 + 0.15 * 3/4 s
    assert rec.median_ttft_ms == pytest.approx(212.5)
    assert rec.median_tpot_ms == pytest.approx(62.5)      # 0.05 + 0.025 * 300/600 s
    text = record.render([rec])
    assert "| run | stopped at the 900 s cap after 600 of 1000 requests completed (900 s under load) |" in text
    assert "| failed requests | — |" in text and "| time to readiness s | — |" in text
    assert "server's /metrics" in text and "not sampled" in text


def test_two_records_side_by_side_and_unlike_workloads_refused(tmp_path):
    a = record.from_bench_result(bench_result(), label="QAT", model="qat", workload=WORKLOAD, readiness_s=120.0,
                                 peak_memory_bytes=2**33, memory_meaning="m")
    b = record.from_bench_result(bench_result(output_throughput=245.0), label="bf16", model="bf16", workload=WORKLOAD,
                                 readiness_s=200.0, peak_memory_bytes=2**34, memory_meaning="m")
    text = record.render([a, b])
    assert "|  | QAT | bf16 | bf16 vs QAT |" in text
    assert "| decode tok/s | 490.0 | 245.0 | -50.0% |" in text
    assert "| peak memory | 8.00 GiB | 16.00 GiB | +100.0% |" in text
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "record.json").write_text(a.to_json())
    (tmp_path / "b.json").write_text(b.to_json())
    done = serve("compare", tmp_path / "a", tmp_path / "b.json", "--output", tmp_path / "ab.md")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ab.md").read_text() == done.stdout == text
    assert (tmp_path / "ab.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "ab.png" in done.stderr
    other = record.Record.from_dict({**json.loads(b.to_json()),
                                     "workload": {**json.loads(b.to_json())["workload"], "concurrency": 16}})
    (tmp_path / "c.json").write_text(other.to_json())
    done = serve("compare", tmp_path / "a", tmp_path / "c.json")
    assert done.returncode == 2 and "concurrency" in done.stderr and len(done.stderr.splitlines()) == 1


def test_compare_refuses_a_file_that_is_not_a_record(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps(bench_result()))
    done = serve("compare", tmp_path / "x.json")
    assert done.returncode == 2 and "bench/serve_sweep record" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(UsageError):
        record.Record.from_dict({"format": 1, "label": "x"})


def serve(*args):
    return subprocess.run([sys.executable, str(REPO / "bench" / "serve_sweep"), *map(str, args)],
                          capture_output=True, text=True)


def test_memory_meaning_names_what_was_measured():
    assert "utilisation 0.9" in record.memory_meaning("gpu", {"gpu_memory_utilization": "0.9"})
    assert "VLLM_CPU_KVCACHE_SPACE" in record.memory_meaning("container", {}, "docker stats of vllm")
    assert memory.docker_mem_bytes("1.5GiB / 31.2GiB") == int(1.5 * 2**30)
    assert memory.docker_mem_bytes("812.4MiB / 2GiB") == int(812.4 * 2**20)
    assert memory.docker_mem_bytes("-- / --") is None


def test_peak_sampler_keeps_the_highest_reading():
    readings = iter([3, 9, 4])
    sampler = memory.PeakSampler("container", "x", lambda: next(readings, None), interval_s=3600)
    with sampler:
        sampler.sample()
    assert sampler.peak == 9


def test_record_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    for args in (["record", "--out", tmp_path, "--dataset", "sharegpt", "--dataset-file", tmp_path / "none.json"],
                 ["record", "--out", tmp_path, "--cap-minutes", "0"],
                 ["record", "--out", tmp_path, "--dataset", "sharegpt"]):
        done = serve(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_run_past_its_cap_is_stopped(tmp_path):
    drv = driver.Driver.__new__(driver.Driver)
    began = time.monotonic()
    rc = drv.execute([sys.executable, "-c", "import time; time.sleep(120)"], "no-such-container-standin",
                     tmp_path / "log", cap_s=0.5)
    assert rc is None and time.monotonic() - began < 60
    assert drv.execute([sys.executable, "-c", "pass"], "unused", tmp_path / "log", cap_s=60) == 0


def test_a_client_tpot_below_a_decode_step_is_not_a_per_stream_rate():
    """vllm bench serve's TPOT of a burst-delivered stream is microseconds: not a decode step."""
    burst = record.from_bench_result(bench_result(median_tpot_ms=0.007), label="x", model="m", workload=WORKLOAD,
                                     readiness_s=None, peak_memory_bytes=None, memory_meaning="m",
                                     server_mean_tpot_ms=21.5)
    assert burst.median_tpot_ms is None and burst.server_mean_tpot_ms == 21.5
    text = record.render([burst])
    assert "| median TPOT ms | — |" in text and "| mean TPOT ms (server) | 21.5 |" in text


def test_a_run_against_a_stream_that_never_ends_stops_at_its_deadline_naming_url_and_flag(tmp_path):
    """`vllm bench serve` waits up to 6 h per request: a run whose stream never ends is stopped at
    --run-timeout, its partial result dropped, and the sweep ends in one line naming the endpoint."""
    from tooling.servebench import results, vllm_bench_argv
    from tooling.servebench.sweep_runs import Sweep, runs
    from tests.support import hostile_server as hostile
    from tests.support.slack import SCHEDULING_SLACK_S

    with hostile.HostileServer(hostile.endless_events()) as server:
        class StandinBenchDriver(driver.Driver):  # the container's client, reading the stream as aiohttp would
            def argv(self, run, partial, label):
                reader = f"import urllib.request\nfor line in urllib.request.urlopen({server.url!r} + '/v1/completions'): pass"
                return [sys.executable, "-c", reader], "no-such-container-standin"
        sweep = Sweep(concurrencies=(1,), input_lens=(16,), output_len=4, repeats=1, num_prompts=1)
        target = vllm_bench_argv.Target(base_url=server.url, model="m", tokenizer="m")
        drv = StandinBenchDriver(sweep, target, tmp_path, run_timeout_s=1.0)
        driver.prepare_folder(tmp_path, sweep, {"label": "x", "base_url": server.url, "model": "m", "image": "i"})
        (run,) = runs(sweep)
        (tmp_path / results.partial_name(run)).write_text("{}")
        began = time.monotonic()
        with pytest.raises(Problem) as stopped:
            drv.one(run)
        assert time.monotonic() - began < 1.0 + SCHEDULING_SLACK_S
        with pytest.raises(Problem, match="warm-up: .* did not finish within 1 s"):
            drv.warm_up(1)
    line = str(stopped.value)
    assert len(line.splitlines()) == 1 and server.url in line and "within 1 s" in line and "--run-timeout" in line
    assert not (tmp_path / results.partial_name(run)).exists()


def test_run_timeout_is_refused_in_one_line_when_not_a_positive_number(tmp_path):
    for value in ("0", "-5", "nan", "soon"):
        done = serve("run", "--out", tmp_path, "--run-timeout", value)
        assert done.returncode == 2 and "--run-timeout" in done.stderr, (value, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_start_command_that_never_returns_is_stopped_at_the_ready_timeout(tmp_path):
    from tooling.servebench import probes
    from tooling.servebench.sweep_runs import Sweep
    from tests.support.slack import SCHEDULING_SLACK_S

    job = probes.RecordJob(base_url="http://127.0.0.1:9", out=tmp_path, label="x", model=None, target_image="i",
                           tokenizer=None, hf_home=None, sweep=Sweep(), dataset_path=None, cap_s=None,
                           start=f"{sys.executable} -c 'import time; time.sleep(120)'", container=None,
                           ready_timeout=1.0)
    began = time.monotonic()
    with pytest.raises(Problem, match="did not return within 1 s") as stopped:
        probes.start_server(job)
    assert time.monotonic() - began < 1.0 + SCHEDULING_SLACK_S and "--start" in str(stopped.value)
