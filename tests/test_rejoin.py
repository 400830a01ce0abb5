"""A reconnecting speaker's arithmetic (client/rejoin.py), driven with numbers: where each
connection falls on the channel's clock, what is sent again, which finals are shown. (Through
a stand-in server: tests/test_speaker.py; end to end: tests/test_mic_reconnect.py.)"""

from __future__ import annotations

import pytest

from whisperwire.client.rejoin import Channel, Rejoin
from whisperwire.server import wire


def final(seg: int, start: float, end: float) -> wire.Final:
    return wire.Final(seg, f"w{seg}", start, end, (wire.Word(f" w{seg}", start, end, 0.9),))


class Buffer:
    """The audio sent lately: ``held`` seconds of it can be said again."""

    def __init__(self, held: float) -> None:
        self.held, self.asked = held, []

    def __call__(self, seconds: float) -> float:
        self.asked.append(seconds)
        return max(0.0, min(seconds, self.held))


def started(*shown: wire.Final) -> Rejoin:
    """A speaker on a fresh channel "a" that has shown ``shown``."""
    r = Rejoin()
    r.joined(Channel([], 0.0, "a"), False, 0.0, Buffer(0))
    for f in shown:
        r.place(f)
        r.saw(f.segment)
    return r


def test_a_first_connection_starts_where_the_channel_is():
    r, buf = Rejoin(), Buffer(0)
    assert r.joined(Channel([], 0.0, "a"), again=False, sent_on_old=0.0, say_again=buf) == []
    assert (r.offset, r.instance, r.seen, buf.asked) == (0.0, "a", -1, [])
    # a channel a speaker before us left at 30 s, its finals up to segment 4
    r = Rejoin()
    r.joined(Channel([final(4, 28.0, 29.0)], 30.0, "a"), False, 0.0, Buffer(0))
    assert (r.offset, r.seen) == (30.0, 4)
    assert r.place(final(5, 1.0, 2.0)).start == 31.0  # our time 1 s is the channel's 31 s


def test_a_drop_sends_again_what_was_in_flight_and_shows_what_was_made_of_it():
    r = started(final(0, 1.0, 2.0))
    # 10 s sent; the server heard 9.5 s of it and made segment 1 of its end after the drop;
    # its stream goes on (``ready``'s ``rejoined``)
    buf = Buffer(5.0)
    shown = r.joined(Channel([final(0, 1.0, 2.0), final(1, 8.0, 9.4)], 9.5, "a"), True, 10.0,
                     buf, goes_on=True)
    assert buf.asked == [0.5]  # in flight: sent, never heard
    assert [(f.segment, f.start) for f in shown] == [(1, 8.0)]  # once: segment 0 was shown
    assert (r.offset, r.seen, r.last_end) == (9.5, 1, 9.4)
    assert r.place(final(2, 0.5, 1.0)).start == 10.0  # the new connection's times go on


def test_a_restarted_server_gets_all_after_the_last_final_and_its_clock_goes_on():
    r = started(final(0, 6.0, 8.0))
    # 10 s sent; the new server's channel is empty: the 2 s after the last final go again,
    # after 1 s before it, said to be final already (context for the word after it), and its
    # clock's 0 is where they begin on ours
    buf = Buffer(5.0)
    assert r.joined(Channel([], 0.0, "b"), True, 10.0, buf) == []
    assert buf.asked == [3.0] and r.said == 1.0
    assert (r.restarts, r.offset, r.seen, r.instance) == (7.0, 7.0, -1, "b")
    assert r.place(final(0, 1.5, 2.0)).start == 8.5
    # ... with only 1.5 s still held, its clock begins where those begin, none of it said
    r = started(final(0, 6.0, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(1.5))
    assert r.offset == 8.5 and r.said == 0.0
    # a drop on that new channel later: in flight on its clock, finals shown on ours
    buf = Buffer(5.0)
    shown = r.joined(Channel([final(0, 0.5, 1.0)], 3.0, "b"), True, 3.2, buf, goes_on=True)
    assert buf.asked == [pytest.approx(0.2)]
    assert [(f.segment, f.start) for f in shown] == [(0, 9.0)]
    assert r.offset == 11.5
    assert r.said == 0.0  # (the same channel: the server still has its stream)
    # the lead stays within the dropped connection, and comes only after a final
    r = started(final(0, 0.0, 0.4))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(20.0))
    assert (r.said, r.offset) == (pytest.approx(0.4), 0.0)
    r = started()
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(20.0))
    assert (r.said, r.offset) == (0.0, 0.0)


