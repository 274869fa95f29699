"""The typed values of build.py's flags: one parser per kind of value, each an argparse `type=`.

Every parser takes the flag's text and returns a typed value, or raises argparse.ArgumentTypeError
with the reason and the fix in one line (argparse prefixes "argument --flag:"). Nothing here reads
more than the text it is given, except the parsers that say they look at the filesystem; no parser
allocates by the size of a number it was given (digits are bounded before int() sees them).
"""
from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from door import files
from door.redact import redact
from door.problem import Problem, UsageError

# Docker's reference grammar (github.com/distribution/reference, regexp.go), ASCII only.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])(?::[0-9]{{1,5}})?"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
_NAME_MAX = 255
_REFERENCE_MAX = _NAME_MAX + 1 + 128 + 1 + 200  # name, tag, digest: no reference is longer
_IMAGE_ID = re.compile(r"(?:sha256:)?[0-9a-f]{12,64}", re.ASCII)
_EXAMPLE_REF = "vllm-turing:0.33.0 or registry.example:5000/me/vllm-turing:0.33.0"


def _shown(text: str, limit: int = 80) -> str:
    """The user's text as a refusal quotes it: repr (line breaks escaped), cut short."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


class ImageRef(str):
    """An image reference Docker accepts: [domain/]path[:tag][@digest], path lowercase."""


def _first_reason(text: str) -> str:
    """Why text is no reference, for the refusal (the commonest mistakes first)."""
    if not text:
        return "empty"
    if not text.isascii() or not text.isprintable():
        return "holds a character outside printable ASCII (a line break, a control character)"
    if any(c.isspace() for c in text):
        return "holds white space"
    if ".." in text:
        return "holds '..'"
    name = text.split("@", 1)[0].rsplit(":", 1)[0] if ":" in text.rsplit("/", 1)[-1] else text.split("@", 1)[0]
    if name.split("/", 1)[-1] != name.split("/", 1)[-1].lower():
        return "the repository name must be lowercase"
    return "is not [registry/]name[:tag][@digest] (lowercase name, tag of letters, digits, _ . -, at most 128)"


def _reference(text: str, *, digest: bool = True) -> ImageRef:
    if len(text) > _REFERENCE_MAX:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is longer than {_REFERENCE_MAX} characters; give an "
                                         f"image reference such as {_EXAMPLE_REF}")
    match = _REFERENCE.fullmatch(text)
    domain = match and match.group("domain")
    # A first component is a registry only when it looks like one (Docker's splitDockerDomain).
    if domain and not ("." in domain or ":" in domain or domain == "localhost" or domain.startswith("[")):
        match = None if domain != domain.lower() else match
    if not match or len(match.group("name")) > _NAME_MAX or ".." in text:
        reason = _first_reason(text) if match is None or ".." in text else f"name longer than {_NAME_MAX} characters"
        raise argparse.ArgumentTypeError(f"{_shown(text)} {reason}; give an image reference such as {_EXAMPLE_REF}")
    if not digest and match.group("digest"):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: a tag cannot carry a digest; give name:tag such as vllm-turing:0.33.0")
    return ImageRef(text)


def image_reference(text: str) -> ImageRef:
    """An image to run or build on: --image, --base, --os-image."""
    return _reference(text)


def image_tag(text: str) -> ImageRef:
    """A name the build writes (--tag, --base-tag): a reference without a digest."""
    return _reference(text, digest=False)


def image_or_id(text: str) -> str:
    """`verify IMAGE`: a reference, or an image ID (sha256:... or its short hex)."""
    return text if _IMAGE_ID.fullmatch(text) else image_reference(text)


def base_image(text: str) -> str:
    """--base: 'pypi' (a base built from PyPI wheels), or an image reference."""
    return text if text == "pypi" else image_reference(text)


_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}(?:(?:a|b|rc|\.post|\.dev)[0-9]{1,10})*", re.ASCII)


def vllm_version(text: str) -> str:
    """A vLLM release as it appears in tags and on PyPI: 0.33.0, 0.34.0rc1."""
    if not _VERSION.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a vLLM release number; give one such as 0.33.0")
    return text


# The most GPUs one host or one pod has (a 16-GPU HGX board, with room): indices and counts beyond
# are typos, refused before anything is sized by them.
MAX_GPUS = 64
_GPU_NUMBER = re.compile(r"[0-9]{1,3}", re.ASCII)
_GPUS_EXPECTED = f"all, distinct GPU indices such as 0,1, or a number of GPUs from 1 to {MAX_GPUS} such as 2"


@dataclass(frozen=True)
class GpuSelection:
    """--gpus: every GPU present (all), the first `count`, or exactly `indices` (sorted, distinct)."""
    every: bool = False
    count: int | None = None
    indices: tuple[int, ...] = ()


def _gpu_number(item: str, text: str, high: int, what: str) -> int:
    where = f"{_shown(text)}" + (f": {_shown(item)}" if item != text else "")
    if re.fullmatch(r"[0-9]+", item, re.ASCII) and (len(item) > 3 or int(item) > high):
        raise argparse.ArgumentTypeError(f"{where}: {what} is at most {high}; expected {_GPUS_EXPECTED}")
    if not _GPU_NUMBER.fullmatch(item):
        raise argparse.ArgumentTypeError(f"{where} is not a number in ASCII digits; expected {_GPUS_EXPECTED}")
    return int(item)


def gpus(text: str) -> GpuSelection:
    if text == "all":
        return GpuSelection(every=True)
    if "," not in text:
        count = _gpu_number(text, text, MAX_GPUS, "a count of GPUs")
        if count < 1:
            raise argparse.ArgumentTypeError(f"{_shown(text)}: a count of GPUs is at least 1; expected {_GPUS_EXPECTED}")
        return GpuSelection(count=count)
    items = text.split(",")
    if len(items) > MAX_GPUS:
        raise argparse.ArgumentTypeError(f"{_shown(text)}: more than {MAX_GPUS} indices; expected {_GPUS_EXPECTED}")
    indices = [_gpu_number(item, text, MAX_GPUS - 1, "a GPU index") for item in items]
    if len(set(indices)) != len(indices):
        twice = next(i for i in indices if indices.count(i) > 1)
        raise argparse.ArgumentTypeError(f"{_shown(text)}: GPU {twice} is named twice; name each index once, such as 0,1")
    return GpuSelection(indices=tuple(sorted(indices)))


def port(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text, re.ASCII) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{_shown(text)}: expected a port from 1 to 65535")
    return int(text)


def bind_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The host address a port is published on: an IPv4 or IPv6 address (no name, no zone)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        address = None
    if address is None or getattr(address, "scope_id", None):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not an IP address; give one such as 127.0.0.1, 0.0.0.0 or ::1")
    return address


def service_url(text: str) -> str:
    """An http(s) URL of a service inside the cluster or on the network: a host, no credentials (the
    URL is written into manifests), no whitespace."""
    parsed = urllib.parse.urlsplit(text) if text.isprintable() and " " not in text else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname or "@" in parsed.netloc:
        raise argparse.ArgumentTypeError(f"{_shown(redact(text))}: expected an http(s) URL with a host and no user or "
                                         "password, such as http://prometheus-operated.monitoring.svc:9090")
    try:
        parsed.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(redact(text))}: its port is not a number from 0 to 65535") from None
    return text


def bounded_int(low: int, high: int, what: str):
    """A whole number in [low, high], in ASCII digits (no int() of an unbounded digit string)."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"[0-9]{1,%d}" % len(str(high)), text, re.ASCII) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{_shown(text)}: expected {what}, a whole number from {low} to {high}")
        return int(text)
    parse.__name__ = what.replace(" ", "_")
    return parse


