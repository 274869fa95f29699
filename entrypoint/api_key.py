"""The API key vLLM requires on its /v1 routes: read from the file API_KEY_FILE names (a compose
secret, a Quadlet Secret=, a Kubernetes Secret volume) or taken from vLLM's own VLLM_API_KEY, and
handed to the server in its environment only, never in argv (where /proc/1/cmdline, `docker
inspect`, the exec log line and `check --json` would show it). Refusals name the file, never the key."""
from __future__ import annotations

from typing import Mapping

from contract.layout import API_KEY_PATH, ENV_API_KEY, ENV_API_KEY_FILE
from door import files
from door.problem import Problem
from .settings import SettingsError

MAX_KEY_FILE_BYTES = 64 * 1024


def _refuse(path: str, expected: str) -> SettingsError:
    return SettingsError(ENV_API_KEY_FILE, path, expected,
                         f"Put the key alone on one line in that file (e.g. a secret mounted at {API_KEY_PATH}), "
                         f"or unset {ENV_API_KEY_FILE}.")


def read_key_file(path: str) -> str:
    """The key in `path`: a regular file (never blocks on a FIFO or a device), one line of printable
    characters without spaces, at most 64 KiB."""
    try:
        data = files.read_bytes(path, "the file", MAX_KEY_FILE_BYTES)
    except Problem as problem:
        raise _refuse(path, f"a usable key file ({problem})") from None
    try:
        key = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise _refuse(path, "UTF-8 text") from None
    if not key.isprintable() or any(char.isspace() for char in key):
        raise _refuse(path, "one key on one line (no spaces, tabs, control characters or second line)")
    return key


def server_api_key(env: Mapping[str, str], key_file: str | None) -> str | None:
    """The key to put in the server's VLLM_API_KEY, None when no key is required."""
    given = env.get(ENV_API_KEY, "")
    if key_file is None:
        return None  # VLLM_API_KEY, if set, reaches vLLM untouched with the rest of the environment
    if given.strip():
        raise SettingsError(ENV_API_KEY_FILE, key_file, f"one source for the key, but {ENV_API_KEY} is set too",
                            f"Unset {ENV_API_KEY} or {ENV_API_KEY_FILE}.")
    return read_key_file(key_file)


def key_source(env: Mapping[str, str]) -> str | None:
    """Which setting requires a key, for the report (never the key itself)."""
    if env.get(ENV_API_KEY_FILE, "").strip():
        return ENV_API_KEY_FILE
    if env.get(ENV_API_KEY, "").strip():
        return ENV_API_KEY
    return None
