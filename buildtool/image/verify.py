"""`build.py verify IMAGE`: the verification container, what must hold in an image before it gets the tag."""
import gzip
import io
import posixpath
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import docker

from buildtool import flags
from buildtool.docker.engine import connect, files_in_image, image_or_none
from buildtool.image.labels import FP16_SHA256_LABEL, VLLM_VERSION_LABEL
from contract import compile_record
from contract.clamp_paths import parse_report
from contract.layout import BUILD_REPORTS, FIT_TABLE, INSTALL_DIR
from contract.verdict import Result, Status, failed, passed
from door import files
from door.problem import Problem, UsageError

# CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton enabled on a host without a GPU driver.
# The fit check's Triton cache persists in a named volume, so only a first verification
# (or changed kernels) pays the cross-compiles.
TRITON_VOLUME = "vllm-turing-verify-triton-cache"
CHECK_ENV = {"CUDA_VISIBLE_DEVICES": "", "TRITON_CACHE_DIR": "/triton-cache"}
CLAMP_CHECK = ["python3", "-m", "patches.turing_clamp", "check", "--site", "unified", "--json"]
# The clamp's second site, vLLM's encoder attention (context_attention_fwd).
ENCODER_CLAMP_CHECK = ["python3", "-m", "patches.turing_clamp", "check", "--site", "encoder", "--json"]
# The fp16 upcast in the 12B vision embedder (patches/fp16_upcast): present, or no such file in this vLLM.
FP16_CHECK = ["python3", "-m", "patches.fp16_upcast", "check", "--json"]
# The Gemma 4 classes, whose head-512 layers are what the clamp exists for; the build's own fit
# check proved the whole matrix (Gemma 4 and the families) and its report is in the image. The launches
# the image's clamped launcher makes are recorded anew and each need is taken from the image's fit
# table, which that build compiled with this image's Triton (same versions, or the table is ignored
# and every launch compiled); a launch the table lacks is compiled here.
FIT_CHECK = ["python3", "-m", "patches.fitcheck", "--device", "sm75", "--matrix", "gemma4",
             "--known-table", FIT_TABLE, "--json"]


# The fit step's compile records (contract/compile_record.py): a build on the PyPI base, built from this
# repository's lock, writes its own back here for the next fresh host (build.py).
COMPILE_RECORDS = Path(__file__).resolve().parents[2] / "contract" / "compile-records"
# Where the verification's container gets a compile record (copied in before it starts).
RECORD_IN_CONTAINER = "/tmp/compile-record.json.gz"


def fit_check(has_record: bool) -> list[str]:
    """A compile record (the build's own answers by Triton cache key) answers the launches the table does not
    key (the split-K reduction, retiled launches), so a fresh host's verification compiles only the full
    confirming compiles; without one those launches are compiled."""
    return FIT_CHECK + (["--compile-record", RECORD_IN_CONTAINER] if has_record else [])


def add_arguments(parser) -> None:
    parser.add_argument("image", type=flags.image_or_id, help="image reference or ID")


def run(args) -> int:
    client = connect()
    if image_or_none(client, args.image) is None:
        raise UsageError(f"no image {args.image} here: build it with `python3 build.py` or pull it")
    findings = verify_image(client, args.image, committed_record(client, args.image))
    for finding in findings:
        print(finding_line(finding))
    return 1 if any(f.failed for f in findings) else 0


def finding_line(finding: Result) -> str:
    return f"{'ok  ' if finding.status is Status.PASS else 'FAIL'} {finding.name}: {finding.message}"


def read_build_reports(client: docker.DockerClient, image: str) -> dict:
    """The build's reports (contract.layout.BUILD_REPORTS), copied out of the image and read by key."""
    found = files_in_image(client, image, BUILD_REPORTS.values())
    missing = [path for path, data in found.items() if data is None]
    if missing:
        raise Problem(f"the image holds no build report {missing[0]}: the fit-check step did not write it")
    try:
        return {key: parse_report(path, found[path]) for key, path in BUILD_REPORTS.items()}
    except (ValueError, OSError, EOFError) as error:
        raise Problem(f"the image's build reports in {INSTALL_DIR} do not read ({flags.one_line(str(error))[:200]})") from None


def committed_record(client: docker.DockerClient, image: str) -> bytes | None:
    """The repository's compile record of the image's vLLM release (its label), gzipped as a build exports
    one, for `build.py verify`; None where it has none, or where the label is no release number (it names a
    file here)."""
    version = (client.images.get(image).labels or {}).get(VLLM_VERSION_LABEL)
    if not isinstance(version, str) or not re.fullmatch(r"[0-9][0-9A-Za-z.+-]{0,40}", version):
        return None
    try:
        return gzip.compress(files.read_own_bytes(compile_record.record_path(COMPILE_RECORDS, version)), mtime=0)
    except (OSError, ValueError):
        return None


