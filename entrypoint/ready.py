"""`python3 -m entrypoint.ready`: the Kubernetes readiness probe, meaning "this model answers": the
served model (SERVED_MODEL_NAME, else MODEL, as the entrypoint passes them to vLLM) is listed by the
server's own /v1/models, asked with the API key when one is required (read from API_KEY_FILE, never
from argv). /health says only that the process is up (the liveness probe); a server that answers
/health but serves another model, or rejects the key the pod holds, is not ready.

Exit 0 when the model is listed; 1 with one line on stderr (the kubelet shows it in the pod's events:
it names what was asked and what came back, never the key). Standard library only."""
from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from typing import Mapping

from .api_key import server_api_key
from door.redact import redact
from .settings import SettingsError, parse_settings
from door import files
from door.problem import Problem

COMMAND = ("python3", "-m", "entrypoint.ready")
# The kubelet gives the probe its timeoutSeconds (10); the request gives up first, with its own line.
REQUEST_TIMEOUT_S = 8.0
MAX_BODY_BYTES = 4 * 2**20


def listed_models(body: bytes) -> list[str]:
    """The ids of an OpenAI model list; Problem when the body is not one."""
    try:
        cards = files.own_json(body).get("data")
        ids = [card["id"] for card in cards]
    except (ValueError, AttributeError, TypeError, KeyError, RecursionError):
        raise Problem("/v1/models answered with something that is not an OpenAI model list") from None
    if not all(isinstance(name, str) for name in ids):
        raise Problem("/v1/models answered with a model id that is not text")
    return ids


def judge(served: str, ids: list[str]) -> None:
    if served not in ids:
        shown = ", ".join(repr(name) for name in ids[:5]) or "no model"
        raise Problem(f"/v1/models lists {shown}, not the served model {served!r}")


def ask(port: int, key: str | None, timeout_s: float = REQUEST_TIMEOUT_S) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                     headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as error:
        hint = ("" if error.code != 401 else " (the key the probe sent is not the server's)" if key
                else " (the server requires a key: set API_KEY_FILE for the probe as for the server)")
        raise Problem(f"/v1/models on port {port} answered {error.code}{hint}") from None
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise Problem(f"/v1/models on port {port}: no answer ({reason})") from None


def check(env: Mapping[str, str]) -> None:
    """Problem naming why the served model is not answering."""
    try:
        settings = parse_settings(env)
        key = server_api_key(env, settings.api_key_file) or (env.get("VLLM_API_KEY") or "").strip() or None
    except SettingsError as error:
        raise Problem(f"bad setting {error}") from None
    body = ask(settings.port, key)
    if len(body) > MAX_BODY_BYTES:
        raise Problem(f"/v1/models answered more than {MAX_BODY_BYTES} bytes")
    judge(settings.served_model_name or settings.model, listed_models(body))


def main(env: Mapping[str, str]) -> int:
    try:
        check(env)
    except Problem as problem:
        print(f"vllm-turing ready: not ready: {redact(str(problem))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
