"""`build.py build`: the derived image, verified before it gets the tag."""
import contextlib
import datetime
import io
import posixpath
import signal
import tempfile
import uuid
from pathlib import Path

import docker
from docker.errors import APIError

from buildtool import flags
from buildtool.base.build import build_base, first_line, say_ca
from buildtool.docker import buildkit
from buildtool.docker.engine import connect, image_or_none
from buildtool.docker.progress import ProgressView
from buildtool.hostconfig import git_revision, host_ca_bundle, pip_index_secrets
from buildtool.image.fit_table import fit_verdict_line
from buildtool.image.labels import base_digest, image_labels
from buildtool.image.verify import COMPILE_RECORDS, finding_line, read_build_reports, verify_image
from buildtool.build_plans import BuildPlan, add_build_arguments, build_plan
from contract import compile_record
from contract.clamp_paths import COMPILE_RECORD, parse_report
from door import files
from door.problem import Problem

REPO = Path(__file__).resolve().parents[2]
# The ID of the image before labelling: the same layers and config give the same ID, so a
# no-op rebuild is recognised without comparing contents.
BUILD_ID_LABEL = "io.vllm-turing.build.id"
# The Dockerfile's stage that holds the proof's compile record alone (the image does not carry it).
COMPILE_RECORD_STAGE = "compile-record"


def add_arguments(parser) -> None:
    add_build_arguments(parser)


def run(args) -> int:
    plan = build_plan(args, host_ca_bundle())
    secrets = pip_index_secrets()  # the host's index settings refused before any work, not at the build step
    client = connect()
    ensure_base(client, plan)
    image_id = build_verified(client, plan, secrets)
    print(f"{plan.tag} is {image_id[7:19]}", flush=True)
    return 0


def keep_compile_record(document: dict, folder: Path = COMPILE_RECORDS) -> str:
    """Writes a build's compile record over the repository's when they differ; the line that says so.
    Problem when that record is not one (the fit step wrote it: a bug, not the user's input)."""
    try:
        record = compile_record.record_from_document(document)
    except ValueError as error:
        raise Problem(f"the build's compile record is not one ({error}); the image is tagged, the "
                         f"repository's record left as it was") from None
    path = compile_record.record_path(folder, record.vllm_version)
    text = compile_record.text_of(record)
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    try:
        if files.read_own(path) == text:
            return f"{shown}: unchanged ({len(record.answers)} compiles)"
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return (f"{shown}: written ({len(record.answers)} compiles): commit it, and a fresh host's build takes "
            "these compiles from it")


def export_compile_record(base: str, extras: str | None = None) -> bytes:
    """The compile record of the proof a build of this tree on `base` ran (gzipped JSON), exported from the
    Dockerfile's compile-record stage: right after that build, its steps all come from the build cache."""
    with tempfile.TemporaryDirectory() as folder:
        buildkit.build(buildkit.BuildRequest(
            context=REPO, dockerfile=REPO / "Dockerfile", build_args={"BASE_IMAGE": base, "EXTRAS": extras or ""},
            target=COMPILE_RECORD_STAGE, output_dir=Path(folder)), ProgressView(io.StringIO(), live=False))
        name = posixpath.basename(COMPILE_RECORD)
        try:
            data = files.read_own_bytes(Path(folder) / name)
            parse_report(COMPILE_RECORD, data)
        except (ValueError, OSError, EOFError) as error:  # the fit step wrote it: a bug, not the user's input
            raise Problem(f"the build's {COMPILE_RECORD_STAGE} stage holds no readable {name} "
                             f"({flags.one_line(str(error))[:200]})") from None
        return data


def ensure_base(client: docker.DockerClient, plan: BuildPlan) -> None:
    """Makes plan.base present: built from PyPI, pulled, or the one here."""
    ref = plan.base
    if plan.pypi_base is not None:
        if image_or_none(client, ref) is None:
            print(f"{ref} is not here: building it from PyPI", flush=True)
            build_base(client, plan.pypi_base)
        else:
            print(f"using the PyPI base {ref} built earlier (`build.py base` rebuilds it)", flush=True)
        return
    if image_or_none(client, ref) is not None and not plan.options.pull:
        return
    try:
        print(f"pulling {ref}", flush=True)
        client.images.pull(ref)
    except APIError as exc:
        if image_or_none(client, ref) is not None:
            print(f"could not pull a newer {ref}; using the one here", flush=True)
            return
        raise Problem(f"cannot pull {ref} ({first_line(exc.explanation or exc)}) and it is not here: "
                         "build on a base made from PyPI wheels instead: python3 build.py --base pypi") from None


