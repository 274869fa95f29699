"""The Hub, through huggingface_hub (which reads HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH and
HF_HUB_OFFLINE itself: the token never passes through this code, argv or a message). Every failure
becomes HubProblem: one line naming the repository and the fix."""
from __future__ import annotations

import hashlib
import os

from .listing import HubFile


class HubProblem(Exception):
    def __init__(self, message: str, fix: str, usage: bool = False):
        super().__init__(message)
        self.fix = fix
        self.usage = usage  # the repository or revision named does not exist: bad input (exit 2)


def _problem(error: Exception, repo: str, revision: str) -> HubProblem:
    from huggingface_hub import errors

    if isinstance(error, errors.GatedRepoError):
        return HubProblem(f"{repo} is gated: the Hub refused this token or none was given",
                          "accept the model's terms on the Hub, then set HF_TOKEN or HF_TOKEN_PATH (a file) "
                          "to a token with access")
    if isinstance(error, errors.RepositoryNotFoundError):
        return HubProblem(f"{repo} is not a model repository on the Hub (or it is private)",
                          "check the name, or set HF_TOKEN or HF_TOKEN_PATH for a private one", usage=True)
    if isinstance(error, errors.RevisionNotFoundError):
        return HubProblem(f"{repo} has no revision {revision!r}", "give a branch, tag or commit it has", usage=True)
    if isinstance(error, errors.OfflineModeIsEnabled):
        return HubProblem(f"HF_HUB_OFFLINE is set, so {repo} cannot be fetched", "unset HF_HUB_OFFLINE")
    first = (str(error).splitlines() or [""])[0][:200]
    return HubProblem(f"the Hub did not answer for {repo}@{revision} ({type(error).__name__}: {first})",
                      "check the network or HF_ENDPOINT, then run fetch again (it resumes)")


def _guarded(call, repo: str, revision: str):
    try:
        return call()
    except Exception as error:  # huggingface_hub's and the HTTP client's errors: one line each
        raise _problem(error, repo, revision) from None


def resolve_commit(repo: str, revision: str) -> str:
    from huggingface_hub import HfApi

    return _guarded(lambda: HfApi().model_info(repo, revision=revision).sha, repo, revision)


def list_files(repo: str, commit: str) -> list[HubFile]:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    entries = _guarded(lambda: list(HfApi().list_repo_tree(repo, revision=commit, recursive=True)), repo, commit)
    return sorted((HubFile(entry.path, int(entry.size), entry.lfs.sha256 if entry.lfs else None, entry.blob_id)
                   for entry in entries if isinstance(entry, RepoFile)), key=lambda file: file.path)


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


def download(repo: str, commit: str, file: HubFile, folder: str) -> str:
    """The file into `folder`, through huggingface_hub's own HTTP download (its retries, its token, its
    progress bar), resumed from the partial file a previous run left; the path written."""
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    target = os.path.join(folder, file.path)
    partial = partial_path(folder, file)
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    os.makedirs(os.path.dirname(target) or folder, exist_ok=True)

    def get() -> None:
        with open(partial, "ab"):
            pass  # there, empty or as the last run left it
        with open(partial, "r+b") as handle:
            have = handle.seek(0, os.SEEK_END)
            if have > file.size:  # not a prefix of this content: start over
                handle.truncate(0)
                have = handle.seek(0)
            url = hf_hub_url(repo, file.path, revision=commit, endpoint=constants.ENDPOINT)
            http_get(url, handle, resume_size=have, headers=build_hf_headers(), expected_size=file.size,
                     displayed_filename=file.path)
        os.replace(partial, target)
    _guarded(get, repo, commit)
    return target
