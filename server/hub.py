"""Published sessions as channels: their transcripts and their viewers.

The speaker's connection publishes every caption event here; viewers and transcript downloads
read from here, never from the speaker's connection, so a slow or dead viewer can never slow the
speaker. Each viewer has its own outbox: finals always queue; a newer partial replaces an unsent
one (a viewer that can't keep up loses partials, not finals); a viewer whose outbox overflows
with finals is dropped.

A session id is a channel. One speaker at a time is live on it; when that speaker has ended (its
last final published), the next speaker under the same id continues the same transcript:
segment numbers go on from the channel's count, and times go on from where the earlier
speakers' audio ended (the channel's clock is the sum of its speakers' audio). Viewers follow the
channel, not a speaker: they get each speaker's ``closed`` and stay subscribed until the channel
expires (``retention_s`` after its last speaker ended) or the server shuts down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .errors import ClientError
from .subtitles import at_turns, close_utterance
from .text import finals_text
from .wire import Channel, Closed, Final, Language, Message, Partial, Status, UtteranceEnd

__all__ = ["Hub", "Outbox", "Transcript", "keep_language", "known_language", "new_session_id",
           "on_channel_clock", "resume_at", "with_languages"]


T = TypeVar("T")


def new_session_id() -> str:
    """A random channel id that never starts with ``-`` or ``_``: people paste it after a
    command (``whisperwire captions ID``), where a leading ``-`` reads as an option. 16
    URL-safe characters as before, about 95 random bits."""
    while True:
        sid = secrets.token_urlsafe(12)
        if sid[0] not in "-_":
            return sid


class Outbox:
    """Messages waiting for one slow or fast peer (a viewer, or the speaker itself). The
    transport awaits :meth:`next` and writes what it returns; ``None`` means the stream ended
    (after ``closed`` was delivered, or :meth:`finish`) or the peer was dropped for not reading.
    ``follow`` outboxes (viewers) do not end at ``closed``: a channel's next speaker follows."""

    def __init__(self, max_pending: int = 512, follow: bool = False) -> None:
        self._q: deque[Message] = deque()
        self._event = asyncio.Event()
        self.max_pending = max_pending
        self.follow = follow
        self.dropped = False
        self.done = False
        self.partials_skipped = 0

    def put(self, msg: Message) -> None:
        if self.dropped or self.done:
            return
        last = self._q[-1] if self._q else None
        if isinstance(msg, (Partial, Status)) and type(last) is type(msg):
            self._q[-1] = msg  # coalesce: only the newest partial (or status) matters
            self.partials_skipped += isinstance(msg, Partial)
        else:
            self._q.append(msg)
        if len(self._q) > self.max_pending:
            self.dropped = True  # it stopped reading; let it go
            self._q.clear()
        if isinstance(msg, Closed) and not self.follow:
            self.done = True
        self._event.set()

    async def next(self) -> Message | None:
        while not self._q:
            if self.dropped or self.done:
                return None
            self._event.clear()
            await self._event.wait()
        return self._q.popleft()

    def finish(self) -> None:
        """No more messages: :meth:`next` returns what is queued, then ``None``."""
        self.done = True
        self._event.set()

    def drop(self) -> None:
        self.dropped = True
        self._event.set()


@dataclass
class Transcript:
    """One channel: its finals (on the channel's clock), the live partial, and its viewers.
    ``offset`` is where the live speaker's stream time 0 falls on the channel's clock;
    ``audio_seconds`` is the audio of the speakers that have ended and of the live speaker's
    connections before its current one (it came back after a drop): where that one begins.
    ``turns``: the index of each later speaker's first final. A speaker's end closes an
    utterance, but its last final may have gone out without ``eou`` (made final before the
    client closed) and finals never change, so downloads break there by ``turns``
    (:func:`~.subtitles.at_turns`)."""

    session: str
    finals: list[Final] = field(default_factory=list)
    partial: Partial | None = None
    live: bool = True
    closed: Closed | None = None
    ended_at: float | None = None
    viewers: set[Outbox] = field(default_factory=set)
    offset: float = 0.0
    audio_seconds: float = 0.0
    speakers: int = 1
    turns: list[int] = field(default_factory=list)
    instance: str = field(default_factory=lambda: secrets.token_hex(8))  # this life of the id
    said: float | None = None  # a new life's first seconds, made final by an earlier one
    # each change of the captions' language, with the number of finals before it: a viewer
    # that joins later gets each before the finals said in it
    languages: list[tuple[int, Language]] = field(default_factory=list)
    # set at each final, for a reader of ``finals`` in this process that waits for the next
    # (a file's streamed transcript), so it needs neither poll nor a viewer's place
    grew: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @property
    def text(self) -> str:
        return finals_text(self.finals)


