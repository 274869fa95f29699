"""Real vLLM release files for the tests, obtained with `pip download --no-deps`.

Each release is laid out under $VLLM_TURING_CACHE/releases/<version>/ the way
site-packages holds it, so the clamp finds the release's METADATA next to the
package exactly as it does in an installed vLLM:

    releases/<version>/site/vllm/v1/attention/ops/triton_unified_attention.py
    releases/<version>/site/vllm/v1/attention/ops/triton_prefill_attention.py   (encoder attention)
    releases/<version>/site/vllm/model_executor/models/gemma4_unified.py  (the fp16 patch's target,
                                                                           where the release has it)
    releases/<version>/site/vllm-<version>.dist-info/METADATA

A member of OPTIONAL_MEMBERS that a release's wheel lacks is listed in
releases/<version>/site/ABSENT_NAME, so it is not downloaded again to learn the same.
A cached release that lacks one of these files (cached before it was listed) is completed.

Wheels (about 330 MB each) are deleted once the few files are extracted.
`package_tarball(version)` keeps the whole `vllm/` Python package of one release
(for the GPU tier, which runs the real kernel from it).

    python -m tooling.vllm_releases [VERSION ...]   # fetch (all by default)
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from contract import pins
from door import children, files
from door.problem import Problem

RELEASES = (
    "0.19.0", "0.19.1", "0.20.0", "0.20.2", "0.21.0", "0.22.1", "0.23.0",
    "0.24.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0",
    "0.31.0", "0.32.0", "0.33.0",
)
PINNED = pins.VLLM_VERSION
LAUNCHER_MEMBER = "vllm/v1/attention/ops/triton_unified_attention.py"
ENCODER_LAUNCHER_MEMBER = "vllm/v1/attention/ops/triton_prefill_attention.py"
LAUNCHER_MEMBERS = (LAUNCHER_MEMBER, ENCODER_LAUNCHER_MEMBER)
# The 12B's encoder-free vision embedder (patches/fp16_upcast): not in every release (0.19.0 lacks it).
GEMMA4_UNIFIED_MEMBER = "vllm/model_executor/models/gemma4_unified.py"
OPTIONAL_MEMBERS = (GEMMA4_UNIFIED_MEMBER,)
ABSENT_NAME = "absent-members.txt"
PARALLEL_DOWNLOADS = 3


def cache_root() -> Path:
    return Path(os.environ.get("VLLM_TURING_CACHE", "~/.cache/vllm-turing")).expanduser()


def release_dir(version: str) -> Path:
    return cache_root() / "releases" / version


def site_dir(version: str) -> Path:
    return release_dir(version) / "site"


def launcher_path(version: str, member: str = LAUNCHER_MEMBER) -> Path:
    return site_dir(version) / member


def _metadata_member(names: list[str], version: str) -> str:
    wanted = f"vllm-{version}.dist-info/METADATA"
    if wanted not in names:
        raise Problem(f"wheel of vllm {version} has no {wanted}")
    return wanted


def _kept_wheel(version: str) -> Path | None:
    """A wheel left in the cache by an earlier step (e.g. the pinned one)."""
    for wheel in sorted((cache_root() / "wheels").glob(f"vllm-{version}-*.whl")):
        return wheel
    return None


def _download_wheel(version: str, into: Path) -> Path:
    kept = _kept_wheel(version)
    if kept is not None:
        return kept
    result = children.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--quiet", f"vllm=={version}", "-d", str(into)])
    wheels = sorted(into.glob(f"vllm-{version}-*.whl"))
    if result.returncode != 0 or not wheels:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Problem(f"pip download vllm=={version} failed: {tail[0]}")
    return wheels[0]


def _publish(staging: Path, final: Path) -> None:
    """Move a fully written staging folder into place; a concurrent winner is kept. Into an existing
    folder, each file it lacks is moved in (one rename each, so a reader never sees half a file)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(final)
        return
    except OSError:
        if not final.exists():
            raise
    for path in sorted(p for p in staging.rglob("*") if p.is_file()):
        destination = final / path.relative_to(staging)
        if not destination.exists():
            destination.parent.mkdir(parents=True, exist_ok=True)
            path.rename(destination)


