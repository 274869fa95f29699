"""`entrypoint fetch REPO[@REVISION] [--gpu sm75] [--models-dir DIR] [--name NAME]`: exit 0 fetched
and verified, 1 refused by the judgment or the verification or the Hub, 2 bad usage. Each file is
checked locally first and only what is missing or wrong is downloaded, so a re-run of a complete
fetch verifies and writes nothing but the manifest's time, and an interrupted one resumes."""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import fcntl
import glob
import os
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Callable, Mapping, Set

from contract.devices import DeviceLimits, cc_number

from .. import image_facts, nvml
from ..checks import memory, turing_settings
from ..checks.model import gib
from ..device import probe_devices, weakest
from door import output, paths, replace
from door import files
from door.files import kind, shown
from door.problem import Problem, UsageError
from . import hub_client, imported, judge, listing, manifest, verify
from .request import ENV_GPU, Request, parse_request

PREFIX = "vllm-turing fetch:"
COMMIT = re.compile(r"[0-9a-f]{40}")


def say(message: str) -> None:
    print(f"{PREFIX} {shown(output.clean(message))}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Target:
    """What the model is judged for: the GPU's name, its limits, and a card (name, memory in bytes)
    whose memory is judged against the weights where it is known."""

    gpu: str
    device: DeviceLimits
    card: tuple[str, int] | None


def target(request: Request) -> Target:
    """The named GPU, else this host's weakest, with its smallest card's memory as NVML reports it."""
    if request.device is not None:
        return Target(request.gpu, request.device, (request.gpu, request.gpu_memory) if request.gpu_memory else None)
    try:
        device = weakest(probe_devices())
    except Problem as error:
        raise UsageError(f"no GPU to judge the model for ({error}): name the target with --gpu sm75 (or {ENV_GPU}=sm75, t4, ...)") \
            from None
    limits = DeviceLimits(cc_number(device.cc), device.smem_optin)
    cards = nvml.read().memory(device.count)
    return Target(f"sm{limits.cc}", limits, (device.name, min(card.total for card in cards)) if cards else None)


def read_meminfo() -> str:
    return files.read_system(memory.MEMINFO) or ""


def discard(folder: str, file: listing.HubFile) -> None:
    """A wrong file, and the partial download it came from, so the next download starts afresh."""
    for path in (os.path.join(folder, file.path), hub_client.partial_path(folder, file)):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def lock_path(folder: str) -> str:
    """Beside the model folder (which a finished fetch replaces whole): .NAME.lock."""
    parent, name = os.path.split(folder.rstrip("/"))
    return os.path.join(parent, f".{name}.lock")


@contextlib.contextmanager
def only_fetch_into(folder: str):
    """This process alone writes the folder and its stage (the partial downloads it resumes are its own).
    The lock file is opened without blocking and must be a regular file (a FIFO there is refused)."""
    path = lock_path(folder)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:  # ENXIO: a FIFO with no reader; ELOOP: a symlink
        raise UsageError(f"the fetch's lock {path} cannot be opened ({error.strerror}): remove it (the fetch "
                         "creates it, a regular file)") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):  # a FIFO, a device: bad input, refused without blocking
            raise UsageError(f"the fetch's lock {path} is {kind(found.st_mode)}, not a regular file: remove it "
                             "(the fetch creates it)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Problem(f"another fetch is writing {folder}", "wait for it to end, or give another --name") from None
        yield
    finally:
        os.close(fd)


def drop_other_partials(folder: str, files: list[listing.HubFile]) -> None:
    """Partial downloads of content this commit does not have (another commit's, fetched into this folder)."""
    wanted = {os.path.basename(hub_client.partial_path(folder, file)) for file in files}
    for stale in glob.glob(os.path.join(glob.escape(folder), hub_client.PARTIAL_DIR, "*.partial")):
        if os.path.basename(stale) not in wanted:
            os.remove(stale)


def local_files(folder: str) -> list[str]:
    """The folder's files as repository paths, without the fetch's own .cache and the manifest."""
    names = []
    for root, dirs, found in os.walk(folder):
        dirs[:] = [name for name in dirs if not (root == folder and name == ".cache")]
        names += [os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/") for name in found]
    return [name for name in names if name != manifest.NAME]


@dataclasses.dataclass(frozen=True)
class Getter:
    """How files come: from the Hub (downloaded) or from a copy made elsewhere (imported)."""
    get: Callable[[listing.HubFile], object]
    verb: str  # "fetching" / "importing"
    done: str  # "downloaded" / "copied"
    altered_fix: str


def downloads(request: Request, commit: str, folder: str) -> Getter:
    return Getter(lambda file: hub_client.download(request.repo, commit, file, folder), "fetching", "downloaded",
                  "the mirror or the connection altered it: check HF_ENDPOINT, then run fetch again")


def copies(source, folder: str) -> Getter:
    def get(file: listing.HubFile) -> None:
        target, partial = os.path.join(folder, file.path), hub_client.partial_path(folder, file)
        os.makedirs(os.path.dirname(target) or folder, exist_ok=True)
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        with open(partial, "wb") as handle:
            source.copy(file, handle)
        os.replace(partial, target)
    return Getter(get, "importing", "copied", "the copy is not the Hub's file its manifest records: copy it again "
                                              "from a complete fetch")


# Files got at once: huggingface_hub's snapshot_download takes 8; a mirror or CDN serves each stream
# at its own pace, so one at a time leaves most of the link idle (bench/fetch measures it).
WORKERS = 8


def ensure(request: Request, commit: str, folder: str, files: list[listing.HubFile], getter: Getter,
           known_good: Set[str] = frozenset()) -> None:
    """Every file present and verified, getting those missing or wrong (several at once); `known_good`
    are verified already (the same inodes, hashed once this run)."""
    wanted = []
    for number, file in enumerate(files, 1):
        local = os.path.join(folder, file.path)
        problem = None if file.path in known_good else verify.file_problem(local, file)
        if problem is None:
            continue
        if os.path.exists(local):
            say(f"{problem}: {getter.verb} it again")
            discard(folder, file)
        say(f"{getter.verb} {file.path} ({gib(file.size)}, file {number} of {len(files)})")
        wanted.append(file)

    def get(file: listing.HubFile) -> None:
        getter.get(file)
        problem = verify.file_problem(os.path.join(folder, file.path), file)
        if problem:
            discard(folder, file)
            raise Problem(f"{request.repo}@{commit[:12]}: {problem} after {getter.verb[:-3]}", getter.altered_fix)

    if not wanted:
        return
    with concurrent.futures.ThreadPoolExecutor(min(WORKERS, len(wanted))) as pool:
        futures = [pool.submit(get, file) for file in wanted]
        try:
            for future in futures:  # in order: the first file's failure is the one reported
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def fetch(request: Request) -> str:
    """The model fetched (or imported --from a copy), judged and verified; the manifest's path."""
    if request.source:
        return import_from(request)
    judged_for = target(request)
    folder = request.target
    pinned = pinned_here(request)
    if pinned is not None:  # a commit never changes: its metadata recorded here is the Hub's
        say(f"{pinned.named}: its manifest here lists the commit's files; verifying them without asking the Hub")
        commit, repo_files = pinned.commit, list(pinned.files)
    else:
        commit = hub_client.resolve_commit(request.repo, request.revision)
        say(f"{request.repo}@{request.revision} is commit {commit}")
        repo_files = hub_client.list_files(request.repo, commit)
    return staged_fetch(folder, request, judged_for, commit, repo_files, lambda stage: downloads(request, commit, stage))


def pinned_here(request: Request) -> manifest.Manifest | None:
    """The target's manifest when REVISION is the very commit it records for this repository: the units'
    fetch step at every start, verifying without the Hub (a Hub outage does not stop the server)."""
    if not COMMIT.fullmatch(request.revision):
        return None
    try:
        found = manifest.read(request.target)
    except Problem:
        return None
    return found if found and (found.repo, found.commit) == (request.repo, request.revision) else None


def import_from(request: Request) -> str:
    """No network: the files and the Hub's metadata (the manifest a fetch wrote) from --from."""
    source = imported.source(request.source)
    try:
        found = source.manifest()
    except UsageError:
        raise  # the --from copy is not one a fetch wrote: its own line and fix
    except Problem as problem:  # its manifest cannot be read as one
        raise Problem(f"--from {request.source}: {problem}", "copy the folder a `fetch` wrote, its manifest whole") \
            from None
    if found.repo != request.repo:
        raise Problem(f"--from {request.source} holds {found.repo}, not {request.repo}", f"give REPO {found.repo}")
    if COMMIT.fullmatch(request.revision) and request.revision != found.commit:
        raise Problem(f"--from {request.source} holds commit {found.commit}, not {request.revision}",
                      f"give {found.repo}@{found.commit}, or import the copy of that commit")
    judged_for = target(request)
    say(f"{found.repo}@{found.commit} from {request.source} (its manifest's Hub metadata, no network)")
    return staged_fetch(request.target, request, judged_for, found.commit, list(found.files),
                        lambda stage: copies(source, stage))


PATH_FIX = "check HF_ENDPOINT (unset it for the Hub) or the --from copy"


def contained(root: Path, remote_name: str, what: str) -> Path:
    """door.paths.contained, refused as bad input (exit 2) naming where the name came from."""
    try:
        return paths.contained(root, remote_name, what)
    except Problem as problem:
        raise UsageError(str(problem), PATH_FIX) from None


def staged_fetch(folder: str, request: Request, judged_for: Target, commit: str, repo_files: list[listing.HubFile],
                 getter_for: Callable[[str], Getter]) -> str:
    """The commit fetched into a stage beside the folder (its verified files hard-linked in, the rest got),
    judged and verified there, then put in the folder's place: a fetch that fails or is stopped leaves
    the folder as it was, byte for byte, and its stage to resume from. The manifest's path."""
    what = f"the listing of {request.repo}@{commit[:12]}"
    for file in repo_files:  # before anything is written
        contained(Path(folder), file.path, what)
    with only_fetch_into(folder):
        staged = replace.Staged(Path(folder))
        stage = str(staged.path)
        for file in repo_files:  # the stage's own folders (an earlier run's) lead nowhere else
            contained(staged.path, file.path, what)
        found = listing.strays(local_files(folder), repo_files) if os.path.isdir(folder) else []
        if found:
            raise Problem(f"{folder} holds {len(found)} weight file(s) that {request.repo}@{commit[:12]} does not "
                          f"have (e.g. {found[0]}), which vLLM would load beside it",
                          "remove them, or fetch into another --name")
        good = {file.path for file in repo_files
                if verify.file_problem(os.path.join(folder, file.path), file) is None} if os.path.isdir(folder) else set()
        if good and len(good) == len(repo_files):  # all there and whole (a re-run, the units' pinned step):
            fetch_into(folder, request, judged_for, commit, repo_files, getter_for(folder), good)  # the manifest only
            shutil.rmtree(stage, ignore_errors=True)
            return os.path.join(folder, manifest.NAME)
        for name in listing.strays(local_files(stage), repo_files):  # the stage is this fetch's scratch
            os.remove(os.path.join(stage, name))
        if os.path.isdir(folder):
            staged.carry(local_files(folder), skip=lambda name: False)
        linked = {name for name in good if os.path.samefile(os.path.join(stage, name), os.path.join(folder, name))}
        fetch_into(stage, request, judged_for, commit, repo_files, getter_for(stage), linked)
        staged.swap()
    return os.path.join(folder, manifest.NAME)


def fetch_into(folder: str, request: Request, judged_for: Target, commit: str,
               repo_files: list[listing.HubFile], getter: Getter, known_good: Set[str] = frozenset()) -> str:
    """The commit's files got and verified in `folder` (the stage, or the folder itself when every file
    there is whole), judged, its manifest written (atomically)."""
    gpu = judged_for.gpu
    drop_other_partials(folder, repo_files)
    small = listing.small_files(repo_files)
    ensure(request, commit, folder, small, getter, known_good)
    loaded = image_facts.load()
    minimum, deprecated = turing_settings.quantization_from(loaded.facts)
    missing = {file.path for file in repo_files if file.is_weight_format
               and verify.file_problem(os.path.join(folder, file.path), file, check_hash=False)}
    sizes = {file.path: file.size for file in repo_files}
    results, loaded_names = judge.judge(folder, sizes, missing, judged_for.device, read_meminfo(), minimum,
                                        request.drafter, judged_for.card, deprecated)
    for result in results:
        say(f"{result.name} on {gpu}: {result.status.value} {result.message}")
    refusal = judge.refusal(results)
    if refusal is not None:
        raise Problem(f"{request.repo}@{commit[:12]} cannot serve on {gpu}: {refusal.message}; no weights were "
                      f"{getter.done}", refusal.fix)
    weights = listing.chosen_weights(repo_files, loaded_names)
    say(f"{len(weights)} weight file(s), {gib(sum(file.size for file in weights))}")
    ensure(request, commit, folder, weights, getter, known_good)
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    doc = manifest.document(request.repo, request.revision, commit, small + weights, results, when, gpu)
    return manifest.write(folder, doc)



def main(argv: list[str], env: Mapping[str, str]) -> int:
    output.install(output.secrets_in(env))  # the token, keys, HF_ENDPOINT's password: masked in every line
    try:
        request = parse_request(argv, env)
        path = fetch(request)
    except Problem as problem:  # nothing to fetch (exit 0), bad input (2: a word, the Hub's answer, the --from
        # copy, a remote name leading out of the folder), a refusal (1)
        say(f"{problem}; {problem.fix}" if problem.fix else str(problem))
        return problem.exit_code
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