def resume_at(offset: float, finals: list[Final]) -> float | None:
    """Where a channel that goes on is final to: its offset (the last stream's end), or its
    last final's end if later (a stream that ended inside the audio said again before it:
    a second drop right after the first); None for a channel whose clock has not run (a new
    one). A speaker back on it in a new stream sends again from there, with ``said`` before
    it (``client/rejoin.py`` and ``web/app.js`` count the same)."""
    if not (offset > 0 or finals):
        return None
    return max(offset, finals[-1].end if finals else 0.0)


def on_channel_clock(msg: Message, offset: float) -> Message:
    """A speaker's event with its times moved onto the channel's clock."""
    if not offset or not isinstance(msg, (Final, Partial, Closed, UtteranceEnd, Language)):
        return msg
    if isinstance(msg, Language):
        return dataclasses.replace(msg, start=msg.start + offset)
    if isinstance(msg, UtteranceEnd):
        return dataclasses.replace(msg, end=msg.end + offset)
    if isinstance(msg, Closed):  # the channel's audio so far, as a viewer's times count it
        return dataclasses.replace(msg, audio_seconds=msg.audio_seconds + offset)
    if isinstance(msg, Final):
        words = tuple(dataclasses.replace(w, start=w.start + offset, end=w.end + offset)
                      for w in msg.words)
        return dataclasses.replace(msg, start=msg.start + offset, end=msg.end + offset,
                                   words=words)
    return dataclasses.replace(msg, start=msg.start + offset, end=msg.end + offset)


def with_languages(finals: list[T], languages: list[tuple[int, T]]) -> list[T]:
    """A channel's finals with each change of the captions' language before the first final
    said in it (``languages``: the number of finals before each); messages, or their JSON."""
    out: list[T] = []
    i = 0
    for n, lang in languages:
        out += finals[i:n]
        i = max(i, n)
        out.append(lang)
    return out + finals[i:]


def keep_language(languages: list[tuple[int, T]], finals: int, lang: T) -> None:
    """Record a change of the captions' language after ``finals`` finals: at most one per
    final (a language changed back and forth before any final replaces the last)."""
    if languages and languages[-1][0] == finals:
        languages.pop()
    languages.append((finals, lang))


def known_language(t: Transcript, msg: Message) -> bool:
    """Whether ``msg`` tells the channel's viewers the language they know already (a speaker
    on it before, a detection again after a pause, a client's every ``session.update``):
    not kept, so that they cannot grow the channel's record."""
    if not (isinstance(msg, Language) and t.languages):
        return False
    last = t.languages[-1][1]
    return (last.language, last.script) == (msg.language, msg.script)


def on_connection_clock(msg: Message, start: float) -> Message:
    """A speaker's event with its times counted from ``start`` seconds into its stream, where
    its current connection began (it came back after a drop: listen.py), as every
    connection's times count from its own start; audio from before it is below 0."""
    if not start:
        return msg
    if isinstance(msg, (Final, Partial, Closed, UtteranceEnd)):
        return on_channel_clock(msg, -start)
    if isinstance(msg, Language):
        return dataclasses.replace(msg, start=msg.start - start)
    if isinstance(msg, Status):
        return dataclasses.replace(msg, audio_seconds=msg.audio_seconds - start)
    return msg


