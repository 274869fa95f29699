"""Prompts sized to an exact depth by a tokenizer's count, and what N concurrent sessions did."""
import json
import math
import re

import pytest

from door.problem import UsageError
from tooling.servebench import depth

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
    with pytest.raises(UsageError, match="ask for at least"):
        depth.sized_prompt(merging_count, 3, "salt")


def test_a_tokenizer_that_never_lands_exactly_is_reported():
    pairs = lambda text: 2 * len(text)   # noqa: E731  every character costs two tokens: odd depths unreachable
    with pytest.raises(UsageError, match="exactly 201"):
        depth.sized_prompt(pairs, 201, "s")


def timing(sent, first, last, n=33, prompt=200, spaced=None, tpot=None):
    """A stream whose n tokens came one event each, spaced like decode steps unless told."""
    return depth.StreamTiming(prompt, n, first - sent, last - sent, sent, events=n,
                              spaced=n - 1 if spaced is None else spaced, server_tpot_s=tpot)


def test_gaps_shorter_than_a_decode_step_are_a_burst():
    assert depth.spaced_gaps([0.5, 0.51, 0.52, 0.53]) == 3
    assert depth.spaced_gaps([0.5, 0.50001, 0.50002, 0.50003]) == 0      # read from one buffer
    assert depth.spaced_gaps([0.5, 0.50001, 0.6, 0.60001]) == 1


def test_a_burst_delivered_stream_has_no_client_decode_rate():
    """31 tokens after the first inside 0.2 ms is 142,412 tok/s by the span: the figure a loaded
    CPU run once printed. Back to back, the clock timed the reads: not measured."""
    burst = timing(0, 0.5, 0.500218, spaced=0)
    assert not burst.client_resolved and burst.decode_tok_s is None and burst.decode_source == "not measured"
    text = depth.render("t", "m", 33, [depth.DepthRow(200, burst)], None)
    assert "| 200 | 200 | 0.50 | 400.0 | not measured |" in text
    half = timing(0, 0.5, 1.3, spaced=15)                             # 15 of 32 steps spaced: still a burst
    assert half.decode_tok_s is None
    assert timing(0, 0.5, 1.3, spaced=16).decode_tok_s == pytest.approx(40.0)


def test_the_servers_time_per_output_token_wins_over_the_clients_span():
    burst = timing(0, 0.5, 0.5002, spaced=0, tpot=0.05)
    assert burst.decode_tok_s == pytest.approx(20.0) and burst.decode_source == "server"
    assert timing(0, 0.5, 2.1, tpot=0.025).decode_tok_s == pytest.approx(40.0)
    assert "| 64 | 200 | 0.50 | 400.0 | 20.0 (server) |" in depth.render(
        "t", "m", 33, [depth.DepthRow(64, burst)], None)


def test_parallel_and_queued_come_from_the_servers_gauges_not_the_token_times():
    """Three bursts, back to back at the client (each span collapsed, none overlapping): the
    client's times would say one ran at a time and two queued; the gauges say 2 and 1."""
    solo = timing(0, 0.5, 2.1)                         # 32 tokens in 1.6 s: 20 tok/s
    sessions = (timing(0.0, 0.6, 0.6001, spaced=0), timing(0.0, 0.7, 0.7001, spaced=0),
                timing(0.0, 4.3, 4.3001, spaced=0))
    cap = depth.Capacity(200, solo, sessions, depth.MetricPeaks(2, 1, 0.98, 0, 40), server_tpot_s=0.1)
    assert (cap.parallel(), cap.queued()) == (2, 1)
    text = depth.render("toy", "m", 33, [depth.DepthRow(64, timing(0, 0.2, 1.8, prompt=64))], cap)
    assert "| 64 | 64 | 0.20 | 320.0 | 20.0 (client) |" in text
    assert ("2 ran in parallel, 1 queued, as the server's own gauges showed them: over 40 scrapes of /metrics, "
            "peak vllm:num_requests_running 2, peak vllm:num_requests_waiting while one ran 1, peak KV cache usage 98%") in text
    assert "| session 3 | 4.30 | not measured | — | done |" in text
    assert "Server time per output token: 100.0 ms mean over the sessions." in text
    data = json.loads(depth.to_json("toy", "m", 33, [], cap))
    assert data["capacity"]["parallel"] == 2 and data["capacity"]["queued"] == 1
    assert data["capacity"]["judged_from"] == "server gauges"


def test_slowdown_from_resolved_rates_and_the_servers_mean():
    solo = timing(0, 0.5, 2.1, tpot=0.05)
    sessions = tuple(timing(0.0, 0.6 + i / 10, 3.8 + i / 10, tpot=0.1) for i in range(3))
    cap = depth.Capacity(200, solo, sessions, depth.MetricPeaks(3, 0, 0.5, 0, 9), server_tpot_s=0.1)
    assert cap.slowdown(sessions[0]) == pytest.approx(2.0) and cap.mean_slowdown() == pytest.approx(2.0)
    assert (cap.parallel(), cap.queued()) == (3, 0)


def test_without_metrics_parallel_and_queued_are_not_measured():
    cap = depth.Capacity(200, timing(0, 0.5, 2.1), (timing(0, 0.6, 3.8),), None)
    assert cap.parallel() is None and "Parallel and queued sessions: not measured" in depth.render("t", "m", 33, [], cap)


def test_failed_session_is_shown_and_not_counted():
    bad = depth.StreamTiming(0, 0, None, None, 0.0, "HTTP 400 too long")
    cap = depth.Capacity(200, timing(0, 0.5, 2.1), (timing(0, 0.6, 3.8), bad), depth.MetricPeaks(1, 0, 0.4, 0, 5))
    assert cap.parallel() == 1 and cap.queued() == 0 and cap.slowdown(bad) is None
    assert "error: HTTP 400 too long" in depth.render("t", "m", 33, [], cap)


def test_sessions_no_scrape_saw_are_not_measured_never_zero_in_parallel():
    cap = depth.Capacity(200, timing(0, 0.5, 2.1), (timing(0, 0.6, 3.8),) * 3, depth.MetricPeaks(0, 0, 0.0, 0, 3))
    assert (cap.parallel(), cap.queued()) == (None, None)
    text = depth.render("t", "m", 33, [], cap)
    assert "not measured (none of 3 scrapes of /metrics saw a session running" in text
    assert json.loads(depth.to_json("t", "m", 33, [], cap))["capacity"]["parallel"] is None
    # seen waiting (before the scheduler's first step), never running: still not measured
    waited = depth.Capacity(200, timing(0, 0.5, 2.1), (timing(0, 0.6, 3.8),) * 3, depth.MetricPeaks(0, 3, 0.0, 0, 4))
    assert (waited.parallel(), waited.queued()) == (None, None)