def verify_image(client: docker.DockerClient, image: str, record: bytes | None = None) -> list[Result]:
    """The image's clamp and fit findings. `record`: a compile record (gzipped, as a build exports it) whose
    answers the fit check may take: the build's own, or the repository's."""
    clamp = _run(client, image, CLAMP_CHECK)
    encoder = _run(client, image, ENCODER_CLAMP_CHECK)
    fp16 = _run(client, image, FP16_CHECK)
    findings = [clamp_finding(clamp.exit_code, clamp.text), clamp_finding(encoder.exit_code, encoder.text, "encoder "),
                fp16_finding(fp16.exit_code, fp16.text)]
    fit = _run(client, image, fit_check(record is not None), {RECORD_IN_CONTAINER: record} if record else {})
    name = "every Gemma 4 launch fits sm_75"
    findings.append(passed(name, _fit_summary(fit.text)) if fit.exit_code == 0 else
                    failed(name, _fit_summary(fit.text), "a launch needs more shared memory than sm_75 has: "
                                                         "report it with the fit table"))
    labels = client.images.get(image).labels or {}
    findings += fp16_label_findings(labels.get(FP16_SHA256_LABEL), fp16.text)
    clamp_sha = labels.get("io.vllm-turing.clamp.sha256")
    if clamp_sha is not None:
        reported = _json_field(clamp.text, "sha256_after")
        name, message = "clamp sha256 label matches the file", f"label {clamp_sha[:12]}, file {str(reported)[:12]}"
        findings.append(passed(name, message) if reported == clamp_sha else
                        failed(name, message, "the attention file changed after the build: rebuild the image"))
    return findings


# What `turing_clamp check` proves when it passes, by its outcome: the clamp once, or vLLM's own
# tile sizing (an upstream fix, where no clamp is applied).
CLAMP_PASSES = {"present": "clamp present once",
                "upstream": "vLLM sizes attention tiles from shared memory itself (no clamp needed)"}


def clamp_finding(exit_code: int, text: str, site: str = "") -> Result:
    """`site`: "" for the unified attention launcher, "encoder " for encoder attention's."""
    outcome = _json_field(text, "outcome")
    if exit_code == 0 and outcome in CLAMP_PASSES:
        return passed(site + CLAMP_PASSES[outcome], outcome)
    return failed(site + CLAMP_PASSES["present"], _json_summary(text, "outcome"),
                  "rebuild the image with `python3 build.py`; the build applies the clamp")


# What `fp16_upcast check` proves when it passes, by its outcome.
FP16_PASSES = {"present": "fp16 upcast present once (the 12B vision embedder's patch_dense and patch_ln2 in fp32)",
               "none": "no gemma4_unified.py in this vLLM (no fp16 upcast needed)"}


def fp16_finding(exit_code: int, text: str) -> Result:
    outcome = _json_field(text, "outcome")
    if exit_code == 0 and outcome in FP16_PASSES:
        return passed(FP16_PASSES[outcome], outcome)
    return failed(FP16_PASSES["present"], _json_summary(text, "outcome"),
                  "rebuild the image with `python3 build.py`; the build applies the fp16 upcast")


def fp16_label_findings(label: str | None, text: str) -> list[Result]:
    """The label the build wrote from its apply report against the file's sha256 now (none: no file)."""
    if label is None:
        return []
    reported = _json_field(text, "sha256_after") or "none"
    name, message = "fp16 upcast sha256 label matches the file", f"label {label[:12]}, file {str(reported)[:12]}"
    return [passed(name, message) if reported == label else
            failed(name, message, "gemma4_unified.py changed after the build: rebuild the image")]


@dataclass
class _Output:
    exit_code: int
    text: str


def _run(client, image, command, files: dict[str, bytes] | None = None) -> _Output:
    """`files`: path -> bytes, copied into the container before it starts."""
    # As root, not the image's uid (10001): the build's own check, with a Triton cache volume Docker
    # creates root's own; what it reads in the image is the same for every uid.
    container = client.containers.create(image, command=command, entrypoint=[], environment=CHECK_ENV, user="0:0",
                                         volumes={TRITON_VOLUME: {"bind": "/triton-cache", "mode": "rw"}})
    try:
        for path, data in (files or {}).items():
            container.put_archive(posixpath.dirname(path), tar_of(posixpath.basename(path), data))
        container.start()
        exit_code = container.wait()["StatusCode"]
        text = container.logs(stdout=True, stderr=False).decode(errors="replace")
        if exit_code != 0:
            text += container.logs(stdout=False, stderr=True).decode(errors="replace")
        return _Output(exit_code, text)
    finally:
        container.remove(force=True)


def tar_of(name: str, data: bytes) -> bytes:
    """A tar archive of one file, as the Docker API copies files into a container."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo(name)
        member.size, member.mode = len(data), 0o644
        archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _json_field(text: str, key: str):
    try:
        return files.own_json(text).get(key)
    except (ValueError, AttributeError):
        return None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"


def _json_summary(text: str, key: str) -> str:
    value = _json_field(text, key)
    return str(value) if value is not None else _last_line(text)


def _fit_summary(text: str) -> str:
    try:
        report = files.own_json(text)
    except ValueError:
        return _last_line(text)
    misfits = [l for l in report.get("launches", []) if not l.get("fits")]
    summary = "max shared %s of %s bytes over %d launches" % (
        report.get("max_shared"), report.get("device", {}).get("limit"), len(report.get("launches", [])))
    known = report.get("known_table") or {}
    if known.get("used"):
        summary += " (%s from the build's fit table, %s compiled)" % (known.get("from_table"), known.get("compiled"))
    record = report.get("compile", {}).get("record") or {}
    if record.get("used"):
        summary += "; %s compiles answered by the build's compile record" % record.get("answered")
    if misfits:
        summary += "; does not fit: " + ", ".join(
            "%s %s head %s tile %s (%s bytes)" % (l.get("model"), l.get("path"), l.get("head_size"),
                                                   l.get("tile_size"), l.get("shared")) for l in misfits[:3])
    return summary
