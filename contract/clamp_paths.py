"""The names the fit check (patches/fitcheck) needs from the contract: where the image keeps the fit
table, and the environment names the clamp reads. Kept apart from layout.py, which re-exports them,
because the Dockerfile copies this file alone before the fit check's long build step."""
from __future__ import annotations

import gzip
import json
import posixpath
from door import files

INSTALL_DIR = "/opt/vllm-turing"


def in_install_dir(name: str) -> str:
    return posixpath.join(INSTALL_DIR, name)


FIT_TABLE = in_install_dir("fit-table.json")
# The build's fit-check reports (patches/fitcheck/image_passes.py writes them) and the versions it proved.
# Every launch of a pass is a row: 4.5 MB of JSON for the three, 76 KB gzipped (the image's derived
# layers stay within 2 MiB), so they are stored compressed and read with read_report().
FIT_REPORT = in_install_dir("fit-report.json.gz")
FIT_REPORT_SM86 = in_install_dir("fit-report-sm86.json.gz")
FIT_REPORT_SM86_BF16 = in_install_dir("fit-report-sm86-bf16.json.gz")
VERSIONS_REPORT = in_install_dir("versions.json")
# The compile record (contract/compile_record.py): the repository's contract/compile-records/ reaches the
# fit step as a bind mount, not a layer. The step runs in the Dockerfile's proof stage and writes the
# record of what it proved (gzipped) outside the install folder: the image takes the proof's outputs
# (PROOF_OUTPUTS) and not the record, which the compile-record stage holds alone for build.py to export
# and keep in the repository.
COMPILE_RECORDS_MOUNT = "/run/vllm-turing-compile-records"
PROOF_DIR = "/opt/vllm-turing-proof"
COMPILE_RECORD = posixpath.join(PROOF_DIR, "compile-record.json.gz")
PROOF_OUTPUTS = (VERSIONS_REPORT, FIT_TABLE, FIT_REPORT, FIT_REPORT_SM86, FIT_REPORT_SM86_BF16)

# Environment names the clamp reads inside the server process. They must not start with VLLM_:
# vLLM warns about every VLLM_* name it does not own ("Unknown vLLM environment variable").
# The clamp's inserted code cannot import this package (a host install patched by
# `python -m patches.turing_clamp apply` has no contract/ on its path), so it spells them out;
# a unit test holds the two equal.
ENV_FIT_TABLE = "TURING_CLAMP_FIT_TABLE"
ENV_SMEM_LIMIT = "TURING_CLAMP_SMEM_LIMIT"
ENV_CC = "TURING_CLAMP_CC"


def write_report(path: str, report: dict) -> None:
    """A build report as compact JSON, gzipped when the path ends in .gz (no timestamp inside, so the
    same report is the same bytes)."""
    data = json.dumps(report, separators=(",", ":")).encode()
    with open(path, "wb") as handle:
        handle.write(gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)


def read_report(path: str) -> dict:
    """A build report written by write_report (or any JSON file)."""
    return parse_report(path, files.read_own_bytes(path))


def parse_report(path: str, data: bytes) -> dict:
    """The report `data` read from `path` holds (gzipped when the path ends in .gz)."""
    return files.own_json(gzip.decompress(data) if str(path).endswith(".gz") else data)
