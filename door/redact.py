"""Secrets out of every line the entrypoint prints: the value of a secret-bearing option or JSON key
(a name with a part key, token, secret, password, passwd or credential(s): `--api-key`, `--hf-token`,
`--x-secret=...`, `"aws_secret_access_key": "..."`), and the credentials of a URL
(`https://user:pass@host` -> `https://***@host`), become `***`.

A name matches by its parts (split at - _ . and spaces), so `--max-num-batched-tokens` and
`--ssl-keyfile` are not secret-bearing and keep their values. The word after a secret-bearing
option is masked even when it starts with a dash (`--api-key -x` is a key to the user), but not
when it is another long option (`-x --api-key KEY`: the next option's value is the secret)."""
from __future__ import annotations

import re

MASK = "***"
SECRET_PARTS = frozenset(("key", "token", "secret", "password", "passwd", "credential", "credentials", "apikey"))
_VALUE = r"""(?:'[^']*'?|"(?:[^"\\]|\\.)*"?|[^\s'"]+)"""
OPTION_VALUE = re.compile(rf"(?<![\w-])(--?[A-Za-z0-9][\w.-]*)(=|\s+)(?!--)({_VALUE})")
JSON_VALUE = re.compile(r"""(["']([\w.-]+)["']\s*:\s*)("(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s,}\]]+)""")
ASSIGNMENT = re.compile(rf"(?<![\w-])([A-Za-z][\w.]*)(=)({_VALUE})")
URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@")


# a last part that makes the name point at where a secret is, not hold it: API_KEY_FILE, --hf-token-path
LOCATION_PARTS = frozenset(("file", "path", "dir", "folder"))


def secret_name(name: str) -> bool:
    """Whether an option, setting or JSON key name holds a secret: one of its parts is in SECRET_PARTS
    and its last part does not make it a location (API_KEY_FILE names a file, not a key)."""
    parts = [part for part in re.split(r"[-_.\s]+", name.lower()) if part]
    return bool(parts) and parts[-1] not in LOCATION_PARTS and any(part in SECRET_PARTS for part in parts)


def _masked(match: re.Match, name_group: int = 1) -> str:
    if not secret_name(match.group(name_group)):
        return match.group(0)
    return match.group(0)[:match.start(match.lastindex) - match.start(0)] + MASK


def _mask_values(pattern: re.Pattern, text: str) -> str:
    """Each value `pattern` (groups: name, separator, value) finds after a secret-bearing name masked.
    Scanned name by name: a name that holds no secret gives up only itself, so what follows it is
    looked at in turn (`-0 -api-key=KEY`: `-0` does not swallow the next option, nor
    `VLLM_EXTRA_ARGS='HF_TOKEN=KEY'` the assignment inside its value)."""
    out, position = [], 0
    while (match := pattern.search(text, position)) is not None:
        if secret_name(match.group(1)):
            out.append(text[position:match.start(3)] + MASK)
            position = match.end(3)
        else:
            out.append(text[position:match.end(1)])
            position = match.end(1)
    return "".join(out) + text[position:]


def redact(text: str) -> str:
    """`text` with every secret value it shows replaced by MASK."""
    text = URL_CREDENTIALS.sub(rf"\1{MASK}@", text)
    text = _mask_values(OPTION_VALUE, text)
    text = JSON_VALUE.sub(lambda match: _masked(match, 2), text)
    return _mask_values(ASSIGNMENT, text)


def redact_words(words: list[str]) -> list[str]:
    """An argv with the value of each secret-bearing option (the next word, or after `=`) masked."""
    out: list[str] = []
    for index, word in enumerate(words):
        previous = words[index - 1] if index else ""
        if previous.startswith("-") and "=" not in previous and secret_name(previous.lstrip("-")):
            out.append(MASK)
        else:
            out.append(redact(word))
    return out