def gib(text: str) -> float:
    """A size in GiB: positive, finite, under 4096 (no model's weights are larger)."""
    try:
        value = float(text) if len(text) <= 32 and text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 4096):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: expected a size in GiB above 0 and below 4096, such as 9.6 "
                                         "(`du -sh` of the model's .safetensors files)")
    return value


# What breaks a value written into a unit, and why (checked in this order).
_UNIT_PATH_CHARACTERS = (
    (":", "':' separates a bind mount's source from its target (-v a:b, Quadlet Volume=)"),
    ("$", "'$' starts a variable in compose files"),
    ("{", "'{' and '}' delimit a variable in compose files"),
    ("}", "'{' and '}' delimit a variable in compose files"),
    ("\\", "a backslash is an escape in unit files"),
    ('"', "quotes are read differently by compose, podman and systemd"),
    ("'", "quotes are read differently by compose, podman and systemd"),
)


def _unit_safe_path(text: str) -> str:
    if not text or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{_shown(text)}: a path written into the units is one line of printable "
                                         "characters; rename the directory or give a symlink to it")
    # a space inside is written with systemd's quoting (buildtool/units/quadlet.py); at an end,
    # systemd and compose would drop it
    if text != text.strip():
        raise argparse.ArgumentTypeError(f"{_shown(text)}: white space at an end of a path is dropped by systemd and "
                                         "compose; give the path without it")
    for character, why in _UNIT_PATH_CHARACTERS:
        if character in text:
            raise argparse.ArgumentTypeError(f"{_shown(text)}: {why}; give a path without it (a symlink to the directory)")
    return text


