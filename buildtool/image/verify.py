"""`build.py verify IMAGE`: the verification container, what must hold in an image before it gets the tag."""
import json
from dataclasses import dataclass

import docker

from buildtool.docker.engine import connect, image_or_none
from buildtool.errors import BuildError

REPORT_DIR = "/opt/vllm-turing"
REPORT_FILES = {"clamp": "clamp-report.json", "fit": "fit-report.json", "versions": "versions.json"}

# CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton enabled on a host without a GPU driver.
# The fit check's Triton cache persists in a named volume, so only a first verification
# (or changed kernels) pays the cross-compiles.
TRITON_VOLUME = "vllm-turing-verify-triton-cache"
CHECK_ENV = {"CUDA_VISIBLE_DEVICES": "", "TRITON_CACHE_DIR": "/triton-cache"}
CLAMP_CHECK = ["python3", "-m", "patches.turing_clamp", "check", "--json"]
FIT_CHECK = ["python3", "-m", "patches.fitcheck", "--device", "sm75", "--json"]


def add_arguments(parser) -> None:
    parser.add_argument("image", help="image reference or ID")


def run(args) -> int:
    client = connect()
    if image_or_none(client, args.image) is None:
        raise BuildError(f"no image {args.image} here: build it with `python3 build.py` or pull it", 2)
    findings = verify_image(client, args.image)
    for finding in findings:
        print(f"{'ok  ' if finding.ok else 'FAIL'} {finding.name}: {finding.detail}")
    return 0 if all(f.ok for f in findings) else 1


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str


def read_build_reports(client: docker.DockerClient, image: str) -> dict:
    script = "import json,sys; d=sys.argv[1]; print(json.dumps({k: json.load(open(d + '/' + f)) for k, f in %r.items()}))" % (
        REPORT_FILES,)
    out = _run(client, image, ["python3", "-c", script, REPORT_DIR])
    if out.exit_code != 0:
        raise BuildError("the image holds no build reports in %s: %s" % (REPORT_DIR, out.text.strip()[-300:]))
    return json.loads(out.text)


def verify_image(client: docker.DockerClient, image: str) -> list[Finding]:
    findings = []
    clamp = _run(client, image, CLAMP_CHECK)
    findings.append(Finding("clamp present once", clamp.exit_code == 0, _json_summary(clamp.text, "outcome")))
    fit = _run(client, image, FIT_CHECK)
    findings.append(Finding("every Gemma 4 launch fits sm_75", fit.exit_code == 0, _fit_summary(fit.text)))
    labels = client.images.get(image).labels or {}
    clamp_sha = labels.get("io.vllm-turing.clamp.sha256")
    if clamp_sha is not None:
        reported = _json_field(clamp.text, "sha256_after")
        findings.append(Finding("clamp sha256 label matches the file", reported == clamp_sha,
                                f"label {clamp_sha[:12]}, file {str(reported)[:12]}"))
    return findings


@dataclass
class _Output:
    exit_code: int
    text: str


def _run(client, image, command) -> _Output:
    container = client.containers.create(image, command=command, entrypoint=[], environment=CHECK_ENV,
                                         volumes={TRITON_VOLUME: {"bind": "/triton-cache", "mode": "rw"}})
    try:
        container.start()
        exit_code = container.wait()["StatusCode"]
        text = container.logs(stdout=True, stderr=False).decode(errors="replace")
        if exit_code != 0:
            text += container.logs(stdout=False, stderr=True).decode(errors="replace")
        return _Output(exit_code, text)
    finally:
        container.remove(force=True)


def _json_field(text: str, key: str):
    try:
        return json.loads(text).get(key)
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
        report = json.loads(text)
    except ValueError:
        return _last_line(text)
    misfits = [l for l in report.get("launches", []) if not l.get("fits")]
    summary = "max shared %s of %s bytes over %d launches" % (
        report.get("max_shared"), report.get("device", {}).get("limit"), len(report.get("launches", [])))
    if misfits:
        summary += "; does not fit: " + ", ".join(
            "%s %s head %s tile %s (%s bytes)" % (l.get("model"), l.get("path"), l.get("head_size"),
                                                   l.get("tile_size"), l.get("shared")) for l in misfits[:3])
    return summary
