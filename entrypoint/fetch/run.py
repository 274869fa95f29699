"""`entrypoint fetch REPO[@REVISION] [--gpu sm75] [--models-dir DIR] [--name NAME]`: exit 0 fetched
and verified, 1 refused by the judgment or the verification or the Hub, 2 bad usage. Each file is
checked locally first and only what is missing or wrong is downloaded, so a re-run of a complete
fetch verifies and writes nothing but the manifest's time, and an interrupted one resumes."""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import glob
import os
import sys
from typing import Mapping

from contract.devices import DeviceLimits, cc_number
from contract.verdict import Result

from .. import facts
from ..checks import memory, turing_settings
from ..checks.model import gib
from ..device import NoDevice, probe_devices, weakest
from ..files import shown
from ..redact import redact
from . import hub, judge, listing, manifest, verify
from .request import FetchUsage, Request, parse_request

PREFIX = "vllm-turing fetch:"


class Refused(Exception):
    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


def say(message: str) -> None:
    print(f"{PREFIX} {shown(redact(message))}", file=sys.stderr, flush=True)


def target_device(request: Request) -> tuple[str, DeviceLimits]:
    if request.device is not None:
        return request.gpu, request.device
    try:
        device = weakest(probe_devices())
    except NoDevice as error:
        raise FetchUsage(f"no GPU to judge the model for ({error}): name the target with --gpu sm75 (or sm86, ...)") \
            from None
    limits = DeviceLimits(cc_number(device.cc), device.smem_optin)
    return f"sm{limits.cc}", limits


def read_meminfo() -> str:
    try:
        with open(memory.MEMINFO, encoding="ascii") as handle:
            return handle.read()
    except OSError:
        return ""


def discard(folder: str, file: listing.HubFile) -> None:
    """A wrong file and huggingface_hub's note that it is complete, so the next download fetches it."""
    for path in (os.path.join(folder, file.path),
                 os.path.join(folder, DOWNLOADS, file.path + ".metadata")):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


DOWNLOADS = os.path.join(".cache", "huggingface", "download")  # huggingface_hub's notes under local_dir
LOCK = os.path.join(".cache", "vllm-turing-fetch.lock")


@contextlib.contextmanager
def only_fetch_into(folder: str):
    """This process alone writes the folder; the temporary files an interrupted fetch left are removed
    (huggingface_hub 2.4 downloads each file into a process-unique one, so they never resume)."""
    os.makedirs(os.path.join(folder, DOWNLOADS), exist_ok=True)
    with open(os.path.join(folder, LOCK), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Refused(f"another fetch is writing {folder}", "wait for it to end, or give another --name") from None
        for stale in glob.glob(os.path.join(glob.escape(folder), DOWNLOADS, "**", "*.incomplete"), recursive=True):
            os.remove(stale)
        yield


def local_files(folder: str) -> list[str]:
    """The folder's files as repository paths, without huggingface_hub's notes and the manifest."""
    names = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if not (root == folder and name == ".cache")]
        names += [os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/") for name in files]
    return [name for name in names if name != manifest.NAME]


def ensure(request: Request, commit: str, folder: str, files: list[listing.HubFile]) -> None:
    """Every file present and verified, downloading those missing or wrong."""
    for number, file in enumerate(files, 1):
        local = os.path.join(folder, file.path)
        problem = verify.file_problem(local, file)
        if problem is None:
            continue
        if os.path.exists(local):
            say(f"{problem}: fetching it again")
            discard(folder, file)
        say(f"fetching {file.path} ({gib(file.size)}, file {number} of {len(files)})")
        hub.download(request.repo, commit, file, folder)
        problem = verify.file_problem(local, file)
        if problem:
            discard(folder, file)
            raise Refused(f"{request.repo}@{commit[:12]}: {problem} after download",
                          "the mirror or the connection altered it: check HF_ENDPOINT, then run fetch again")


def fetch(request: Request) -> str:
    """The model fetched, judged and verified; the manifest's path."""
    gpu, device = target_device(request)
    commit = hub.resolve_commit(request.repo, request.revision)
    say(f"{request.repo}@{request.revision} is commit {commit}")
    repo_files = hub.list_files(request.repo, commit)
    folder = request.target
    with only_fetch_into(folder):
        return fetch_into(folder, request, gpu, device, commit, repo_files)


def fetch_into(folder: str, request: Request, gpu: str, device: DeviceLimits, commit: str,
               repo_files: list[listing.HubFile]) -> str:
    found = listing.strays(local_files(folder), repo_files)
    if found:
        raise Refused(f"{folder} holds {len(found)} weight file(s) that {request.repo}@{commit[:12]} does not have "
                      f"(e.g. {found[0]}), which vLLM would load beside it",
                      "remove them, or fetch into another --name")
    small = listing.small_files(repo_files)
    ensure(request, commit, folder, small)
    loaded = facts.load()
    minimum, deprecated = turing_settings.quantization_from(loaded.facts)
    missing = {file.path for file in repo_files if file.is_weight_format
               and verify.file_problem(os.path.join(folder, file.path), file, check_hash=False)}
    sizes = {file.path: file.size for file in repo_files}
    results, loaded_names = judge.judge(folder, sizes, missing, device, read_meminfo(), minimum, request.drafter,
                                        deprecated)
    for result in results:
        say(f"{result.name} on {gpu}: {result.status.value} {result.message}")
    refusal = judge.refusal(results)
    if refusal is not None:
        raise Refused(f"{request.repo}@{commit[:12]} cannot serve on {gpu}: {refusal.message}; no weights were "
                      "downloaded", refusal.fix)
    weights = listing.chosen_weights(repo_files, loaded_names)
    say(f"{len(weights)} weight file(s), {gib(sum(file.size for file in weights))}")
    ensure(request, commit, folder, weights)
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    doc = manifest.document(request.repo, request.revision, commit, small + weights, results, when, gpu)
    return manifest.write(folder, doc)


def main(argv: list[str], env: Mapping[str, str]) -> int:
    try:
        request = parse_request(argv)
        path = fetch(request)
    except FetchUsage as error:
        say(str(error))
        return 2
    except hub.HubProblem as problem:
        say(f"{problem}; {problem.fix}")
        return 2 if problem.usage else 1
    except Refused as refusal:
        say(f"{refusal}; {refusal.fix}")
        return 1
    except OSError as error:
        say(f"cannot write the model folder: {error.strerror} ({error.filename}); mount a writable --models-dir")
        return 1
    except KeyboardInterrupt:
        say("interrupted; run fetch again: the files complete are kept and verified")
        return 130
    except Exception as error:  # a shape no branch above foresaw: a line, not a traceback
        say(f"fetch failed ({type(error).__name__}: {str(error)[:200]}); run it again, and report this line")
        return 1
    say(f"verified; manifest {path}")
    return 0