def host_directory(text: str) -> str:
    """A host directory written into the units: absolute, or under the user's home (~/...)."""
    if not (text.startswith("/") or text == "~" or text.startswith("~/")):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: expected an absolute path (or ~/...), such as /srv/models")
    return _unit_safe_path(text)


def absolute_directory(text: str) -> str:
    """A host directory written into the units that must be absolute (--lib-dir)."""
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: expected an absolute path, such as /usr/lib/x86_64-linux-gnu")
    return _unit_safe_path(text)


def unit_file_path(text: str) -> str:
    """A file path written into the units and not read here (--api-key-file: the key is in no unit)."""
    return _unit_safe_path(text)


def existing_file(text: str) -> Path:
    """A regular file that must exist now (--token-file): looked at, not read. A FIFO, a device or a
    folder is named as what it is (door.files), never taken for a missing file."""
    path = _local_path(text)
    if not os.path.lexists(path):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: no such file; give the path of an existing file")
    try:
        with files.opened(str(path), _shown(text)):
            pass
    except Problem as problem:
        raise argparse.ArgumentTypeError(f"{problem}; give the path of a regular file") from None
    return path


SECRET_FILE_CAP = 64 * 1024


def secret_file(text: str) -> Path:
    """A file holding one secret (a Hub token): a regular file, not empty, one line of UTF-8 text of
    at most 64 KiB, read now through the door so a wrong one is refused before anything starts.
    The secret itself is in no message."""
    path = existing_file(text)
    try:
        secret = files.read_text(str(path), _shown(text), SECRET_FILE_CAP).strip()
    except Problem as problem:
        raise argparse.ArgumentTypeError(f"{problem}; give a file holding the token alone on one line") from None
    if "\n" in secret or not secret.isprintable() or not secret.isascii():
        raise argparse.ArgumentTypeError(f"{_shown(text)} holds more than one printable ASCII line; "
                                         "give a file holding the token alone on one line")
    return path


CA_BUNDLE_CAP = 4 * 2**20  # Debian's whole ca-certificates bundle is about 220 KiB


def ca_bundle(text: str) -> Path:
    """--ca-cert: a PEM bundle of CA certificates, read now through the door (a regular file, at
    most 4 MiB, UTF-8 text holding a certificate), so a wrong file is refused before any build starts."""
    path = existing_file(text)
    try:
        pem = files.read_text(str(path), _shown(text), CA_BUNDLE_CAP)
    except Problem as problem:
        raise argparse.ArgumentTypeError(f"{problem}; give a PEM bundle of CA certificates") from None
    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise argparse.ArgumentTypeError(f"{_shown(text)} holds no PEM certificate (no -----BEGIN CERTIFICATE----- "
                                         "line); give a PEM bundle of CA certificates")
    return path


