"""Connection to the Docker engine through the Docker SDK for Python."""
import io
import tarfile

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from door.problem import Problem



def connect() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise Problem(
            "no Docker engine answered (%s): start one (`dockerd &`, or "
            "scripts/install-test-host.sh on Debian) or set DOCKER_HOST" % _first_line(exc)
        ) from None
    return client


def image_or_none(client: docker.DockerClient, ref: str):
    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def files_in_image(client: docker.DockerClient, image: str, paths) -> dict[str, bytes | None]:
    """Each file's bytes as the image holds it (None where it has none), copied out of a created container
    that never starts: a container's log can come back short of a large output on a loaded host, a copy
    cannot, and no program of the image runs."""
    container = client.containers.create(image, entrypoint=["true"], command=[])
    try:
        found = {}
        for path in paths:
            try:
                stream, _ = container.get_archive(path)
            except NotFound:
                found[path] = None
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
                member = archive.next()
                extracted = archive.extractfile(member) if member is not None and member.isfile() else None
                found[path] = extracted.read() if extracted is not None else None
        return found
    finally:
        container.remove(force=True)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
