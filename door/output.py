"""Every line printed while secrets are in play passes door.redact and a mask of those exact secrets:
the project's own lines (`clean`), and the words of third parties: every logging record (made clean
where it is made, by the record factory, so no handler or propagation can miss it) and every warning
(warnings.showwarning). `install(secrets)` registers the secrets of a run (a token, a key, a URL's
password) and the hooks, once per process; `secrets_in(env)` finds those an environment holds.

    output.install(output.secrets_in(os.environ))
"""
from __future__ import annotations

import logging
import threading
import urllib.parse
import warnings
from typing import Iterable, Mapping

from door import files
from door.problem import Problem
from door.redact import MASK, redact, secret_name

MIN_SECRET = 4  # shorter values would mask ordinary words
TOKEN_FILE_SETTINGS = ("HF_TOKEN_PATH",)

_secrets: set[str] = set()
_lock = threading.Lock()
_installed = False


def secrets() -> list[str]:
    with _lock:
        return sorted(_secrets, key=len, reverse=True)


def clean(text: str) -> str:
    """`text` with every registered secret, and whatever door.redact recognises, masked."""
    for secret in secrets():
        text = text.replace(secret, MASK)
    return redact(text)


def url_secrets(url: str) -> list[str]:
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return []
    found = [parts.password, urllib.parse.unquote(parts.password or "")] if parts.password else []
    if parts.username and parts.password is None:  # https://TOKEN@host
        found += [parts.username, urllib.parse.unquote(parts.username)]
    return found


def secrets_in(env: Mapping[str, str]) -> list[str]:
    """The secrets an environment holds: each secret-bearing setting's value (HF_TOKEN, *_API_KEY, ...),
    the token a token file setting names, and the credentials of every URL value (HF_ENDPOINT, proxies,
    PIP_INDEX_URL, ...)."""
    found: list[str] = []
    for name, value in env.items():
        if secret_name(name) and value:
            found.append(value.strip())
    for name in TOKEN_FILE_SETTINGS:
        if env.get(name):
            try:
                found.append(files.read_bytes(env[name], name, 64 * 1024).decode("utf-8", "replace").strip())
            except Problem:
                pass
    for name, value in env.items():  # HF_ENDPOINT, the proxies, PIP_INDEX_URL, ...: any URL with credentials
        if "://" in value and "@" in value:
            found += url_secrets(value)
    return [value for value in found if value and len(value) >= MIN_SECRET]


def _clean_record(record: logging.LogRecord) -> logging.LogRecord:
    """The record as made where nothing in it needs masking (its msg and args kept for whoever reads them);
    else its text masked."""
    try:
        message = record.getMessage()
        if (masked := clean(message)) != message:
            record.msg, record.args = masked, None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            if (masked := clean(text)) != text:
                record.exc_text, record.exc_info = masked, None
        if record.stack_info:
            record.stack_info = clean(record.stack_info)
    except Exception:  # a record whose arguments do not format: its text is dropped, never shown raw
        record.msg, record.args = "(a log record that could not be shown)", None
    return record


def install(found: Iterable[str] = ()) -> None:
    """Registers `found` (more secrets, added to any registered before) and, the first time, the hooks."""
    global _installed
    with _lock:
        _secrets.update(value for value in found if value and len(value) >= MIN_SECRET)
        if _installed:
            return
        _installed = True
    make_record = logging.getLogRecordFactory()
    logging.setLogRecordFactory(lambda *args, **kwargs: _clean_record(make_record(*args, **kwargs)))
    show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        show(clean(str(message)), category, filename, lineno, file, clean(line) if line else line)
    warnings.showwarning = showwarning
