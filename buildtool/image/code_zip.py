"""Our image packages as the image runs them: one zip on its PYTHONPATH (contract.layout.CODE_ZIP) holding
each module's source and, beside it, its bytecode, compiled by the image's own Python.

The Dockerfile's code stage runs this file alone, bind-mounted (standard library only, nothing of the
repository imported): `python3 -X no_debug_ranges code_zip.py SOURCES ZIP -x PATTERN`. That stage is no
ancestor of the image, so the loose sources and their compile never reach a layer the image ships; the
image copies the zip. zipimport takes a legacy .pyc beside its .py (compileall's -b). The bytecode is
unchecked-hash: nothing to stat at import, and the zip is never written after the build (the image tier
holds each .pyc to its source's hash). Its file names are the zip's paths (compileall's ddir), so a
traceback names a module where its __file__ does, and shows its lines, which zipimport hands linecache
from the source beside the bytecode. Modules PATTERN names (the build side's: the fit check's recording
and compiling, the clamp's apply, the writers; tests/unit/test_bytecode.py holds that no start imports
one) ship their source alone. Only .py files are taken: data the code reads by path stays a file in the
image. The same sources give the same zip (entries sorted, one timestamp).
"""
import argparse
import compileall
import py_compile
import re
import sys
import zipfile
from pathlib import Path

TAKEN = (".py", ".pyc")
STAMP = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the entries carry no build time


def compile_tree(sources: Path, zip_path: str, no_bytecode: str) -> bool:
    """Writes a .pyc beside every .py under `sources` that `no_bytecode` does not match; False when one
    does not compile."""
    return compileall.compile_dir(str(sources), quiet=1, ddir=zip_path, rx=re.compile(no_bytecode), legacy=True,
                                  invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)


def entries(sources: Path) -> list[Path]:
    """The files the zip takes, in its order."""
    return sorted(path for path in sources.rglob("*")
                  if path.is_file() and path.suffix in TAKEN and "__pycache__" not in path.parts)


def write_zip(sources: Path, zip_path: str) -> None:
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in entries(sources):
            info = zipfile.ZipInfo(path.relative_to(sources).as_posix(), STAMP)
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED, 9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="compile our packages and zip them with their sources")
    parser.add_argument("sources", type=Path, help="a folder holding the packages (compiled in place)")
    parser.add_argument("zip", help="the zip to write, at the path it will have on PYTHONPATH")
    parser.add_argument("-x", dest="no_bytecode", required=True, metavar="PATTERN",
                        help="the modules that ship their source alone (re.search on their path)")
    args = parser.parse_args(argv)
    if not compile_tree(args.sources, args.zip, args.no_bytecode):
        print(f"code_zip: a module under {args.sources} does not compile", file=sys.stderr)
        return 1
    write_zip(args.sources, args.zip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