def test_without_an_instance_a_new_channel_is_told_by_its_finals():
    r = Rejoin()
    r.joined(Channel([], 0.0, ""), False, 0.0, Buffer(0))
    r.saw(3)
    assert r.instance is None
    same = Channel([final(3, 1.0, 2.0), final(4, 2.0, 3.0)], 4.0, "")
    assert [f.segment for f in r.joined(same, True, 4.0, Buffer(1))] == [4]
    r2 = Rejoin(seen=3)
    gone = Channel([final(0, 0.0, 1.0)], 1.0, "")  # segment 3 is not there: a new life
    assert r2.joined(gone, True, 4.0, Buffer(1)) == [] and r2.restarts > 0


def test_a_lead_not_sent_yet_stays_for_the_next_connection():
    """Back on a restarted server, the connection went before it sent anything: the held
    audio still begins with the lead, so the next connection (the same new channel) says it;
    before, 'said' was reset and the lead's words were said again."""
    r = started(final(0, 6.0, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(5.0))
    assert r.said == 1.0
    buf = Buffer(5.0)
    r.joined(Channel([], 0.0, "b"), True, 0.0, buf)  # nothing sent on the one that went
    assert r.said == 1.0 and buf.asked in ([], [0.0])
    r.said_sent()  # (the speaker sent it)
    r.joined(Channel([], 0.0, "b"), True, 2.0, Buffer(5.0), goes_on=True)  # (within the grace)
    assert r.said == 0.0


def test_a_new_stream_on_the_same_channel_hears_a_second_before_as_context():
    """Back on a channel that goes on in a new stream (a Ray replica gone: the channel ended at
    its last final, 9.0 s; or back after the server's grace), the in-flight audio goes again
    after a second before it, sent as ``said``; the server moves the stream's 0 back by it
    (``Hub.said``), and so does the client's clock. Before, the new stream began exactly at
    the channel's offset and its first word came clipped."""
    r = started(final(0, 1.0, 2.0))
    buf = Buffer(5.0)
    shown = r.joined(Channel([final(0, 1.0, 2.0), final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0,
                     buf)
    assert buf.asked == [2.0] and r.said == 1.0  # 1 s unheard, after 1 s heard
    assert [f.segment for f in shown] == [1]
    assert (r.restarts, r.offset) == (0.0, 8.0)  # the stream's 0 is 1 s before the offset
    assert r.place(final(2, 1.2, 1.6)).start == pytest.approx(9.2)
    # the held audio let 0.3 s of the lead go before it was sent: said 0.7, clock with it
    assert r.to_say(0.3) == pytest.approx(0.7) and r.offset == pytest.approx(8.3)
    assert r.said == pytest.approx(0.7)  # (until it is sent: a drop first leaves it)
    r.said_sent()
    assert r.said == 0.0
    # ... all of it let go: no 'said', and the stream's 0 where the channel's offset is
    r = started(final(0, 1.0, 2.0))
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, Buffer(5.0))
    assert r.to_say(1.5) == 0.0 and r.offset == 9.0
    # the lead stays within what the dropped connection sent and what is still held
    r = started()
    r.joined(Channel([], 4.0, "a"), False, 0.0, Buffer(0))  # (a channel 4 s long before us)
    r.joined(Channel([final(0, 4.1, 4.3)], 4.4, "a"), True, 1.0, Buffer(5.0))
    assert r.said == pytest.approx(0.4) and r.offset == pytest.approx(4.0)
    r = started(final(0, 1.0, 2.0))
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, Buffer(1.5))
    assert r.said == pytest.approx(0.5) and r.offset == pytest.approx(8.5)
    # a stream that goes on (``rejoined``) has its context: no lead
    r = started(final(0, 1.0, 2.0))
    buf = Buffer(5.0)
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, buf, goes_on=True)
    assert buf.asked == [1.0] and r.said == 0.0 and r.offset == 9.0


