"""Readiness wait of the smoke test against the OpenAI stand-in server (no model runs here)."""
import io
import threading
import time

from buildtool.status_line import StatusLine
from contract.verdict import Status
from buildtool.smoke.readiness import LOGS_HINT, REFUSED, decide, wait_ready
from tests.support.openai_standin import OpenAIStandIn
from tests.support.slack import SCHEDULING_SLACK_S
from buildtool.endpoint.client import EndpointClient


def wait(url, *, timeout_s=10.0, connect_grace_s=5.0, stream=None, live=False):
    with EndpointClient(url) as client:
        return wait_ready(client, timeout_s=timeout_s, interval_s=0.05,
                          connect_grace_s=connect_grace_s,
                          status=StatusLine(stream or io.StringIO(), live=live))


def test_waits_through_503_until_ready():
    with OpenAIStandIn(loading_polls=3) as standin:
        result = wait(standin.url)
        health_polls = [r for r in standin.requests if r[1] == "/health"]
    assert result.ready and result.error is None
    assert result.polls == len(health_polls) == 4  # three 503s waited through, then the 200


def test_times_out_while_still_loading():
    with OpenAIStandIn(loading_s=60) as standin:
        started = time.monotonic()
        result = wait(standin.url, timeout_s=0.5)
    assert not result.ready
    assert time.monotonic() - started < 0.5 + SCHEDULING_SLACK_S
    assert result.last == "503"
    assert "not ready after" in result.error and "--timeout" in result.error


def test_server_exiting_while_loading_fails_at_once_pointing_at_the_logs():
    standin = OpenAIStandIn(loading_s=60).start()
    threading.Timer(0.4, standin.stop).start()
    started = time.monotonic()
    result = wait(standin.url, timeout_s=30)
    assert not result.ready
    assert time.monotonic() - started < SCHEDULING_SLACK_S    # the wait allows 30 s, the server lives 0.4 s
    assert result.last == REFUSED
    assert "the server exited" in result.error and LOGS_HINT in result.error


def test_nothing_listening_fails_after_the_connect_grace():
    standin = OpenAIStandIn().start()
    url = standin.url
    standin.stop()
    result = wait(url, connect_grace_s=0.3)
    assert not result.ready
    assert result.error.startswith(f"connection refused: nothing listens on {url}") and LOGS_HINT in result.error


def test_decide_is_a_pure_judgement_of_the_latest_poll():
    url = "http://h:1"
    assert decide("200", False, 0, 10, 5, url).status is Status.PASS
    waiting = decide("503", True, 9, 10, 5, url)
    assert waiting.status is Status.NOT_JUDGED and "last answer: 503" in waiting.message
    assert decide(REFUSED, False, 1, 10, 5, url).status is Status.NOT_JUDGED   # still starting
    exited = decide(REFUSED, True, 1, 10, 5, url)
    assert exited.status is Status.FAIL and "exited" in exited.message and exited.fix == LOGS_HINT
    assert "not a vLLM OpenAI server" in decide("404", True, 0, 10, 5, url).message
    timed_out = decide("503", True, 10, 10, 5, url)
    assert timed_out.failed and "not ready after 10 s" in timed_out.message and "--timeout" in timed_out.fix


class TerminalStream(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_one_live_line_on_a_terminal():
    stream = TerminalStream()
    with OpenAIStandIn(loading_polls=3) as standin:  # three 503s, counted not timed: a loaded host polls late
        wait(standin.url, stream=stream, live=None)
    text = stream.getvalue()
    assert text.count("\r\033[K") > 2
    assert text.count("\n") == 1                       # the line is ended once, when done
    assert "last: 503 still loading" in text and text.rstrip().endswith("last: 200 ready")


def test_progress_is_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    with OpenAIStandIn(loading_polls=2) as standin:  # counted, not timed: a loaded host polls late
        wait(standin.url, stream=stream, live=None)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.split("last: ")[1] for line in lines] == ["503 still loading", "200 ready"]


def test_a_last_poll_that_ends_past_the_timeout_names_the_timeout_not_the_clock():
    late = decide("503", True, elapsed_s=6.4, timeout_s=5.0, connect_grace_s=2.0, url="http://127.0.0.1:8000")
    assert late.message.startswith("not ready after 5 s (last answer: 503)"), late.message
