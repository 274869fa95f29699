"""The Hub, through huggingface_hub (which reads HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH and
HF_HUB_OFFLINE itself: the token never passes through this code, argv or a message). Every failure
becomes HubProblem: one line naming the repository and the fix."""
from __future__ import annotations

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


def download(repo: str, commit: str, file: HubFile, folder: str) -> str:
    """The file into `folder` (huggingface_hub resumes a partial download kept under folder/.cache)."""
    from huggingface_hub import hf_hub_download

    return _guarded(lambda: hf_hub_download(repo, file.path, revision=commit, local_dir=folder), repo, commit)