class Hub:
    """Channels, their transcripts and viewers. ``retention_s`` is how long an ended channel
    stays readable (and its viewers connected); ``max_viewers`` caps viewers per channel."""

    # a dropped speaker that comes back to this process goes on in its stream (listen.py)
    rejoins = True

    def __init__(self, retention_s: float = 3600.0, max_viewers: int = 100) -> None:
        self.retention_s = retention_s
        self.max_viewers = max_viewers
        self._sessions: dict[str, Transcript] = {}
        # called with a session id whose live speaker this hub can no longer publish for (a
        # cluster's directory ended the claim); one process's hub never loses one
        self.on_lost: Callable[[str], None] | None = None

    def may_open(self, session: str | None) -> None:
        """Raises ``session_taken`` if :meth:`open` would (an id with a live speaker)."""
        t = self._sessions.get(session) if session else None
        if t is not None and t.live:
            raise ClientError("session_taken", f"session {session!r} is already live")

    def open(self, session: str | None) -> Transcript:
        """Register a speaker: a new channel, or the next speaker of an ended one (its
        transcript goes on). Raises ``session_taken`` while the id has a live speaker, which
        includes the time that speaker's last words are still being decoded."""
        self.expire()
        sid = session or new_session_id()
        self.may_open(sid)
        t = self._sessions.get(sid)
        if t is None:
            t = self._sessions[sid] = Transcript(sid)
            return t
        t.live, t.closed, t.ended_at, t.partial = True, None, None, None
        t.offset = t.audio_seconds
        t.turns.append(len(t.finals))
        t.speakers += 1
        return t

    def publish(self, t: Transcript, msg: Message) -> None:
        """Record a speaker's event (times in its own stream) and send it to the viewers."""
        if not known_language(t, msg):
            self.deliver(t, on_channel_clock(msg, t.offset))

    def deliver(self, t: Transcript, msg: Message) -> None:
        """Record an event already on the channel's clock and send it to the viewers. An
        ``utterance_end`` goes to them too, and the final it closes is kept with ``eou`` (the
        speaker got that end as its own message): downloads, late viewers and the page's
        replay break the line there, as live viewers do on the message."""
        if isinstance(msg, Final):
            t.finals.append(msg)
            t.partial = None
            t.grew.set()
        elif isinstance(msg, Partial):
            t.partial = msg if msg.text else None
        elif isinstance(msg, Closed):
            t.closed = msg
        elif isinstance(msg, UtteranceEnd):
            close_utterance(t.finals)
        elif isinstance(msg, Channel) and msg.instance == t.instance:  # (a new life's said)
            t.said = msg.said
        elif isinstance(msg, Language):
            keep_language(t.languages, len(t.finals), msg)
        else:
            return
        for v in list(t.viewers):
            v.put(msg)
            if v.dropped:
                t.viewers.discard(v)

    def said(self, t: Transcript, seconds: float) -> bool:
        """The live speaker's new stream begins with ``seconds`` made final already (``said``):
        on a channel whose clock ran before it (a speaker back on it after a drop, in a new
        stream: on another Ray replica, or after the grace), its time 0 is that long before
        where the channel is final to (:func:`resume_at`), so that its finals (after them) go
        on where the channel's did; a new channel's clock starts at the stream's 0. Whether
        the channel went on."""
        at = resume_at(t.offset, t.finals)
        if at is None:  # (a new life: its viewers learn where its clock sits on the old one)
            self.deliver(t, Channel(t.session, t.instance, max(0.0, seconds)))
            return False
        t.offset = t.audio_seconds = max(0.0, at - max(0.0, seconds))
        return True

    def rejoined(self, t: Transcript, taken_s: float) -> None:
        """The live speaker came back on a new connection ``taken_s`` into its stream."""
        t.audio_seconds = t.offset + taken_s

    def end(self, t: Transcript, audio_seconds: float = 0.0) -> None:
        """The live speaker is done (after its last final was published); the channel's clock
        moves on by its ``audio_seconds``; the channel expires ``retention_s`` from now."""
        t.live = False
        t.audio_seconds = t.offset + audio_seconds
        t.ended_at = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a unit test): expiry happens lazily on the next lookup
        loop.call_later(self.retention_s + 0.05, self.expire)

    def get(self, session: str) -> Transcript | None:
        self.expire()
        return self._sessions.get(session)

    def watch(self, session: str) -> Outbox:
        """A new viewer of channel ``session``, primed with the finals so far, then the live
        partial, or the last ``closed`` if no speaker is live now."""
        t = self.get(session)
        if t is None:
            raise ClientError("unknown_session", f"no session {session!r}")
        return self.add_viewer(t)

    def add_viewer(self, t: Transcript) -> Outbox:
        if len(t.viewers) >= self.max_viewers:
            raise ClientError("too_many_viewers",
                              f"session {t.session!r} has {self.max_viewers} viewers")
        v = Outbox(max_pending=max(512, 2 * len(t.finals) + len(t.languages) + 64), follow=True)
        v.put(Channel(t.session, t.instance, t.said))  # (the life its finals count in)
        # each speaker's last final closes its utterance, as downloads have it: a viewer
        # here when it ended got its ``closed``, and a late one would see the next speaker's
        # words run on in the same line
        for m in with_languages(at_turns(t.finals, t.turns), t.languages):
            v.put(m)
        if t.partial is not None:
            v.put(t.partial)
        if t.closed is not None:
            v.put(t.closed)
        t.viewers.add(v)
        return v

    def unwatch(self, session: str, v: Outbox) -> None:
        t = self._sessions.get(session)
        if t is not None:
            t.viewers.discard(v)

    def expire(self) -> None:
        """Forget channels ended more than ``retention_s`` ago; their viewers are finished."""
        now = time.monotonic()
        for sid in [
            s
            for s, t in self._sessions.items()
            if not t.live and t.ended_at is not None and now - t.ended_at > self.retention_s
        ]:
            for v in self._sessions.pop(sid).viewers:
                v.finish()

    def finish_viewers(self) -> None:
        """Server shutdown: every viewer gets what is queued for it, then its socket closes."""
        for t in self._sessions.values():
            for v in t.viewers:
                v.finish()

    @property
    def viewer_count(self) -> int:
        return sum(len(t.viewers) for t in self._sessions.values())

    @property
    def live_count(self) -> int:
        return sum(1 for t in self._sessions.values() if t.live)
