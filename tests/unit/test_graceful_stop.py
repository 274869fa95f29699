"""The server's graceful stop (entrypoint/graceful_stop.py): which process it acts in, the HTTP
drain bound and its tie to the units' stop grace, the hand-over of the engine's death to open
requests on their own event loop, and the after-import hook, run in a fresh interpreter."""
import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest

from buildtool.vehicle import instructions, without_run_steps
from contract.layout import SERVER_HTTP_DRAIN_S, STOP_GRACE_S, in_install_dir
from entrypoint import graceful_stop
from entrypoint.settings import SERVER_CMD
from tests.unit.test_dockerfile_agreement import REPO


@pytest.mark.parametrize("argv", [
    ["python3", *SERVER_CMD[1:], "--model", "/models/m"],
    ["/usr/bin/python3", "-u", "-m", graceful_stop.SERVER_MODULE],
    ["python3", "/usr/local/bin/vllm", "serve", "/models/m"],
])
def test_the_server_process_is_recognised(argv):
    assert graceful_stop.is_server(argv)


@pytest.mark.parametrize("argv", [
    ["python3", "-m", "entrypoint"],
    ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"],
    ["python3", "-m", "patches.fitcheck", "--device", "sm75"],
    ["python3", "/usr/local/bin/vllm", "bench", "serve"],
    ["python3", "-m", "vllm.entrypoints.cli.main", "bench"],
    ["python3"],
    [],
])
def test_every_other_python_is_left_alone(argv):
    assert not graceful_stop.is_server(argv)


def test_the_drain_bound_sits_well_inside_the_units_stop_grace():
    # vLLM stops its engine first (seconds, measured); the drain comes after it.
    assert 0 < SERVER_HTTP_DRAIN_S <= STOP_GRACE_S / 2


def test_the_drain_bound_is_a_default_that_an_explicit_value_overrides():
    assert graceful_stop.with_drain_bound({"port": 8000}) == {"port": 8000,
                                                             "timeout_graceful_shutdown": SERVER_HTTP_DRAIN_S}
    assert graceful_stop.with_drain_bound({"timeout_graceful_shutdown": None})["timeout_graceful_shutdown"] \
        == SERVER_HTTP_DRAIN_S
    assert graceful_stop.with_drain_bound({"timeout_graceful_shutdown": 3}) == {"timeout_graceful_shutdown": 3}


class StandinOutputProcessor:
    """vLLM's OutputProcessor.propagate_error, as far as the hook uses it: one queue per request."""

    def __init__(self, requests):
        self.queues = {r: asyncio.Queue() for r in requests}
        self.thread = None

    def propagate_error(self, error):
        self.thread = threading.current_thread()
        for queue in self.queues.values():
            queue.put_nowait(error)


def test_open_requests_get_the_error_on_the_loop_even_when_shutdown_runs_in_another_thread():
    async def main():
        engine = type("StandinAsyncLLM", (), {})()
        engine.output_handler = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
        engine.output_processor = StandinOutputProcessor(["a", "b"])
        error = RuntimeError("engine gone")
        ended = await asyncio.get_running_loop().run_in_executor(
            None, graceful_stop.end_open_requests, engine, error)
        got = [await asyncio.wait_for(q.get(), 30) for q in engine.output_processor.queues.values()]
        engine.output_handler.cancel()
        return ended, got, engine.output_processor.thread

    ended, got, thread = asyncio.run(main())
    assert ended and [str(e) for e in got] == ["engine gone"] * 2
    assert thread is threading.main_thread()


def test_an_engine_that_never_served_has_nothing_to_end():
    assert not graceful_stop.end_open_requests(object(), RuntimeError())


HOOK_RUN = textwrap.dedent("""
    import sys, types
    from entrypoint import graceful_stop
    graceful_stop.HOOKS = {"standin_uvicorn_config": graceful_stop.patch_uvicorn_config}
    print(graceful_stop.install(sys.argv[1:]))
    import standin_uvicorn_config
    print(standin_uvicorn_config.Config(None).timeout, standin_uvicorn_config.Config(None, timeout_graceful_shutdown=2).timeout)
""")


@pytest.mark.parametrize("argv, expected", [
    (["python3", "-m", graceful_stop.SERVER_MODULE], ["True", f"{SERVER_HTTP_DRAIN_S} 2"]),
    (["python3", "-m", "entrypoint"], ["False", "None 2"]),
])
def test_the_hook_patches_a_module_right_after_its_import_in_the_server_only(tmp_path, argv, expected):
    (tmp_path / "standin_uvicorn_config.py").write_text(
        "class Config:\n    def __init__(self, app, timeout_graceful_shutdown=None):\n"
        "        self.timeout = timeout_graceful_shutdown\n")
    run = subprocess.run([sys.executable, "-c", HOOK_RUN, *argv], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={"PYTHONPATH": f"{REPO}:{tmp_path}"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == expected


def test_the_image_and_the_vehicle_ship_the_hook_as_sitecustomize():
    target = in_install_dir("sitecustomize.py")
    for dockerfile in ((REPO / "Dockerfile").read_text(), without_run_steps((REPO / "Dockerfile").read_text())):
        assert f"COPY entrypoint/sitecustomize.py {target}" in instructions(dockerfile)


DEATH_RUN = textwrap.dedent("""
    import sys, types
    from entrypoint import graceful_stop
    graceful_stop.HOOKS = {}
    graceful_stop.install(["python3", "-m", graceful_stop.SERVER_MODULE])
    class StandinAsyncLLM:
        errored = False
        def shutdown(self, timeout=None):
            self.errored = True  # as vLLM's own cleanup marks its engine dead
    graceful_stop.patch_async_llm(types.SimpleNamespace(AsyncLLM=StandinAsyncLLM, EngineDeadError=RuntimeError))
    engine = StandinAsyncLLM()
    engine.errored = sys.argv[1] == "dead"
    engine.shutdown()  # the launcher's (a stop), or the one in its finally (after a death)
    engine.shutdown()  # the finally's, after a stop
""")


@pytest.mark.parametrize("engine, code", [("dead", graceful_stop.ENGINE_DIED_EXIT), ("alive", 0)])
def test_the_server_exits_non_zero_when_its_engine_died_and_zero_after_a_stop(engine, code):
    run = subprocess.run([sys.executable, "-c", DEATH_RUN, engine], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert run.returncode == code, run.stderr
    assert ("the engine died" in run.stderr) == (code != 0)
    assert code == 0 or ("Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1)


def test_a_half_built_engine_client_is_not_taken_for_a_dead_one():
    class Broken:
        @property
        def errored(self):
            raise AttributeError("engine_core")

    assert not graceful_stop.engine_dead(Broken()) and not graceful_stop.engine_dead(object())
