"""A build stopped by SIGTERM or Ctrl-C at its verification step (buildtool/image/build.py
build_verified, under build.py's `guarded`): the scratch images it made are removed, the old tag
is untouched and the exit code is the signal's. The Docker engine and buildx are stand-ins (no image
is built on the unit tier): the standin engine records what is tagged and removed, and its container
for the verification's first command raises the stop, as the signal handler raises it there."""
import gzip
import io
import json
import tarfile

import docker.errors
import pytest

import build
from buildtool.image import build as image_build
from buildtool.image.verify import CLAMP_CHECK
from buildtool.build_plans import BuildOptions, BuildPlan
from contract.layout import BUILD_REPORTS

OLD_TAG = "vllm-turing:0.33.0"
BASE = "vllm-turing-base:0.33.0"
REPORTS = {"versions": {"vllm": "0.33.0", "torch": "2.11.0", "triton": "3.6.0"},
           "clamp": {"patch_version": 1, "sha256_after": "0" * 64},
           "fp16": {"outcome": "applied", "patch_version": 1, "sha256_after": "1" * 64},
           "fit": {"max_shared": 65536, "device": {"limit": 65536, "name": "sm_75"}, "launches": [], "all_fit": True},
           "fit_sm86": {"max_shared": 98304, "device": {"limit": 101376, "name": "sm_86"}, "launches": [],
                        "all_fit": True},
           "compile_record": {"format": 1, "vllm_version": "0.33.0", "triton_version": "3.6.0", "cut": "c",
                              "compiles": {}}}


class StandinImage:
    def __init__(self, engine, image_id: str, labels=None):
        self.engine, self.id, self.labels = engine, image_id, labels or {}
        self.attrs = {"Id": image_id, "RepoDigests": []}

    def tag(self, repository: str, tag: str) -> None:
        self.engine.tagged.append(f"{repository}:{tag}")
        self.engine.refs[f"{repository}:{tag}"] = self


class StandinImages:
    def __init__(self, engine):
        self.engine = engine

    def get(self, ref: str) -> StandinImage:
        if ref not in self.engine.refs:
            raise docker.errors.ImageNotFound(ref)
        return self.engine.refs[ref]

    def remove(self, ref: str, noprune: bool = False) -> None:
        self.engine.removed.append(ref)
        del self.engine.refs[ref]


class StandinContainer:
    def __init__(self, engine, command):
        self.engine, self.command = engine, command

    def start(self) -> None:
        if self.command == CLAMP_CHECK:  # the verification's first container: the signal arrives here
            raise self.engine.stop()

    def wait(self):
        return {"StatusCode": 0}

    def logs(self, stdout=True, stderr=False) -> bytes:
        return b""

    def get_archive(self, path: str):
        """The build report at `path` as the engine hands a file out: a tar stream of it."""
        [key] = [key for key, report_path in BUILD_REPORTS.items() if report_path == path]
        data = json.dumps(REPORTS[key]).encode()
        data = gzip.compress(data) if path.endswith(".gz") else data
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w") as archive:
            member = tarfile.TarInfo(path.rsplit("/", 1)[-1])
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
        return iter([packed.getvalue()]), {}

    def remove(self, force=False) -> None:
        pass


class StandinContainers:
    def __init__(self, engine):
        self.engine = engine

    def create(self, image, command, **kwargs) -> StandinContainer:
        return StandinContainer(self.engine, command)


class StandinEngine:
    """The Docker client build_verified talks to: images by reference, containers that run nothing."""

    def __init__(self, stop: type[BaseException]):
        self.stop = stop
        self.refs = {OLD_TAG: StandinImage(self, "sha256:" + "a" * 64), BASE: StandinImage(self, "sha256:" + "b" * 64)}
        self.images, self.containers = StandinImages(self), StandinContainers(self)
        self.tagged: list[str] = []
        self.removed: list[str] = []
        self.built: list[str] = []


def standin_buildx(engine: StandinEngine):
    """buildkit.build as far as build_verified sees it: the image appears under the request's tag."""
    def build_image(request, view=None) -> str:
        if request.output_dir is not None:  # the compile-record stage, exported
            (request.output_dir / "compile-record.json.gz").write_bytes(gzip.compress(b"{}"))
            return ""
        image_id = "sha256:%064x" % (len(engine.built) + 1)
        engine.refs[request.tag] = StandinImage(engine, image_id, dict(request.labels))
        engine.built.append(request.tag)
        return image_id
    return build_image


@pytest.mark.parametrize("stop, code", [(build.Terminated, 143), (KeyboardInterrupt, 130)])
def test_a_build_stopped_at_verification_removes_its_scratch_images_and_keeps_the_old_tag(monkeypatch, capsys,
                                                                                          stop, code):
    engine = StandinEngine(stop)
    monkeypatch.setattr(image_build.buildkit, "build", standin_buildx(engine))
    old = engine.refs[OLD_TAG]
    plan = BuildPlan(tag=OLD_TAG, base=BASE, pypi_base=None, extras=None, options=BuildOptions())

    assert build.guarded("build", lambda: image_build.build_verified(engine, plan, {})) == code

    scratch, labelled = engine.built
    assert labelled == scratch + "-labelled" and scratch.startswith("vllm-turing-build:")
    assert sorted(engine.removed) == sorted(engine.built)               # both scratch references removed
    assert not any(ref.startswith("vllm-turing-build:") for ref in engine.refs)
    assert engine.refs[OLD_TAG] is old and engine.tagged == []           # the old tag untouched, no -previous
    assert "tags left as they were" in capsys.readouterr().err
