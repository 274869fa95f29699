"""Runs inside the image: for each list of words (JSON on argv[1]), which dests the entrypoint's
judge (entrypoint/argv.py with the image facts' option table) says the words set, and which dests
vLLM's own parser sets when it parses the same words after `--model m` (those whose values differ
from a parse of `--model m` alone); "refused" where either stops on them. Prints one JSON object."""
import argparse
import contextlib
import io
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from imagefacts.shape import option_table  # noqa: E402
from entrypoint import image_facts  # noqa: E402
from entrypoint.argv import parse_extra  # noqa: E402
from imagefacts.read import server_parser  # noqa: E402
from door.problem import UsageError  # noqa: E402


UNSET = object()


def vllm_dests(words: list[str]):
    """The dests vLLM's parser sets from `words`: argparse fills in a default only for a dest the
    namespace lacks, so every dest starts as UNSET and those the words set end otherwise."""
    parser = server_parser()
    namespace = argparse.Namespace(**{action.dest: UNSET for action in parser._actions})
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            given = vars(parser.parse_args(["--model", "m", *words], namespace))
    except (SystemExit, ValueError, argparse.ArgumentError):
        return "refused"
    # a positional left out still gets its default (None) from argparse: only values given count
    return sorted(dest for dest, value in given.items() if value is not UNSET and value is not None and dest != "model")


def judge_dests(words: list[str], table: dict):
    try:
        return sorted(parse_extra(words, table))
    except UsageError:
        return "refused"


def main() -> None:
    loaded = image_facts.load()
    assert loaded.facts is not None, loaded.why_not
    table = loaded.facts.server_parser
    samples = json.loads(sys.argv[1])
    print(json.dumps({"table_equals_parser": option_table(server_parser()) == table,
                      "results": {" ".join(words): {"judge": judge_dests(words, table), "vllm": vllm_dests(words)}
                                  for words in samples}}))


if __name__ == "__main__":
    main()
