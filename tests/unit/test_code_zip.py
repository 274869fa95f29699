"""Our code as the image ships it: one zip of every module's source and, beside it, its bytecode
(buildtool/image/code_zip.py, run by the Dockerfile's code stage), first on the image's PYTHONPATH.

Built here as the code stage builds it (the files it zips, its -x pattern, -X no_debug_ranges) and run
from a folder that holds nothing else: the modules import, the code that reads its own package's files
reads them through the loader, a traceback shows the zip's path and the source line, and the bytecode in
the zip is what runs. The image tier checks the image's own zip (tests/image/test_image_contents.py)."""
import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from buildtool.image import code_zip
from contract import layout
from tests import REPO
from tests.unit.test_bytecode import excluded_pattern
from tests.unit.test_derived_layers import CODE_FOLDER, ZIP_BUDGET, code_step, zipped_files
from tests.unit.test_dockerfile_agreement import instructions

# Run with the zip alone on the path, in a fresh interpreter without -X no_debug_ranges: a module compiled at
# import has column positions, one whose bytecode came from the zip has none.
FROM_ZIP = r"""
import json, sys, traceback
import patches.fp16_upcast.placement as upcast
import patches.turing_clamp.placement as clamp
from contract import pins
from door import files
from entrypoint.checks.clamp import code_root
from patches.fitcheck import families

def columns(function):
    return any(start is not None for _, _, start, _ in function.__code__.co_positions())

try:
    files.read_own(sys.argv[1])
except OSError as error:
    frame = traceback.extract_tb(error.__traceback__)[-1]
print(json.dumps({"blocks": [clamp.RUNTIME_BLOCK, upcast.RUNTIME_BLOCK], "families": [f.name for f in families.FAMILIES],
                  "frame": [frame.filename, frame.lineno, frame.line], "fit_root": code_root("patches.fitcheck"),
                  "columns": [columns(files.read_own), columns(clamp.site_of), columns(pins.image_tag)]}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple:
    """(the zip, the folder the packer compiled)."""
    work = tmp_path_factory.mktemp("code-stage")
    for path in zipped_files():
        (work / "code" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, work / "code" / path)
    archive = work / "vllm-turing.zip"
    done = subprocess.run([sys.executable, "-X", "no_debug_ranges", str(REPO / "buildtool" / "image" / "code_zip.py"),
                           str(work / "code"), str(archive), "-x", excluded_pattern()],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return archive, work / "code"


def run_from_zip(archive, *args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(archive), "PYTHONDONTWRITEBYTECODE": "1"})


def test_the_image_runs_the_code_stages_zip_first_on_its_path():
    texts = instructions(REPO / "Dockerfile")
    assert f"PYTHONPATH={layout.IMAGE_PYTHONPATH}" in next(text for text in texts if text.startswith("ENV "))
    step = code_step()
    assert f"cp -R /run/vllm-turing-sources {CODE_FOLDER};" in step and "code_zip" in step
    assert f"/run/vllm-turing-code-zip.py {CODE_FOLDER} {layout.CODE_ZIP} -x '{excluded_pattern()}'" in step
    assert f"COPY --from=code {layout.CODE_ZIP} {layout.INSTALL_DIR}/" in texts


def test_the_zip_holds_each_source_with_its_bytecode_but_the_build_sides_within_its_budget(built):
    archive, folder = built
    names = set(zipfile.ZipFile(archive).namelist())
    sources = zipped_files()
    assert {name for name in names if name.endswith(".py")} == sources
    build_side = {path for path in sources if re.search(excluded_pattern(), f"{CODE_FOLDER}/{path}")}
    assert "patches/fitcheck/compiler.py" in build_side and "entrypoint/__main__.py" not in build_side
    assert {name for name in names if name.endswith(".pyc")} == {f"{path}c" for path in sources - build_side}
    assert archive.stat().st_size <= ZIP_BUDGET, f"the zip is {archive.stat().st_size:,} B, over {ZIP_BUDGET:,} B"
    again = folder.parent / "again.zip"
    code_zip.write_zip(folder, str(again))
    assert again.read_bytes() == archive.read_bytes(), "the same sources give the same zip"


def test_the_code_runs_from_the_zip_reads_its_own_files_through_the_loader_and_shows_its_lines(built, tmp_path):
    from patches.fitcheck import families
    from patches.fp16_upcast.placement import RUNTIME_BLOCK as UPCAST_BLOCK
    from patches.turing_clamp.placement import RUNTIME_BLOCK as CLAMP_BLOCK

    archive, _ = built
    done = run_from_zip(archive, "-c", FROM_ZIP, str(tmp_path / "absent"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["blocks"] == [CLAMP_BLOCK, UPCAST_BLOCK] and "vllm-turing clamp" in CLAMP_BLOCK
    assert found["families"] == [family.name for family in families.FAMILIES]
    filename, line, text = found["frame"]
    assert filename == f"{archive}/door/files.py"
    assert text == (REPO / "door" / "files.py").read_text().splitlines()[line - 1].strip() and "open(" in text
    assert found["fit_root"] == str(archive), "the preflight starts the fit check with the zip on its path"
    # the zip's bytecode ran (no columns: compiled with -X no_debug_ranges); a build-side module, which
    # ships its source alone, was compiled at import (columns): the search tells the two apart
    assert found["columns"] == [False, False, True]


@pytest.mark.parametrize("module", ["patches.turing_clamp", "patches.fp16_upcast", "imagefacts"])
def test_the_modules_the_image_runs_with_python_m_run_from_the_zip(built, tmp_path, module):
    done = run_from_zip(built[0], "-m", module, "--help", cwd=tmp_path)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]


def test_an_uncaught_exception_shows_the_zipped_modules_line_through_sitecustomize(built, tmp_path):
    """Python's own printer reads a traceback's lines from files by name, so it shows none of the zip's; the
    image's sitecustomize.py (beside the zip on its path) prints with the traceback module, which asks the
    loader."""
    archive, _ = built
    site = tmp_path / "install"
    site.mkdir()
    shutil.copy2(REPO / "entrypoint" / "sitecustomize.py", site / "sitecustomize.py")
    raising = ["-c", f"from door import files; files.read_own({str(tmp_path / 'absent')!r})"]
    line = 'File "{}/door/files.py", line '.format(archive)

    def traceback_of(path: str) -> str:
        done = subprocess.run([sys.executable, *raising], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.returncode == 1 and line in done.stderr and "FileNotFoundError" in done.stderr, done.stderr
        return done.stderr.split(line, 1)[1].splitlines()[1].strip()

    assert traceback_of(str(archive)) == "FileNotFoundError: [Errno 2] No such file or directory: " \
        f"{str(tmp_path / 'absent')!r}", "without sitecustomize.py no line shows"
    assert "open(" in traceback_of(f"{archive}:{site}")
