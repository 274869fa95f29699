"""Runs inside the image with this checkout's imagefacts/, entrypoint/ and contract/ first on
PYTHONPATH. `table`: prints the option table this checkout records from the image's vLLM parser
(types, choices, const). `judge SAMPLES_JSON`: for each list of words, what the entrypoint's parse
(entrypoint/argv.py with that table) makes of it and what vLLM's own parser makes of the same words
after `--model m`: "refused", or the dests set with their values (a value that is not JSON, such as a
pydantic config object, as "<TypeName>"). Prints one JSON object."""
import argparse
import contextlib
import io
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from imagefacts.read import server_parser  # noqa: E402
from imagefacts.shape import option_table  # noqa: E402
from entrypoint.argv import parse_extra  # noqa: E402
from door.problem import UsageError  # noqa: E402

UNSET = object()


def plain(value):
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return f"<{type(value).__name__}>"


def vllm_parse(parser, words: list[str]):
    namespace = argparse.Namespace(**{action.dest: UNSET for action in parser._actions})
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            given = vars(parser.parse_args(["--model", "m", *words], namespace))
    except (SystemExit, Exception):
        return "refused"
    return {dest: plain(value) for dest, value in given.items()
            if value is not UNSET and dest != "model" and not (dest == "model_tag" and value is None)}


def judge_parse(table: dict, words: list[str]):
    try:
        return {dest: plain(value) for dest, value in parse_extra(words, table).items()}
    except UsageError:
        return "refused"


def main() -> None:
    parser = server_parser()
    table = option_table(parser)
    if sys.argv[1] == "table":
        print(json.dumps(table))
        return
    samples = json.loads(sys.argv[2])
    print(json.dumps([{"words": words, "judge": judge_parse(table, words), "vllm": vllm_parse(server_parser(), words)}
                      for words in samples]))


if __name__ == "__main__":
    main()
