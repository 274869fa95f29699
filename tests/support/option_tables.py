"""Option tables (imagefacts/shape.py option_table) made here by argparse with the kinds of options
vLLM 0.33.0's server parser has and the types it gives them, for the unit tier (the image tier
judges with the image's real table)."""
from __future__ import annotations

import argparse
from typing import Callable

from hypothesis import strategies as st

from imagefacts.shape import option_table
from tests.support.standin_vllm_parser import add_vllm_like_options


def vllm_like_table() -> dict:
    """The table recorded from the stand-in parser (options of the kinds vLLM 0.33.0's has)."""
    return option_table(add_vllm_like_options(argparse.ArgumentParser()))


def option_words(table: dict, values: Callable[[dict], st.SearchStrategy], leave_out=("help",)) -> st.SearchStrategy:
    """One option of `table` (any of its spellings) with values drawn from values(entry): one for
    an option taking one (as `--x=v` or `--x v`), one to three for nargs + and *, none for a flag."""
    options = [entry for entry in table["options"] if entry["dest"] not in leave_out]

    @st.composite
    def draw_option(draw) -> list[str]:
        entry = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(entry["options"]))
        if entry["nargs"] == 0:
            return [flag]
        count = draw(st.integers(1, 3)) if entry["nargs"] in ("+", "*") else 1
        given = [draw(values(entry)) for _ in range(count)]
        if count == 1 and flag.startswith("--") and draw(st.booleans()):
            return [f"{flag}={given[0]}"]
        return [flag, *given]
    return draw_option()
