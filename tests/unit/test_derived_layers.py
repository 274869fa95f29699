"""What the derived image ships from the build context, computed from the Dockerfile and .dockerignore: only
what runs in the image (no host-only or test-only module), within its share of the derived layers' budget.

The image tier measures the real layers (tests/image/test_derived_layers_budget.py); this tier holds the
part the repository decides: which files of the context reach the image's stages, and their bytes."""
import fnmatch
import re

from contract import layout
from tests import REPO
from tests.unit.test_dockerfile_agreement import instructions

# The stages whose layers the image keeps: the image and the stage it is built FROM; the proof and the
# compile record's stages are left behind (the image copies only the proof's outputs).
SHIPPED_STAGES = ("clamped", "image")
# The context's files the image ships (sources and data) at most: 942,229 B on main bfa18de, 914,581 B once
# patches/fitcheck/image_passes.py and the clamp's ranking (now tooling/clamp_ranking.py) stayed out. Their
# bytecode, the clamp's patched vLLM files, the proof's outputs and the image facts fill the rest of the
# derived layers (tests/image/test_derived_layers_budget.py measures them all).
SHIPPED_SOURCE_BUDGET = 930_000
# Host-only or test-only: run on the build host, in the proof stage or by the tests, never in the image.
HOST_ONLY = ("patches/fitcheck/image_passes.py", "door/children.py", "contract/locks/", "contract/compile-records/")


def ignore_rules() -> list[tuple[bool, str]]:
    """.dockerignore's rules in order: (excluded?, pattern)."""
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    return [(not line.startswith("!"), line.lstrip("!").rstrip("/")) for line in lines if line and not line.startswith("#")]


def in_context(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Docker's rule: the last pattern that matches the path, or a folder above it, decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for excludes, pattern in rules:
        bare = pattern.removeprefix("**/")
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes) or (
                pattern.startswith("**/") and any(fnmatch.fnmatchcase(part, bare) for part in parts)):
            excluded = excludes
    return not excluded


def context_files(source: str, rules) -> list[str]:
    """The context's files under `source` (a file or a folder), as the build sees them."""
    root = REPO / source
    found = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return [rel for p in found if in_context(rel := p.relative_to(REPO).as_posix(), rules)]


def shipped_files() -> set[str]:
    """Every context file a kept stage puts in the image: its COPYs from the context, and the bind-mounted
    folder a RUN copies in less what it removes."""
    rules, stage, shipped = ignore_rules(), None, set()
    for text in instructions(REPO / "Dockerfile"):
        if text.startswith("FROM "):
            stage = text.split()[-1]
        elif stage not in SHIPPED_STAGES:
            continue
        elif text.startswith("COPY ") and "--from=" not in text:
            for source in text.split()[1:-1]:
                shipped.update(context_files(source, rules))
        elif text.startswith("RUN ") and (copied := re.search(r"--mount=type=bind,source=(\S+),target=(\S+) .*cp -R \2 ", text)):
            removed = {path.removeprefix(f"{layout.INSTALL_DIR}/") for path in re.findall(r"\brm (\S+)", text)}
            shipped.update(set(context_files(copied.group(1), rules)) - removed)
    return shipped


def test_the_build_only_fit_passes_and_the_host_only_modules_stay_out_of_the_image():
    shipped = shipped_files()
    assert "patches/fitcheck/recorder.py" in shipped and "entrypoint/__main__.py" in shipped, "the search finds what ships"
    assert "patches/fitcheck/image_passes.py" in context_files("patches", ignore_rules()), "and the context's passes"
    assert not [path for path in shipped if path.startswith(HOST_ONLY) or "__pycache__" in path]


def test_every_shipped_file_is_of_an_image_package():
    assert {path.split("/")[0] for path in shipped_files()} == set(layout.IMAGE_PACKAGES)


def test_the_shipped_sources_stay_within_their_share_of_the_derived_layers_budget():
    sizes = {path: (REPO / path).stat().st_size for path in shipped_files()}
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    assert sum(sizes.values()) <= SHIPPED_SOURCE_BUDGET, (
        f"the image ships {sum(sizes.values()):,} B of the build context, over {SHIPPED_SOURCE_BUDGET:,} B; "
        f"largest: {', '.join(f'{p} {sizes[p]:,} B' for p in largest)}")
