"""Prompts sized to an exact depth by a tokenizer's count, and what N concurrent sessions did."""
import json
import math
import re

import pytest

from bench.servebench import depth

PIECES = re.compile(r"\d{1,3}|[A-Za-z]{1,4}|\s+|[^\sA-Za-z\d]")


def merging_count(text: str) -> int:
    """A tokenizer with merges: words cut into 4-letter pieces, digit runs into threes, and
    whitespace runs into one token, plus a BOS; a character more can cost 0, 1 or 2 tokens."""
    return 1 + len(PIECES.findall(text))


class Counting:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, text):
        self.calls += 1
        return self.fn(text)


@pytest.mark.parametrize("target", [64, 128, 200, 1000, 12700])
def test_prompt_has_exactly_the_depth_by_the_tokenizers_count(target):
    encode = Counting(merging_count)
    prompt, n = depth.sized_prompt(encode, target, "a1b2c3")
    assert n == target == merging_count(prompt)
    assert prompt.startswith(depth.salt_head("a1b2c3")) and prompt.endswith(depth.QUESTION)
    # a binary search, not a walk: calls grow with log2 of the filler's length
    assert encode.calls <= 2 * math.log2(target * 8) + len(depth.PADS) * (2 * depth.SEARCH_SLACK + 1) + 4


def test_character_counts_do_not_size_prompts():
    """The same characters cost different token counts under different tokenizers, so a
    chars-per-token guess misses; sizing by count does not."""
    words = lambda text: 1 + len(text.split())   # noqa: E731
    a, _ = depth.sized_prompt(merging_count, 500, "s")
    b, _ = depth.sized_prompt(words, 500, "s")
    assert len(a) != len(b) and merging_count(a) == words(b) == 500


def test_each_salt_gives_a_different_first_token():
    p1, _ = depth.sized_prompt(merging_count, 200, "aaaa11")
    p2, _ = depth.sized_prompt(merging_count, 200, "bbbb22")
    assert p1 != p2 and p1.split("\n")[0] != p2.split("\n")[0]


def test_depth_below_the_fixed_part_is_refused():
    with pytest.raises(depth.SizingError, match="ask for at least"):
        depth.sized_prompt(merging_count, 3, "salt")


def test_a_tokenizer_that_never_lands_exactly_is_reported():
    pairs = lambda text: 2 * len(text)   # noqa: E731  every character costs two tokens: odd depths unreachable
    with pytest.raises(depth.SizingError, match="exactly 201"):
        depth.sized_prompt(pairs, 201, "s")


def timing(sent, first, last, n=33, prompt=200):
    return depth.StreamTiming(prompt, n, first - sent, last - sent, sent)


def test_two_sessions_run_and_the_third_queues():
    solo = timing(0, 0.5, 2.1)                         # 32 tokens in 1.6 s: 20 tok/s
    sessions = (timing(0.0, 0.6, 3.8), timing(0.01, 0.7, 3.9), timing(0.02, 4.3, 5.9))
    cap = depth.Capacity(200, solo, sessions, depth.MetricPeaks(2, 1, 0.98, 0, 40))
    assert cap.queued() == [2] and cap.parallel() == 2
    assert cap.slowdown(sessions[0]) == pytest.approx(2.0)      # 32 tokens in 3.2 s: 10 tok/s
    assert cap.slowdown(sessions[2]) == pytest.approx(1.0)
    text = depth.render("toy", "m", 33, [depth.DepthRow(64, timing(0, 0.2, 1.8, prompt=64))], cap)
    assert "| 64 | 64 | 0.20 | 320.0 | 20.0 |" in text
    assert "2 ran in parallel, 1 queued" in text
    assert "peak vllm:num_requests_running 2, peak vllm:num_requests_waiting 1, peak KV cache usage 98%" in text
    assert "| session 3 | 4.28 | 20.0 | 1.00 | queued |" in text
    data = json.loads(depth.to_json("toy", "m", 33, [], cap))
    assert data["capacity"]["parallel"] == 2 and data["capacity"]["queued"] == [2]


def test_three_sessions_that_all_fit_run_in_parallel():
    sessions = tuple(timing(0.0, 0.6 + i / 10, 3.8 + i / 10) for i in range(3))
    cap = depth.Capacity(200, timing(0, 0.5, 2.1), sessions, None)
    assert cap.queued() == [] and cap.parallel() == 3


def test_failed_session_is_shown_and_not_counted():
    bad = depth.StreamTiming(0, 0, None, None, 0.0, "HTTP 400 too long")
    cap = depth.Capacity(200, timing(0, 0.5, 2.1), (timing(0, 0.6, 3.8), bad), None)
    assert cap.parallel() == 1 and cap.queued() == [] and cap.slowdown(bad) is None
    assert "error: HTTP 400 too long" in depth.render("t", "m", 33, [], cap)
