"""Connection to the Docker engine through the Docker SDK for Python."""
import docker
from docker.errors import DockerException, ImageNotFound

from buildtool.errors import BuildError


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise BuildError(
            "no Docker engine answered (%s): start one (`dockerd &`, or "
            "scripts/install-test-host.sh on Debian) or set DOCKER_HOST" % _first_line(exc)
        ) from None
    return client


def image_or_none(client: docker.DockerClient, ref: str):
    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
