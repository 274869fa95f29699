"""Containers for the image tier: started with the entrypoint overridden, removed after."""
import contextlib
import json

import docker
import testinfra

from buildtool.docker.engine import files_in_image

# vLLM disables Triton when no GPU driver is active unless CUDA_VISIBLE_DEVICES is empty.
CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}


@contextlib.contextmanager
def idle_container(client: docker.DockerClient, image: str, user: str | None = None):
    """A container that only sleeps, for testinfra to look inside (as the image's user, or `user`:
    "root" to change what the image's own uid may not)."""
    container = client.containers.run(image, entrypoint=["sleep", "infinity"], command=[],
                                      environment=CPU_ENV, detach=True)
    try:
        yield testinfra.get_host(f"docker://{user + '@' if user else ''}{container.id}")
    finally:
        container.remove(force=True)


def run_to_end(client: docker.DockerClient, image: str, command, timeout: int = 300, **kwargs):
    """(exit code, stdout, stderr) of a container run to its end; the container is removed."""
    container = client.containers.run(image, command, detach=True, **kwargs)
    try:
        code = container.wait(timeout=timeout)["StatusCode"]
        return code, container.logs(stderr=False).decode(), container.logs(stdout=False).decode()
    finally:
        container.remove(force=True)


CORPUS_DRIVER = __import__("pathlib").Path(__file__).with_name("corpus_driver.py")


def run_corpus(client: docker.DockerClient, image: str, corpus, cases: list[dict]) -> dict[str, dict]:
    """Each case ({"id", "env", "args", "mode"}) through the image's entrypoint by corpus_driver.py,
    all in one container of 1 GiB with `corpus` at /corpus; id -> outcome (code, stdout, stderr,
    wall_s, timed_out). Not killed for memory, or the run fails."""
    (corpus / "driver.py").write_text(CORPUS_DRIVER.read_text())
    (corpus / "cases.json").write_text(json.dumps(cases))
    container = client.containers.run(
        image, ["/corpus/driver.py", "/corpus/cases.json"], entrypoint="python3", detach=True, mem_limit="1g",
        memswap_limit="1g", environment=CPU_ENV, volumes={str(corpus): {"bind": "/corpus", "mode": "rw"}})
    try:
        status = container.wait(timeout=60 * 60)
        logs = container.logs(stderr=False).decode()
        container.reload()
        assert status["StatusCode"] == 0 and not container.attrs["State"]["OOMKilled"], logs[-2000:]
    finally:
        container.remove(force=True)
    return {outcome["id"]: outcome for outcome in json.loads(logs)}


def file_in_image(client: docker.DockerClient, image: str, path: str) -> bytes:
    """A file's bytes as the image holds it (buildtool's copy out of a created container, never its log)."""
    data = files_in_image(client, image, [path])[path]
    assert data is not None, f"{image} holds no {path}"
    return data


def run_python(host, script: str, *args: str) -> str:
    """Runs a Python script in the container and returns its stdout; failures say what broke."""
    result = host.run(" ".join(["python3", "-c", _quote(script)] + [_quote(a) for a in args]))
    assert result.rc == 0, f"python3 in the container failed (exit {result.rc}): {result.stderr.strip()[-800:]}"
    return result.stdout


def run_json(host, script: str, *args: str):
    return json.loads(run_python(host, script, *args))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
