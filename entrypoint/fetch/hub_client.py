"""The Hub, read through door.remote (a deadline, a byte cap, bounded resumes and a cycle check on every
read, the same in the image and against the tests' hostile peer); huggingface_hub gives only its
settings (HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN, HF_TOKEN_PATH) and its URLs (the token never passes
through argv or a message). Its own network reads are not used: they are bounded on that library's
terms, and its retry warnings print the endpoint's URL, password and all.
Every failure becomes a Problem: one line naming the repository or HF_ENDPOINT, and the fix; a UsageError
(exit 2) where the input is bad: the repository or revision named does not exist, or the answer is not
the Hub's (no commit, a path out of the folder, a size beyond its cap)."""
from __future__ import annotations

import hashlib
import os
import re
import urllib.parse

from door import files, remote
from door.problem import Problem, UsageError
from .listing import HubFile, parse_listing


# The bounds of every read of the Hub (door.remote): a total deadline per answer or listing, a byte cap
# per answer, and for a file a deadline that grows with its size at MIN_RATE, a bound on resumes and on
# silence (a silent connection is resumed, within the bound).
API_DEADLINE_S = 60.0
API_CAP = 32 * 2**20           # one answer or listing page (the Hub's pages hold 1,000 entries, a few 100 KiB)
MAX_PAGES = 1000               # 1,000,000 files
DOWNLOAD_BASE_S = 120.0
# bytes/s: a file slower than this on average is stopped (and resumed by the next run); the 8 files got at
# once share the link, so this is a link of 2 MiB/s at least, and a 5 GiB shard's deadline is under 6 hours
MIN_RATE = 256 * 2**10
IDLE_S = 60.0
MAX_RESUMES = 5
ENDPOINT_FIX = "check HF_ENDPOINT (unset it for the Hub): its answer is not the Hub's"
NETWORK_FIX = "check the network or HF_ENDPOINT, then run fetch again (it resumes)"
COMMIT = re.compile(r"[0-9a-f]{40}")


def _endpoint() -> str:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise Problem("HF_HUB_OFFLINE is set, so nothing can be fetched", "unset HF_HUB_OFFLINE")
    return constants.ENDPOINT.rstrip("/")


def _headers() -> dict:
    """The token as huggingface_hub's settings give it (HF_TOKEN, else the file HF_TOKEN_PATH names, else
    $HF_HOME/token), read here through door.files: huggingface_hub's own build_hf_headers asks the
    endpoint for its agent registry (a network read of its own) and its get_token may exchange or
    refresh tokens over the network. The token is sent, never shown (door.remote scrubs what it sent
    from every message)."""
    import huggingface_hub
    from huggingface_hub import constants

    from ..hub_access import ENV_HF_TOKEN_PATH, MAX_TOKEN_FILE_BYTES, token_file_refusal

    headers = {"user-agent": f"vllm-turing-fetch; hf_hub/{huggingface_hub.__version__}"}
    token = (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or "").strip()
    if not token:
        path = os.environ.get(ENV_HF_TOKEN_PATH) or constants.HF_TOKEN_PATH
        refusal = token_file_refusal(path)  # a FIFO, a device, a huge file: refused, never read
        if refusal is not None:
            raise UsageError(str(refusal).splitlines()[0].rstrip("."), "then run fetch again")
        if os.path.lexists(path):
            try:
                token = files.read_bytes(path, ENV_HF_TOKEN_PATH, MAX_TOKEN_FILE_BYTES).decode("utf-8", "replace").strip()
            except Problem as problem:
                raise UsageError(str(problem), ENDPOINT_FIX) from None
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def _problem(problem: remote.RemoteProblem, repo: str, revision: str) -> Problem:
    """A failed read as the Hub's errors mean it (its X-Error-Code header, as huggingface_hub reads it)."""
    code = problem.headers.get("x-error-code", "")
    if code == "GatedRepo":
        return Problem(f"{repo} is gated: the Hub refused this token or none was given",
                       "accept the model's terms on the Hub, then set HF_TOKEN or HF_TOKEN_PATH (a file) "
                       "to a token with access")
    if code == "RepoNotFound":
        return UsageError(f"{repo} is not a model repository on the Hub (or it is private)",
                          "check the name, or set HF_TOKEN or HF_TOKEN_PATH for a private one")
    if code == "RevisionNotFound":
        return UsageError(f"{repo} has no revision {revision!r}", "give a branch, tag or commit it has")
    if problem.shape:  # past a cap, a length that lies, a cycle, a redirect loop: not the Hub
        return UsageError(f"HF_ENDPOINT's answer for {repo}@{revision}: {problem}", ENDPOINT_FIX)
    return Problem(f"the Hub did not answer for {repo}@{revision} ({problem})", NETWORK_FIX)


