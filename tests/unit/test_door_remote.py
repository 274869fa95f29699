"""door.remote against the hostile HTTP peer: every read ends by its deadline, no body passes its cap
(error bodies included), a Content-Length lie is refused before a byte is read, resumes are bounded,
a listing that links back to itself is refused, and no secret sent reaches a message."""
import io
import time

import pytest

from door import remote
from door.remote import RemoteProblem
from tests.support.hostile import peer as hostile
from tests.support.hostile.peer import HostilePeer
from tests.support.slack import SCHEDULING_SLACK_S

DEADLINE_S = 2.0
TOKEN = "hf_plantedSECRETtoken0123456789abcdef"


def refused(call) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(RemoteProblem) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and message.isprintable()
    return message, time.monotonic() - started


def test_a_whole_answer_is_read():
    with HostilePeer().route("/ok", hostile.once(hostile.answer(b'{"a": 1}'))) as peer:
        assert remote.get(peer.url + "/ok", name="the test's answer", deadline_s=DEADLINE_S, cap_bytes=100) == b'{"a": 1}'


@pytest.mark.parametrize("behaviour", [hostile.stall_after_headers(), hostile.trickle(hostile.answer(b"x" * 64), 0.5)],
                         ids=["stall-after-headers", "trickle"])
def test_a_peer_that_stalls_or_trickles_ends_at_the_deadline(behaviour):
    with HostilePeer().route("/slow", behaviour) as peer:
        message, took = refused(lambda: remote.get(peer.url + "/slow", name="the slow answer", deadline_s=DEADLINE_S,
                                                   cap_bytes=2**20))
    assert "the slow answer" in message and "deadline" in message
    assert took < DEADLINE_S + SCHEDULING_SLACK_S < hostile.HOLD_S


def test_a_content_length_of_a_tib_for_2_kib_is_refused_before_reading():
    with HostilePeer().route("/lie", hostile.lying_length(b"x" * 2048)) as peer:
        message, _ = refused(lambda: remote.get(peer.url + "/lie", name="the listing", deadline_s=DEADLINE_S,
                                                cap_bytes=2**20))
    assert "declared 1099511627776 bytes" in message and "the listing" in message


@pytest.mark.parametrize("declared", [True, False])
def test_a_huge_body_or_error_body_stops_at_the_cap(declared):
    with HostilePeer().route("/ok", hostile.huge_body(200, declared=declared)).route(
            "/err", hostile.huge_body(403, declared=declared)) as peer:
        message, took = refused(lambda: remote.get(peer.url + "/ok", name="the answer", deadline_s=30, cap_bytes=2**20))
        assert "more than the 1048576" in message
        message, took = refused(lambda: remote.get(peer.url + "/err", name="the answer", deadline_s=30, cap_bytes=2**20))
        assert "answered 403" in message
    assert took < 30


def test_an_echoed_authorization_never_reaches_the_message():
    planted = f"Bearer {TOKEN} answered 403"
    assert TOKEN in planted  # the search finds a planted one
    with HostilePeer().route("/", hostile.echo_authorization()) as peer:
        message, _ = refused(lambda: remote.get(peer.url + "/x", name="the mirror's answer", deadline_s=DEADLINE_S,
                                                cap_bytes=2**20, headers={"Authorization": f"Bearer {TOKEN}"}))
        assert peer.requests[0].headers["authorization"] == f"Bearer {TOKEN}"  # it was sent, and echoed
    assert "answered 403" in message and TOKEN not in message


def test_url_credentials_are_sent_as_basic_and_never_shown():
    with HostilePeer().route("/", hostile.echo_authorization()) as peer:
        url = peer.url.replace("http://", "http://user:pa55word-secret@") + "/x"
        message, _ = refused(lambda: remote.get(url, name="the mirror", deadline_s=DEADLINE_S, cap_bytes=100))
        assert peer.requests[0].headers["authorization"].startswith("Basic ")
    assert "pa55word-secret" not in message and "dXNlcjpwYTU1d29yZC1zZWNyZXQ" not in message


def test_a_redirect_to_another_host_drops_the_token_and_redirect_loops_end():
    with HostilePeer().route("/", hostile.once(hostile.answer(b"cdn"))) as cdn, HostilePeer() as origin:
        origin.route("/file", hostile.redirect(cdn.url.replace("127.0.0.1", "localhost") + "/blob"))
        origin.route("/loop", hostile.redirect("/loop"))
        body = remote.get(origin.url + "/file", name="a file", deadline_s=DEADLINE_S, cap_bytes=10,
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert body == b"cdn" and "authorization" not in cdn.requests[0].headers
        message, _ = refused(lambda: remote.get(origin.url + "/loop", name="a file", deadline_s=DEADLINE_S,
                                                cap_bytes=10))
    assert "redirected more than" in message


def test_a_listing_whose_next_page_is_itself_is_refused():
    with HostilePeer().route("/tree", hostile.self_linking([{"path": "a"}])) as peer:
        message, _ = refused(lambda: list(remote.pages(peer.url + "/tree", name="the listing", deadline_s=DEADLINE_S,
                                                       cap_bytes=2**20)))
    assert "cycle" in message and "the listing" in message


def test_a_download_cut_at_the_same_byte_every_time_gives_up_after_bounded_resumes():
    content = bytes(range(256)) * 64
    with HostilePeer().route("/w", hostile.file_answer(content, cut_at=5000)) as peer:
        sink = io.BytesIO()
        message, _ = refused(lambda: remote.download(peer.url + "/w", sink, name="model.safetensors",
                                                     size=len(content), deadline_s=DEADLINE_S))
        assert len(peer.requests) <= remote.MAX_RESUMES + 1
    assert "ended after" in message and "given up" in message and sink.getvalue() == content[:5000]


def test_a_download_cut_once_resumes_from_where_it_stopped():
    content = bytes(range(256)) * 64
    cut = hostile.file_answer(content, cut_at=5000)
    whole = hostile.file_answer(content)
    calls = []

    def once_cut(seen):
        calls.append(seen)
        return (cut if len(calls) == 1 else whole)(seen)
    with HostilePeer().route("/w", once_cut) as peer:
        sink = io.BytesIO()
        remote.download(peer.url + "/w", sink, name="model.safetensors", size=len(content), deadline_s=DEADLINE_S)
    assert sink.getvalue() == content and calls[1].headers["range"] == "bytes=5000-"
