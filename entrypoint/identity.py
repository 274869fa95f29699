"""Running as any uid (OpenShift and `docker run --user 4242:0` start the image as a uid with no
passwd entry and HOME=/): the user's name and HOME fall back to values that work, before the
settings derive their cache paths from HOME.

- HOME not writable: HOME becomes a private folder under /tmp (caches the units do not put on a
  volume then live for the container's life, as they would under an unwritable HOME not at all).
- No passwd entry for the uid: USER and LOGNAME name it (getpass.getuser(), which torch's inductor
  calls for its cache folder, reads them before asking the passwd database, where it would fail).
Root with its own HOME changes nothing."""
from __future__ import annotations

import os
import pwd
from typing import Mapping

FALLBACK_HOME = "/tmp/vllm-turing-home"


def fallback_env(env: Mapping[str, str], uid: int, home_writable: bool, user_known: bool) -> dict[str, str]:
    """The names to add or replace in the environment (pure)."""
    added = {}
    if not home_writable:
        added["HOME"] = f"{FALLBACK_HOME}-{uid}"
    if not user_known and not (env.get("USER") and env.get("LOGNAME")):
        added.update(USER=env.get("USER") or f"uid{uid}", LOGNAME=env.get("LOGNAME") or env.get("USER") or f"uid{uid}")
    return added


def writable_dir(path: str) -> bool:
    return bool(path) and os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def known_user(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def with_identity(env: Mapping[str, str]) -> Mapping[str, str]:
    """`env` with the fallbacks applied, the fallback HOME made (mode 0700)."""
    uid = os.geteuid()
    home = env.get("HOME", "")
    # a relative HOME is bad input the settings refuse, naming it, not a folder to replace
    usable = writable_dir(home) or (bool(home) and not os.path.isabs(home))
    added = fallback_env(env, uid, usable, known_user(uid))
    if not added:
        return env
    if "HOME" in added:
        os.makedirs(added["HOME"], mode=0o700, exist_ok=True)
    return {**env, **added}