def _read(url: str, repo: str, revision: str, what: str, not_found_usage: bool = False):
    """The JSON of one answer; Problem."""
    headers = _headers()  # its own refusal, outside the try below (which names HF_ENDPOINT)
    try:
        data = remote.get(url, name=what, deadline_s=API_DEADLINE_S, cap_bytes=API_CAP, headers=headers)
        return files.parse_json(data, what)
    except remote.RemoteProblem as problem:
        if not_found_usage and problem.status in (401, 404) and not problem.headers.get("x-error-code"):
            raise UsageError(f"{repo} is not a model repository on the Hub (or it is private)",
                             "check the name, or set HF_TOKEN or HF_TOKEN_PATH for a private one") from None
        raise _problem(problem, repo, revision) from None
    except Problem as problem:
        raise UsageError(str(problem), ENDPOINT_FIX) from None


def commit_of(doc: object, repo: str, revision: str) -> str:
    """The commit an answer of /api/models/REPO/revision/REV names (pure); Problem when it names none."""
    sha = doc.get("sha") if isinstance(doc, dict) else None
    if not (isinstance(sha, str) and COMMIT.fullmatch(sha)):
        raise UsageError(f"HF_ENDPOINT answered for {repo}@{revision} without a commit sha "
                         f"({'sha is ' + files.json_kind(sha) if isinstance(doc, dict) else 'not a JSON object'}), "
                         "so the fetch cannot be pinned", ENDPOINT_FIX)
    return sha


def resolve_commit(repo: str, revision: str) -> str:
    url = f"{_endpoint()}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
    return commit_of(_read(url, repo, revision, f"the Hub's answer for {repo}@{revision}", not_found_usage=True),
                     repo, revision)


def list_files(repo: str, commit: str) -> list[HubFile]:
    url = f"{_endpoint()}/api/models/{repo}/tree/{commit}?recursive=true&expand=false"
    what = f"the Hub's listing of {repo}@{commit[:12]}"
    entries: list = []
    headers = _headers()  # its own refusal, outside the try below (which names HF_ENDPOINT)
    try:
        for page in remote.pages(url, name=what, deadline_s=API_DEADLINE_S * 4, cap_bytes=API_CAP,
                                 headers=headers, max_pages=MAX_PAGES):
            found = files.parse_json(page.body, what)
            if not isinstance(found, list):
                raise UsageError(f"{what} is {files.json_kind(found)}, not a list of files", ENDPOINT_FIX)
            entries += found
    except remote.RemoteProblem as problem:
        raise _problem(problem, repo, commit) from None
    except Problem as problem:
        raise UsageError(str(problem), ENDPOINT_FIX) from None
    try:
        return parse_listing(entries, what)
    except Problem as problem:
        raise UsageError(str(problem), ENDPOINT_FIX) from None


# Where a download in progress is kept, named by the content it is to have (the Hub's SHA-256 or git blob
# id) and its path: an interrupted run leaves it there and the next run resumes it (an HTTP Range request) instead of
# starting over. huggingface_hub's own hf_hub_download cannot: since 2.x it writes every download to a
# process-unique temporary file and deletes it on failure (file_download._download_to_tmp_and_move).
PARTIAL_DIR = os.path.join(".cache", "vllm-turing", "partial")


def partial_path(folder: str, file: HubFile) -> str:
    """Named by the content and the path: two paths of one content (a repository may hold both) are got
    at the same time into two files."""
    where = hashlib.sha1(file.path.encode()).hexdigest()[:12]
    return os.path.join(folder, PARTIAL_DIR, f"{file.sha256 or file.blob_id}-{where}.partial")


def download_deadline_s(size: int) -> float:
    return DOWNLOAD_BASE_S + size / MIN_RATE


def download(repo: str, commit: str, file: HubFile, folder: str) -> str:
    """The file into `folder` (door.remote: bounded, resumed), from the partial file a previous run left;
    the path written. Problem when it cannot be got."""
    from huggingface_hub import hf_hub_url

    target = os.path.join(folder, file.path)
    partial = partial_path(folder, file)
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    os.makedirs(os.path.dirname(target) or folder, exist_ok=True)
    url = hf_hub_url(repo, file.path, revision=commit, endpoint=_endpoint())
    with open(partial, "ab"):
        pass  # there, empty or as the last run left it
    with open(partial, "r+b") as handle:
        try:
            remote.download(url, handle, name=f"{file.path} of {repo}@{commit[:12]}", size=file.size,
                            deadline_s=download_deadline_s(file.size), headers=_headers(),
                            max_resumes=MAX_RESUMES, idle_s=IDLE_S)
        except remote.RemoteProblem as problem:
            raise _problem(problem, repo, commit) from None
    os.replace(partial, target)
    return target
