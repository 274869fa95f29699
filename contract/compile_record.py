"""The compile record: the shared-memory-only compiles of an earlier build, keyed by Triton's own cache key.

A compile's result (shared memory, warps, stages, or its error) follows from its Triton cache key: the key
hashes Triton's own files and version, the kernel's source and its dependencies, the signature, the
constexprs and specialization, the options (warps, stages), the target and its ptxas, and the environment
Triton reads when compiling (triton.compiler.compiler.get_cache_key), plus the cut pipeline's own key
(patches/fitcheck/compiler.py, SHARED_ONLY_KEY). Triton trusts its on-disk cache on exactly that key, and
so did the build's BuildKit cache mount: the record is that trust carried to a fresh host. It holds
numbers only, no IR or code of vLLM's.

Where the record has a launch's key, the fit check takes its answer instead of compiling; every other
launch is compiled, and each kernel's largest need is still compiled in full by the Triton that serves
(compiler.cross_check). A build on the PyPI base writes the record back (build.py), so after a vLLM or
Triton bump the first build compiles everything and the next fresh host compiles only the full ones.

Format (one compile per line, so a diff reads by compile):
{"format": 1, "vllm_version", "triton_version", "cut", "compiles": {KEY: [kernel, cc, shared, num_warps,
num_stages, error], ...}}; shared, num_warps and num_stages are null where error is a string.
"""
from __future__ import annotations

from door.problem import UsageError
import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from door import files

FORMAT = 1
KEY_LENGTH = 64  # a sha256 in hex, as get_cache_key returns it


@dataclass(frozen=True)
class Answer:
    """One recorded compile: what Triton said for the key."""

    kernel: str
    cc: int
    shared: int | None
    num_warps: int | None
    num_stages: int | None
    error: str | None = None


@dataclass(frozen=True)
class Record:
    vllm_version: str
    triton_version: str
    cut: str  # patches.fitcheck.compiler.SHARED_ONLY_KEY of the build that wrote it
    answers: dict  # cache key -> Answer


def record_path(folder: Path, vllm_version: str) -> Path:
    """The record of one vLLM release in `folder` (contract/compile-records/ in the repository)."""
    return Path(folder) / f"vllm-{vllm_version}.json"


def _shown(value) -> str:
    """A value from the file as an error line shows it: its repr, cut short (a hostile file's values are
    unbounded)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _count(value, name: str, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"compile {key[:12]}: {name} is {_shown(value)}, expected a count of 0 or more, or null")
    return value


def _answer(key: str, fields) -> Answer:
    if not isinstance(key, str) or len(key) != KEY_LENGTH or any(c not in "0123456789abcdef" for c in key):
        raise ValueError(f"a compile's key {_shown(key)} is not a {KEY_LENGTH}-digit lowercase sha256")
    if not isinstance(fields, list) or len(fields) != 6:
        raise ValueError(f"compile {key[:12]}: expected [kernel, cc, shared, num_warps, num_stages, error]")
    kernel, cc, shared, warps, stages, error = fields
    if not isinstance(kernel, str) or not kernel.isidentifier():
        raise ValueError(f"compile {key[:12]}: kernel {_shown(kernel)} is not a kernel name")
    if isinstance(cc, bool) or not isinstance(cc, int) or not 70 <= cc < 1000:
        raise ValueError(f"compile {key[:12]}: cc {_shown(cc)} is not a compute capability such as 75")
    if error is not None and not isinstance(error, str):
        raise ValueError(f"compile {key[:12]}: error {_shown(error)} is neither null nor a message")
    answer = Answer(kernel, cc, _count(shared, "shared", key), _count(warps, "num_warps", key),
                    _count(stages, "num_stages", key), error)
    if (answer.error is None) == (answer.shared is None):
        raise ValueError(f"compile {key[:12]}: expected either a shared size or an error, not both or neither")
    return answer


def parse_record(text: str) -> Record:
    """The record in `text`; ValueError with one line saying what is wrong."""
    try:
        document = files.own_json(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"not JSON ({str(error)[:80]})") from None
    return record_from_document(document)


def record_from_document(document) -> Record:
    """The record a parsed JSON document holds; ValueError with one line saying what is wrong."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"format {_shown(found)}, expected {FORMAT}")
    for name in ("vllm_version", "triton_version", "cut"):
        if not isinstance(document.get(name), str) or not document[name]:
            raise ValueError(f"{name} is {_shown(document.get(name))}, expected a version or key")
    compiles = document.get("compiles")
    if not isinstance(compiles, dict):
        raise ValueError("compiles is not an object of key: [kernel, cc, shared, num_warps, num_stages, error]")
    return Record(document["vllm_version"], document["triton_version"], document["cut"],
                  {key: _answer(key, fields) for key, fields in compiles.items()})


def text_of(record: Record) -> str:
    """What render() made of the record: the file a build writes back."""
    return render(record.answers, {"vllm": record.vllm_version, "triton": record.triton_version}, record.cut)


def read_record(path: Path) -> Record | None:
    """The record at `path` (gzipped when it ends in .gz, as a build exports it), None when there is none;
    a UsageError naming the file when it is not one (exit 2, nothing compiled or written)."""
    try:
        data = files.read_own_bytes(Path(path))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UsageError(f"{path}: cannot read the compile record ({error.strerror}); "
                          "restore it with git checkout, or remove it to compile every launch") from None
    try:
        text = (gzip.decompress(data) if str(path).endswith(".gz") else data).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise UsageError(f"{path} is not a compile record ({type(error).__name__}: {str(error)[:60]}); restore it "
                          "with git checkout, or remove it to compile every launch") from None
    try:
        return parse_record(text)
    except ValueError as error:
        raise UsageError(f"{path} is not a compile record ({error}); restore it with git checkout, or remove "
                          "it to compile every launch") from None


def usable_answers(record: Record | None, versions: dict, cut: str) -> tuple[dict, str | None]:
    """(the answers this build may take, why none when it may take none). The cache key alone already
    tells compiles apart; the versions and the cut are checked too so that a stale record says why it
    answers nothing instead of silently missing every key."""
    if record is None:
        return {}, "no record for this vLLM release"
    found = (record.vllm_version, record.triton_version, record.cut)
    running = (versions["vllm"], versions["triton"], cut)
    if found != running:
        return {}, (f"written for vLLM {found[0]} / Triton {found[1]} / {found[2]}, "
                    f"running vLLM {running[0]} / Triton {running[1]} / {running[2]}")
    return record.answers, None


def render(answers: dict, versions: dict, cut: str) -> str:
    """The record's text: keys sorted, one compile per line, so that the same answers are the same bytes."""
    lines = [f"{json.dumps(key)}: {json.dumps([a.kernel, a.cc, a.shared, a.num_warps, a.num_stages, a.error])}"
             for key, a in sorted(answers.items())]
    head = json.dumps({"format": FORMAT, "vllm_version": versions["vllm"], "triton_version": versions["triton"],
                       "cut": cut})[:-1]
    return head + ', "compiles": {\n' + ",\n".join(lines) + "\n}}\n"
