"""The server's environment: the entrypoint's own settings removed, and the clamp's names of the
first release (VLLM_TURING_*) passed on under their new names, for one release, with a warning."""
from __future__ import annotations

from typing import Mapping

from contract.layout import DEPRECATED_ENV_NAMES
from contract.verdict import Result, passed, warned
from .api_key import key_source
from .settings import ENTRYPOINT_ONLY

NAME = "env"


def renamed(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(old, new) for each deprecated name that is set."""
    return [(old, new) for old, new in DEPRECATED_ENV_NAMES.items() if env.get(old, "").strip()]


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the server runs with: no entrypoint-only setting and no deprecated name (vLLM warns
    "Unknown vLLM environment variable" for each VLLM_* name it does not own); a deprecated name's
    value under its new name, unless the new name is set too."""
    out = {name: value for name, value in env.items()
           if name not in ENTRYPOINT_ONLY and name not in DEPRECATED_ENV_NAMES}
    for old, new in renamed(env):
        if not out.get(new, "").strip():
            out[new] = env[old]
    return out


def check_env(env: Mapping[str, str]) -> Result:
    old_names = renamed(env)
    source = key_source(env)
    guarded = f"; the /v1 routes require the API key ({source})" if source else "; no API key: /v1 is open to whoever reaches the port"
    if not old_names:
        return passed(NAME, f"the server starts without the entrypoint's {len(ENTRYPOINT_ONLY)} own settings{guarded}")
    ignored = [old for old, new in old_names if env.get(new, "").strip()]
    return warned(NAME, "deprecated name(s), passed on under the new name for this release only: "
                        + ", ".join(f"{old} is now {new}" for old, new in old_names)
                        + (f" ({', '.join(ignored)} ignored: the new name is set too)" if ignored else ""),
                  "rename " + ", ".join(f"{old} to {new}" for old, new in old_names)
                  + " in the env file or unit; the old names stop working in the next release")
