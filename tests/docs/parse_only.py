"""Runs a Python program of this repository only as far as its command line: argparse parses the
exact words a doc gives, then the process ends before the program does anything.

    python3 tests/docs/parse_only.py build.py --base pypi ...
    python3 tests/docs/parse_only.py -m patches.fitcheck --device sm75 ...

Exit PARSED when the outermost parse accepted the words, argparse's own 2 (and its message) when
it refused them (--help, which exits 0, counts as parsed), NO_PARSER when the program ended
without parsing a command line.
"""
import argparse
import os
import runpy
import sys

PARSED, NO_PARSER = 97, 98
_ORIGINAL = {name: getattr(argparse.ArgumentParser, name) for name in ("parse_args", "parse_known_args")}
_depth = 0


def _wrap(name):
    def parse(self, args=None, namespace=None):
        global _depth
        _depth += 1
        try:
            result = _ORIGINAL[name](self, args, namespace)
        finally:
            _depth -= 1
        if _depth == 0:  # the program's own call, not a subparser's
            sys.stdout.flush()
            os._exit(PARSED)
        return result
    return parse


def main(argv: list[str]) -> int:
    for name in _ORIGINAL:
        setattr(argparse.ArgumentParser, name, _wrap(name))
    if argv[0] == "-m":
        sys.path.insert(0, os.getcwd())
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return NO_PARSER


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # argparse's refusal (2), or a program exiting before it parsed
        code = exc.code if isinstance(exc.code, int) else 1
        code = code if code else PARSED  # exit 0 from inside a parse: --help
    sys.exit(code)
