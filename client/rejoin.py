"""Where a reconnecting speaker's connections fall on its session's channel, and what to send
again after a drop: numbers in, numbers out (sans-I/O; :mod:`.speaker` does the I/O, and
``tests/test_rejoin.py`` drives this with numbers).

A channel (``transcript.json``) counts one clock for all its speakers: each connection's own
times start at 0, at the channel's ``offset``. A restarted server has a new channel (a new
``instance``) whose clock starts at 0 again, so a speaker that follows it puts that clock after
the old one's (``restarts``), and its saved file runs forward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from whisperwire.server import wire
from whisperwire.server.hub import on_channel_clock, resume_at

__all__ = ["Channel", "Rejoin"]

# A restarted server hears the audio after the last final again with this much before it, as
# context only (``said``): started at the final's end, its first words came clipped or not at
# all ("and you | literally" for "and you know, literally": a word lost at four of twelve
# seams of real/en-01 and en-02, none with the lead; python -m bench.seams, README)
LEAD_S = 1.0


@dataclass(frozen=True)
class Channel:
    """What ``transcript.json`` says of the session: its finals, where the live speaker's time
    0 is on its clock, and which life of the id it is."""

    finals: list[wire.Final]
    offset: float
    instance: str


@dataclass
class Rejoin:
    """One speaker's place on its channel across connections, in seconds on the first
    channel's clock."""

    offset: float = 0.0  # this connection's time 0
    restarts: float = 0.0  # where a restarted server's new channel begins
    last_end: float | None = None  # the end of the last final shown
    seen: int = -1  # the last final segment shown (segments count per channel)
    instance: str | None = None  # the channel's life, once read
    # the first seconds of the audio to send that were final already (sent as ``said``, then
    # 0; a connection that drops before sending it leaves it for the next, the audio unsent)
    said: float = 0.0
    # ``said`` is to be sent even at 0 (a new stream on a channel that goes on: the server
    # puts the stream's 0 where the channel is final to, less it)
    must_say: bool = False
    _at: float | None = None  # where the channel is final to, if it went on
    _ch: float = 0.0  # its ``offset`` at the join
    last_word: wire.Word | None = None  # the last final word shown, on the clock
    # a restarted server's new stream: where its said seconds end, on the clock, and the last
    # word shown if it ends there (sent with ``said``: the server has no channel to read it)
    _said_to: float | None = None
    _said_word: wire.Word | None = None

    def place(self, m: wire.Message, offset: float | None = None) -> wire.Message:
        """A message of this connection (or, with ``offset``, of the channel) on the clock."""
        m = on_channel_clock(m, self.offset if offset is None else offset)
        if isinstance(m, wire.Final):
            self.last_end = m.end
            self.last_word = m.words[-1] if m.words else None
        return m

    def saw(self, segment: int) -> None:
        self.seen = max(self.seen, segment)

    def joined(self, ch: Channel, again: bool, sent_on_old: float,
               say_again: Callable[[float], float], goes_on: bool = False) -> list[wire.Final]:
        """The server took the session (``ready``) and its channel reads ``ch``. After a drop
        (``again``; ``sent_on_old``: seconds of audio the dropped connection sent):
        ``say_again(seconds)`` puts the last ``seconds`` sent back in front of what is to be
        sent, and says how much there was; ``goes_on``: the server's stream is the dropped
        connection's (``ready``'s ``rejoined``). Returns the finals the server made of the
        dropped connection's last audio, which that connection never delivered, on the
        clock."""
        out: list[wire.Final] = []
        if not again:
            self.said, self.must_say = 0.0, False
        if again and self._new_channel(ch):
            # the server lost what it had not made final: all after the last final shown,
            # and (as context, within the dropped connection) a little before it
            resume = self.offset if self.last_end is None else max(self.offset, self.last_end)
            unheard = self.offset + sent_on_old - resume
            lead = min(LEAD_S, resume - self.offset) if self.last_end is not None else 0.0
            resent = say_again(unheard + lead)
            self.said = max(0.0, resent - unheard)
            self.restarts, self.seen = self.offset + sent_on_old - resent, -1
            w = self.last_word
            self._said_to = resume
            self._said_word = w if w is not None and abs(w.end - resume) < 1e-6 else None
        elif again:
            old_start = self.offset - self.restarts  # (on the channel's clock)
            if goes_on or sent_on_old <= 0:  # (nothing sent: a lead not sent yet stays)
                # what was in flight when it dropped: sent, never heard
                say_again(old_start + sent_on_old - ch.offset)
            else:
                # a new stream on the channel (a Ray replica gone; back after the server's
                # grace): all after where the channel is final to (or the last final shown,
                # which a restarted server's channel does not hold), and as on a restarted
                # server a second before it (within the dropped connection) as context; a
                # lead the dropped connection sent only part of is still the held audio's
                # front (``unheard`` below 0), and is said whole
                resume = resume_at(ch.offset, ch.finals) or 0.0
                if self.last_end is not None:
                    resume = max(resume, self.last_end - self.restarts)
                unheard = old_start + sent_on_old - resume
                lead = min(LEAD_S, max(0.0, resume - old_start))
                self.said = max(0.0, say_again(unheard + lead) - unheard)
                self.must_say = True  # (0 too: the stream's 0 goes where the channel is final)
            for f in ch.finals:
                if f.segment > self.seen:
                    self.seen = f.segment
                    out.append(self.place(f, self.restarts))  # type: ignore[arg-type]
        self.instance = ch.instance or None
        self.seen = max(self.seen, ch.finals[-1].segment if ch.finals else -1)
        # (on a channel with a clock before the stream, ``said`` puts the stream's 0 that long
        # before where the channel is final to: server/hub.py's ``Hub.said``)
        self._at = resume_at(ch.offset, ch.finals)
        self._ch = ch.offset
        self.offset = self.restarts + self._zero(ch.offset)
        return out

    def _zero(self, offset: float) -> float:
        """Where the connection's 0 lies on the channel's clock once ``said`` is sent."""
        if self._at is None or not (self.said > 0 or self.must_say):
            return offset
        return max(0.0, self._at - self.said)

    def to_say(self, gone: float) -> float:
        """The ``said`` to send now, ``gone`` seconds having gone from the front of the held
        audio since it was set (the lead's first); the connection's clock moves with the
        server's. It stays until :meth:`said_sent` (a connection that drops first leaves it,
        and the audio, for the next)."""
        self.said = max(0.0, self.said - gone)
        self.offset = self.restarts + self._zero(self._ch)
        return self.said

    def said_last(self) -> wire.Word | None:
        """The last word shown, on the new stream's clock as :meth:`to_say` left it, to send
        with ``said`` to a restarted server (None where there is none, or it is not sent)."""
        w, to = self._said_word, self._said_to
        if w is None or to is None or not self.said:
            return None
        zero = to - self.said  # (the new stream's 0, on the clock)
        if w.end - zero <= 0:
            return None  # (let go from the held audio's front with the lead)
        return dataclasses.replace(w, start=max(0.0, w.start - zero), end=w.end - zero)

    def said_sent(self) -> None:
        self.said, self.must_say = 0.0, False
        self._said_to = self._said_word = None

    def _new_channel(self, ch: Channel) -> bool:
        """Whether the session is a new life of its id (the server restarted, or the channel
        expired): by its ``instance``, or, where that was never read, by the finals."""
        if self.instance and ch.instance:
            return ch.instance != self.instance
        return not any(f.segment == self.seen for f in ch.finals) and (
            self.seen >= 0 or ch.offset == 0.0)