def existing_directory(text: str) -> Path:
    """A directory that must exist now (--weights-from)."""
    path = _local_path(text)
    if not _exists(path, Path.is_dir):
        raise argparse.ArgumentTypeError(f"{_shown(text)}: no such directory; give the path of an existing directory")
    return path


def file_to_read(text: str) -> Path:
    """A file read when the command runs (--env-file): a path on one line; its reader says when it is
    missing or unreadable, so a doc can name a file an earlier line writes."""
    return _local_path(text)


def output_directory(text: str) -> Path:
    """--out: where files are written (made when missing)."""
    return _local_path(text)


def _exists(path: Path, kind) -> bool:
    try:
        return kind(path)
    except OSError:  # a name too long, a directory not searchable
        return False


def _local_path(text: str) -> Path:
    if not text or "\0" in text or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{_shown(text)}: expected a path on one line of printable characters")
    return Path(text).expanduser()


# Kubernetes' names (k8s.io/apimachinery/pkg/util/validation).
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*", re.ASCII)
_LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", re.ASCII)


def kubernetes_name(text: str) -> str:
    """A DNS-1123 subdomain (a claim's or a RuntimeClass's name): lowercase, at most 253."""
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a Kubernetes name (DNS-1123: lowercase letters, digits, "
                                         "'-' and '.', starting and ending alphanumeric, at most 253); "
                                         "give one such as vllm-turing-models")
    return text


def node_label(text: str) -> tuple[str, str]:
    """KEY=VALUE of a node label: KEY [prefix/]name by Kubernetes' qualified-name rules, VALUE a label value."""
    key, sep, value = text.partition("=")
    prefix, slash, name = key.rpartition("/")
    good_key = bool(sep) and _LABEL_NAME.fullmatch(name) is not None and (
        not slash or (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix) is not None))
    good_value = value == "" or _LABEL_NAME.fullmatch(value) is not None
    if not (good_key and good_value):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)}: expected KEY=VALUE of a node label (KEY [dns.prefix/]name, each part and VALUE at most 63 "
            "letters, digits, '-', '_', '.'), e.g. cloud.google.com/gke-accelerator=nvidia-tesla-t4")
    return key, value


_UNPRINTABLE = re.compile(r"[^\x20-\x7e\u00a0-\U0010ffff]|[\u2028\u2029\x85]")


def one_line(message: str) -> str:
    """A refusal fit for one line of stderr: line breaks and control characters shown escaped."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), message)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the flag (no usage block), raised as
    UsageError for build.py to print and exit 2."""

    def _get_values(self, action, arg_strings):
        # argparse before Python 3.12 drops a value that is exactly "--" (`--replicas=--`) and hands
        # the action [], untyped; the value is typed like any other (found by tests/unit/test_build_flags.py)
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)

    def parse_known_args(self, args=None, namespace=None):
        # argparse types the positionals before it reports an option it does not know, so
        # `model fetch --from DIR org/m` was refused as "REPO 'DIR' is not a Hub id": the option
        # the user got wrong is named first (a parser with subcommands leaves their options to them)
        if args is not None and not any(isinstance(action, argparse._SubParsersAction) for action in self._actions):
            if (unknown := self._unknown_option(args)) is not None:
                self.error(f"unrecognized arguments: {unknown}")
        return super().parse_known_args(args, namespace)

    def _unknown_option(self, args) -> str | None:
        """The first argument that reads as an option of none of this parser's actions."""
        for arg in args:
            if arg == "--":
                return None
            found = self._parse_optional(arg)   # (action, ...) before Python 3.12, a list of them since
            if found is not None and all(match[0] is None for match in (found if isinstance(found, list) else [found])):
                return arg.split("=", 1)[0]
        return None

    def error(self, message: str):
        raise UsageError(one_line(f"{self.prog}: {message}; see `{self.prog} --help`"))