def test_a_second_drop_before_the_lead_was_heard_says_it_all_again():
    """Back in a new stream with 1 s said, the connection drops again when that stream has
    taken only 0.3 s: the channel's offset (its end) is inside audio final already (up to
    9.0). The next connection sends again from a second before 9.0, all of that second
    said: before, the lead was counted from the channel's offset (0.3 s), and 0.7 s of
    final words were decoded again."""
    r = started(final(0, 1.0, 2.0))
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, Buffer(20.0))
    assert (r.said, r.offset) == (1.0, 8.0)
    r.said_sent()
    buf = Buffer(20.0)
    # the new stream began at 8.0 (said 1.0) and took 0.3 s: the channel ends at 8.3
    r.joined(Channel([final(0, 1.0, 2.0), final(1, 8.0, 9.0)], 8.3, "a"), True, 1.3, buf)
    assert buf.asked == [pytest.approx(1.3)] and r.said == pytest.approx(1.0)
    assert r.offset == pytest.approx(8.0)  # (the server: 9.0, where it is final to, less 1.0)


def test_a_lead_sent_in_part_is_said_whole_next_time():
    """The new stream got 'said 1.0' and only 0.5 s of audio before the next drop: the rest of
    the lead is still the held audio's front, so the next connection says all of it (it said
    0.5, and 0.5 s of final words were decoded again, every later time 0.5 s late)."""
    r = started(final(0, 1.0, 2.0))
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, Buffer(20.0))
    r.said_sent()
    buf = Buffer(20.0)
    r.joined(Channel([final(1, 8.0, 9.0)], 8.5, "a"), True, 0.5, buf)
    assert buf.asked == [pytest.approx(0.5)] and r.said == pytest.approx(1.0)
    assert r.offset == pytest.approx(8.0)


def test_a_restarted_servers_channel_then_a_new_stream_on_it_says_the_old_finals_second():
    """After a restart the new channel holds none of the old finals: a second drop to a new
    stream on it still counts the second said as final (it said 0.3 of it, and 0.7 s of the
    old channel's final words were decoded again)."""
    r = started(final(0, 6.0, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(20.0))  # restarted: 7.0 is its 0
    assert (r.restarts, r.said) == (7.0, 1.0)
    r.said_sent()
    buf = Buffer(20.0)
    r.joined(Channel([], 0.3, "b"), True, 1.3, buf)  # that stream took 0.3 s of the lead
    assert r.said == pytest.approx(1.0) and r.must_say
    assert r.offset == pytest.approx(7.0)  # (the server: max(0, 0.3 - 1.0))


def test_a_lead_all_let_go_still_says_0_on_a_channel_that_goes_on():
    """With the whole lead let go before it was sent, 'said 0' still goes: the server puts
    the stream's 0 where the channel is final to (9.0), where the audio now begins; without
    it, at the channel's end (8.3), and the finals landed 0.7 s early over the last one."""
    r = started(final(0, 1.0, 2.0))
    r.joined(Channel([final(1, 8.0, 9.0)], 9.0, "a"), True, 10.0, Buffer(20.0))
    r.said_sent()
    r.joined(Channel([final(1, 8.0, 9.0)], 8.3, "a"), True, 1.3, Buffer(20.0))
    assert r.to_say(1.0) == 0.0 and r.must_say and r.offset == pytest.approx(9.0)


def test_a_restarted_server_is_told_the_last_word_shown_on_its_own_clock():
    """An ops engineer's restart: the old server drained inside "go." and made final the
    part it heard (" go." 48.88-48.98), and the new one heard it whole after the said second
    and said it again: it has no channel to read that word from, so ``said`` carries it."""
    r = started(final(0, 6.0, 8.0))  # (its last word " w0" 6.0-8.0)
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(5.0))
    assert r.said == 1.0 and r.to_say(0.0) == 1.0
    assert r.said_last() == wire.Word(" w0", 0.0, 1.0, 0.9)  # (7.0 is the new stream's 0)
    r.said_sent()
    assert r.said_last() is None
    # the held audio let 0.4 s of the lead go before it was sent: the new stream starts later
    r = started(final(0, 7.5, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(5.0))
    assert r.to_say(0.4) == pytest.approx(0.6)
    w = r.said_last()
    assert w is not None and (w.start, w.end) == (pytest.approx(0.1), pytest.approx(0.6))
    # ... or all but 0.1 s of it: what is left of the word; or all of it: none
    r = started(final(0, 7.5, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(5.0))
    assert r.to_say(0.9) == pytest.approx(0.1)
    w = r.said_last()
    assert w is not None and (w.start, w.end) == (0.0, pytest.approx(0.1))
    assert r.to_say(0.1) == 0.0 and r.said_last() is None
    # no lead, or a channel that goes on (the server has its own last word): none
    r = started(final(0, 6.0, 8.0))
    r.joined(Channel([], 0.0, "b"), True, 10.0, Buffer(1.5))
    assert r.said_last() is None
