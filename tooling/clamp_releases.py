"""Runs the clamp cycle on every release 0.19.0-0.33.0, for each site (the unified-attention and the
encoder-attention launcher), and prints figures and the tables.

  bench/clamp_releases [--cold] [--write-doc docs/clamp.md] [VERSION ...]

--cold empties $VLLM_TURING_CACHE/releases first (wheels are downloaded again).
--write-doc replaces the generated table in that Markdown file.
"""
import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from patches.turing_clamp.placement import SITES
from tooling import clamp_cycle, vllm_releases
from door import files
from door.problem import Problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", default=list(vllm_releases.RELEASES))
    parser.add_argument("--cold", action="store_true", help="download every release again")
    parser.add_argument("--write-doc", type=Path, help="Markdown file whose generated table to replace")
    args = parser.parse_args()
    if args.cold:
        shutil.rmtree(vllm_releases.cache_root() / "releases", ignore_errors=True)

    started = time.monotonic()
    try:
        vllm_releases.ensure_releases(args.versions)
    except Problem as exc:
        print(exc, file=sys.stderr)
        return 1
    fetched = time.monotonic() - started
    print(f"releases ready ({'cold' if args.cold else 'as cached'}): {len(args.versions)} in {fetched:.1f} s")

    passed = True
    for site in SITES.values():
        cycles = []
        with tempfile.TemporaryDirectory() as tmp:
            for version in args.versions:
                start = time.monotonic()
                cycles.append(clamp_cycle.run_cycle(version, Path(tmp) / version, site))
                print(f"  {site.name} {version}: cycle {time.monotonic() - start:.2f} s, "
                      f"{'pass' if cycles[-1].passed else 'FAIL'}")
        table = clamp_cycle.markdown_table(cycles)
        print()
        print(table, end="")
        if args.write_doc:
            args.write_doc.write_text(clamp_cycle.with_table(files.read_own(args.write_doc), table, site))
            print(f"{site.name} table written to {args.write_doc}")
        passed = passed and all(c.passed for c in cycles)
    return 0 if passed else 1