def build_verified(client: docker.DockerClient, plan: BuildPlan, secrets: dict[str, str]) -> str:
    """Builds under temporary references; only a verified image moves the tag. `secrets`: the host's
    package index settings (hostconfig.pip_index_secrets)."""
    tag = plan.tag
    scratch = f"vllm-turing-build:{uuid.uuid4().hex[:12]}"
    if plan.extras:
        say_ca(plan.options)
    try:
        buildkit.build(buildkit.BuildRequest(
            context=REPO, dockerfile=REPO / "Dockerfile", tag=scratch,
            build_args={"BASE_IMAGE": plan.base, "EXTRAS": plan.extras or ""}, secrets=secrets,
            ca_cert=plan.options.ca_cert, no_cache=plan.options.no_cache, pull=False))
        unchanged = _holding_build(client, tag, client.images.get(scratch).id)
        if unchanged is not None:
            print(f"{tag} already holds this build (verified when it was tagged); nothing to do", flush=True)
            return unchanged
        reports = read_build_reports(client, scratch)
        labels = image_labels(
            reports=reports, base_ref=plan.base, base_digest=base_digest(client.images.get(plan.base).attrs),
            revision=git_revision(REPO), created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        labels[BUILD_ID_LABEL] = client.images.get(scratch).id
        if plan.extras:
            labels["io.vllm-turing.extras"] = plan.extras
        with tempfile.TemporaryDirectory() as empty_context:
            labelled = buildkit.build(buildkit.BuildRequest(
                context=Path(empty_context), dockerfile=Path("-"), tag=scratch + "-labelled",
                labels=labels, stdin_dockerfile=f"FROM {scratch}\n"))
        # The fit step printed its summary in the build's log; these stand for it when that step was cached.
        # Every launch is in the image's reports (contract.clamp_paths.FIT_REPORT*).
        print(fit_verdict_line(reports["fit"]), flush=True)
        print(fit_verdict_line(reports["fit_sm86"]), flush=True)
        record = export_compile_record(plan.base, plan.extras)
        findings = verify_image(client, labelled, record)
        for finding in findings:
            print(f"verify: {finding_line(finding)}", flush=True)
        failed = [f for f in findings if f.failed]
        if failed:
            raise Problem(f"verification failed ({failed[0].name}: {failed[0].message}); {tag} left as it was")
        move_tag(client, labelled, tag)
        if plan.pypi_base is not None:
            print(keep_compile_record(parse_report(COMPILE_RECORD, record)), flush=True)
        return labelled
    finally:
        for ref in (scratch, scratch + "-labelled"):
            if image_or_none(client, ref) is not None:
                client.images.remove(ref, noprune=True)


def _holding_build(client: docker.DockerClient, tag: str, build_id: str) -> str | None:
    """The image under `tag` when it was labelled from this very build, else None."""
    current = image_or_none(client, tag)
    if current is not None and (current.labels or {}).get(BUILD_ID_LABEL) == build_id:
        return current.id
    return None


def move_tag(client: docker.DockerClient, image_id: str, tag: str) -> None:
    """The image that held the tag before becomes <tag>-previous (rollback). Ctrl-C and SIGTERM wait
    until both tags are written, so the tag is the old image or the new one, never half moved."""
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    with signals_deferred():
        old = image_or_none(client, tag)
        new = client.images.get(image_id)
        if old is not None and old.id != new.id:
            old.tag(repository, f"{version}-previous")
            print(f"the previous {tag} is now {repository}:{version}-previous", flush=True)
        new.tag(repository, version)


@contextlib.contextmanager
def signals_deferred(stops=(signal.SIGINT, signal.SIGTERM)):
    """SIGINT and SIGTERM noted while the block runs, then raised again once it is done. Python runs
    signal handlers in the main thread whichever thread the kernel hands the signal to, so this holds in
    a process with other threads too (a blocked mask is per thread, and the kernel may pick another)."""
    caught: list[int] = []
    previous = {stop: signal.signal(stop, lambda signum, _frame: caught.append(signum)) for stop in stops}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        if caught:
            signal.raise_signal(caught[0])