def _extract(wheel: Path, members_of, into: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for name in members_of(names):
            zf.extract(name, into)


def _fetch(version: str, members_of, final: Path) -> Path:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-", dir=root) as tmp:
        tmp = Path(tmp)
        wheel = _download_wheel(version, tmp / "download")
        staging = tmp / "staging"
        _extract(wheel, lambda names: members_of(names, version, staging), staging)
        _publish(staging, final)
    return final


def _launcher_members(names: list[str], version: str) -> list[str]:
    missing = [member for member in LAUNCHER_MEMBERS if member not in names]
    if missing:
        raise Problem(f"wheel of vllm {version} has no {', '.join(missing)}")
    optional = [member for member in OPTIONAL_MEMBERS if member in names]
    return [*LAUNCHER_MEMBERS, *optional, _metadata_member(names, version)]


def _absent(version: str) -> set[str]:
    """The optional members the release's wheel was found to lack."""
    try:
        return set(files.read_own(site_dir(version) / ABSENT_NAME).split())
    except FileNotFoundError:
        return set()


def _complete(version: str) -> bool:
    absent = _absent(version)
    return (all(launcher_path(version, m).is_file() for m in LAUNCHER_MEMBERS)
            and all(m in absent or launcher_path(version, m).is_file() for m in OPTIONAL_MEMBERS))


def _with_absent_list(names: list[str], version: str, into: Path) -> list[str]:
    """The members to extract; the optional ones the wheel lacks are written to ABSENT_NAME in `into`."""
    members = _launcher_members(names, version)
    into.mkdir(parents=True, exist_ok=True)
    (into / ABSENT_NAME).write_text("".join(f"{m}\n" for m in OPTIONAL_MEMBERS if m not in members),
                                    encoding="utf-8")
    return members


def ensure_release(version: str, member: str = LAUNCHER_MEMBER) -> Path:
    """The release's launcher file `member` (the unified one by default), downloading and extracting
    the release's launcher files (and the optional members it has) on first use."""
    if not _complete(version):
        _fetch(version, _with_absent_list, site_dir(version))
    return launcher_path(version, member)


def release_member(version: str, member: str) -> Path | None:
    """An OPTIONAL_MEMBERS file of the release, None where its wheel has none (fetched on first use)."""
    ensure_release(version)
    return None if member in _absent(version) else launcher_path(version, member)


def ensure_releases(versions=RELEASES, parallel: int = PARALLEL_DOWNLOADS) -> dict[str, Path]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        return dict(zip(versions, pool.map(ensure_release, versions)))


def _package_members(names: list[str], version: str, _into: Path) -> list[str]:
    python_files = [n for n in names if n.startswith("vllm/") and n.endswith(".py")]
    return python_files + [_metadata_member(names, version)]


def package_tarball(version: str = PINNED) -> Path:
    """A .tar.gz of the release's whole `vllm/` Python package plus its METADATA."""
    tarball = release_dir(version) / f"vllm-{version}-python.tar.gz"
    if tarball.is_file():
        return tarball
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-pkg-", dir=cache_root()) as tmp:
        tree = _fetch(version, _package_members, Path(tmp) / "tree")
        partial = Path(tmp) / tarball.name
        with tarfile.open(partial, "w:gz") as tar:
            for entry in sorted(tree.iterdir()):
                tar.add(entry, arcname=entry.name)
        shutil.move(str(partial), tarball)
    return tarball


def main(argv: list[str]) -> int:
    versions = argv or list(RELEASES)
    unknown = [v for v in versions if v.count(".") != 2]
    if unknown:
        print(f"not a release version: {', '.join(unknown)} (expected e.g. 0.33.0)", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        paths = ensure_releases(versions)
    except Problem as exc:
        print(exc, file=sys.stderr)
        return 1
    for version, path in paths.items():
        print(f"{version}  {path}")
    print(f"{len(paths)} releases ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
