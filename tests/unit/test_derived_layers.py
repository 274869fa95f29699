"""What the derived image ships from the build context, computed from the Dockerfile and .dockerignore: only
what runs in the image (no host-only or test-only module), within its share of the derived layers' budget.

The image tier measures the real layers (tests/image/test_derived_layers_budget.py); this tier holds the
part the repository decides: which files of the context reach the image's stages, and their bytes."""
import fnmatch
import re

from contract import layout
from tests import REPO
from tests.unit.test_dockerfile_agreement import instructions

# The stages whose layers the image keeps: the image and the stage it is built FROM. The sources' stages, the
# code stage, the proof and the compile record's stage are left behind: the image copies the code stage's zip
# and the proof's outputs.
SHIPPED_STAGES = ("clamped", "image")
# The code stage: the folder it compiles the sources into, and the one zip it writes (CODE_ZIP).
CODE_STAGE, CODE_FOLDER = "code", "/opt/vllm-turing-code"
# The context's files the image ships (sources and data) at most: 942,229 B on main bfa18de, 914,581 B once
# patches/fitcheck/image_passes.py and the clamp's ranking (now tooling/clamp_ranking.py) stayed out. They
# ship zipped with their bytecode (the zip within ZIP_BUDGET); the clamp's patched vLLM files, the proof's
# outputs and the image facts fill the rest of the derived layers (tests/image/test_derived_layers_budget.py
# measures them all).
SHIPPED_SOURCE_BUDGET = 930_000
# The zip of our code at most, as the code stage makes it (727,390 B in the image when it first shipped; built
# here a few hundred bytes more, the paths its bytecode names being longer). The derived layers' other parts
# take about 540 kB of their 1.5 MiB.
ZIP_BUDGET = 900_000
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


def stage_files() -> dict[str, set[str]]:
    """Per stage, the context's files its own COPYs and the stage it is built FROM put there."""
    rules, stage, files = ignore_rules(), None, {}
    for text in instructions(REPO / "Dockerfile"):
        if text.startswith("FROM "):
            parent, stage = text.split()[1], text.split()[-1]
            files[stage] = set(files.get(parent, ()))
        elif text.startswith("COPY ") and "--from=" not in text:
            for source in text.split()[1:-1]:
                files[stage].update(context_files(source, rules))
    return files


def code_step() -> str:
    """The code stage's step: it copies the stage it mounts to CODE_FOLDER, removes some, and zips the rest."""
    texts = instructions(REPO / "Dockerfile")
    start = texts.index(f"FROM ${{BASE_IMAGE}} AS {CODE_STAGE}")
    [step] = [text for text in texts[start + 1:] if not text.startswith("FROM ")][:1]
    return step


def zipped_files() -> set[str]:
    """The context's files the code stage zips: the .py files of the stage it mounts, less what it removes."""
    step = code_step()
    mounted = re.search(rf"--mount=type=bind,from=(\S+),target=(\S+) .*cp -R \2 {CODE_FOLDER};", step).group(1)
    removed = {path.removeprefix(f"{CODE_FOLDER}/") for path in re.findall(rf"\brm ({CODE_FOLDER}/\S+);", step)}
    return {path for path in stage_files()[mounted] - removed if path.endswith(".py")}


def shipped_files() -> set[str]:
    """Every context file the image ships: in the zip, or copied by a kept stage."""
    files = stage_files()
    return zipped_files() | {path for stage in SHIPPED_STAGES for path in files[stage]}


def test_the_build_only_fit_passes_and_the_host_only_modules_stay_out_of_the_image():
    shipped = shipped_files()
    assert "patches/fitcheck/recorder.py" in shipped and "entrypoint/__main__.py" in shipped, "the search finds what ships"
    assert {"entrypoint/sitecustomize.py", "patches/turing_clamp/ranked-configs.json"} <= shipped, "and the files copied"
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


def test_the_file_the_patched_vllm_reads_by_path_is_there_before_the_proof():
    """The clamp's runtime (patches/turing_clamp/runtime.py, inside vLLM) reads the ranked configurations by
    path: the stage the proof and the image are built FROM holds them there, so the proof's launches are the
    image's (without them the fit table lost its ranked entries)."""
    default = re.search(r'^_VLLM_TURING_DEFAULT_RANKED = "(\S+)"$', (REPO / "patches" / "turing_clamp" / "runtime.py").read_text(),
                        re.M).group(1)
    source = default.removeprefix(f"{layout.INSTALL_DIR}/")
    assert source in stage_files()["clamped"]
    assert f"COPY {source} {default.rsplit('/', 1)[0]}/" in instructions(REPO / "Dockerfile")
    texts = instructions(REPO / "Dockerfile")
    assert [text.split()[-1] for text in texts if text.startswith("FROM clamped ")] == ["proof", "image"]
