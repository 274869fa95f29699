"""Two builds on one host that both find no OS image bootstrap it one at a time: the second uses the
first's image instead of tagging another (buildtool/base/bootstrap.py). The Docker client is a stand-in
(no engine in the unit tier); the lock is the real flock."""
import threading

import docker
import pytest

from buildtool.base import bootstrap


class StandinImages:
    def __init__(self):
        self.present = False
        self.looked = threading.Event()

    def get(self, ref):
        self.looked.set()
        if not self.present:
            raise docker.errors.ImageNotFound(ref)
        return ref


class StandinClient:
    def __init__(self):
        self.images = StandinImages()


def test_a_second_bootstrap_waits_for_the_first_and_uses_its_image(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bootstrap, "LOCK_FILE", tmp_path / "bootstrap.lock")
    client, inside, release, made = StandinClient(), threading.Event(), threading.Event(), []

    def standin_bootstrap(client_, suite, ref):
        made.append(ref)
        inside.set()
        assert release.wait(60)
        client_.images.present = True
        return ref

    monkeypatch.setattr(bootstrap, "_bootstrap", standin_bootstrap)
    first = threading.Thread(target=bootstrap.bootstrap_os_image, args=(client,))
    first.start()
    assert inside.wait(60)
    client.images.looked.clear()
    results = []
    second = threading.Thread(target=lambda: results.append(bootstrap.bootstrap_os_image(client)))
    second.start()
    # Without the lock the second build looks for the image now, finds none and bootstraps again.
    assert not client.images.looked.wait(0.5), "the second build looked for the OS image while the first made it"
    release.set()
    first.join(60)
    second.join(60)
    assert made == [bootstrap.BOOTSTRAP_IMAGE] and results == [bootstrap.BOOTSTRAP_IMAGE]
    assert "bootstrapped by another build meanwhile" in capsys.readouterr().out


def test_without_an_os_image_the_bootstrap_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(bootstrap, "LOCK_FILE", tmp_path / "bootstrap.lock")
    made = []
    monkeypatch.setattr(bootstrap, "_bootstrap", lambda client, suite, ref: made.append((suite, ref)) or ref)
    assert bootstrap.bootstrap_os_image(StandinClient()) == bootstrap.BOOTSTRAP_IMAGE
    assert made == [("bookworm", bootstrap.BOOTSTRAP_IMAGE)]
