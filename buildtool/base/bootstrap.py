"""An OS image made with debootstrap + `docker import`, for hosts that can pull nothing."""
import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import docker

from door import children
from door.problem import Problem, UsageError
from buildtool.hostconfig import debian_mirror

BOOTSTRAP_IMAGE = "vllm-turing-os:bookworm"


# Two builds on one host (the base and the CPU vehicle, say) that both find no OS image bootstrap it
# one after the other: the second finds the first's image and uses it, instead of tagging another.
LOCK_FILE = Path(tempfile.gettempdir()) / "vllm-turing-bootstrap.lock"


@contextlib.contextmanager
def _one_bootstrap_at_a_time():
    with open(LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def bootstrap_os_image(client: docker.DockerClient, suite: str = "bookworm", ref: str = BOOTSTRAP_IMAGE) -> str:
    with _one_bootstrap_at_a_time():
        try:
            client.images.get(ref)
        except docker.errors.ImageNotFound:
            return _bootstrap(client, suite, ref)
    print(f"using {ref}, bootstrapped by another build meanwhile", flush=True)
    return ref


def _bootstrap(client: docker.DockerClient, suite: str, ref: str) -> str:
    if os.geteuid() != 0:
        raise UsageError("making an OS image with debootstrap needs root: run as root, or pass --os-image of an image you have")
    if not shutil.which("debootstrap"):
        raise UsageError("making an OS image needs debootstrap: apt-get install debootstrap, or pass --os-image of an image you have")
    mirror = debian_mirror()
    if not mirror:
        raise UsageError("making an OS image with debootstrap found no Debian mirror in /etc/apt/sources*: run it on a Debian host, "
                         "or pass --os-image of an image you have")
    print(f"bootstrapping a Debian {suite} OS image with debootstrap from the host's mirror (about 30 s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="vllm-turing-rootfs-") as tmp:
        root = Path(tmp) / "root"
        run = children.run(["debootstrap", "--variant=minbase", suite, str(root), mirror])
        if run.returncode != 0:
            last = (run.stderr.strip() or run.stdout.strip()).splitlines()[-1:]
            raise Problem("debootstrap failed: " + (last[0] if last else f"exit {run.returncode}"))
        tarball = Path(tmp) / "rootfs.tar"
        packed = children.run(["tar", "-C", str(root), "-cf", str(tarball), "."])
        if packed.returncode != 0:
            raise Problem("tar of the bootstrapped root failed: " + (packed.stderr.strip().splitlines() or ["?"])[-1])
        repository, tag = ref.rsplit(":", 1)
        client.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
    print(f"imported {ref}", flush=True)
    return ref
