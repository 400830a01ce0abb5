"""Published sessions: their transcripts and their viewers.

The speaker's connection publishes every caption event here; viewers and transcript downloads
read from here, never from the speaker's connection, so a slow or dead viewer can never slow the
speaker. Each viewer has its own outbox: finals always queue; a newer partial replaces an unsent
one (a viewer that can't keep up loses partials, not finals); a viewer whose outbox overflows
with finals is dropped.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from dataclasses import dataclass, field

from .errors import ClientError
from .wire import Closed, Final, Message, Partial, Status

__all__ = ["Hub", "Outbox", "Transcript"]


class Outbox:
    """Messages waiting for one slow or fast peer (a viewer, or the speaker itself). The
    transport awaits :meth:`next` and writes what it returns; ``None`` means the stream ended
    (after ``closed`` was delivered) or the peer was dropped for not reading."""

    def __init__(self, max_pending: int = 512) -> None:
        self._q: deque[Message] = deque()
        self._event = asyncio.Event()
        self.max_pending = max_pending
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
        if isinstance(msg, Closed):
            self.done = True
        self._event.set()

    async def next(self) -> Message | None:
        while not self._q:
            if self.dropped or self.done:
                return None
            self._event.clear()
            await self._event.wait()
        return self._q.popleft()

    def drop(self) -> None:
        self.dropped = True
        self._event.set()


@dataclass
class Transcript:
    session: str
    finals: list[Final] = field(default_factory=list)
    partial: Partial | None = None
    live: bool = True
    closed: Closed | None = None
    ended_at: float | None = None
    viewers: set[Outbox] = field(default_factory=set)

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.finals)


class Hub:
    """Session ids, transcripts and viewers. ``retention_s`` is how long an ended session's
    transcript stays readable; ``max_viewers`` caps viewers per session."""

    def __init__(self, retention_s: float = 3600.0, max_viewers: int = 100) -> None:
        self.retention_s = retention_s
        self.max_viewers = max_viewers
        self._sessions: dict[str, Transcript] = {}

    def open(self, session: str | None) -> Transcript:
        """Register a speaking session; a live id cannot be taken twice."""
        self.expire()
        sid = session or secrets.token_urlsafe(12)
        old = self._sessions.get(sid)
        if old is not None and old.live:
            raise ClientError("session_taken", f"session {sid!r} is already live")
        t = self._sessions[sid] = Transcript(sid)
        return t

    def publish(self, t: Transcript, msg: Message) -> None:
        if isinstance(msg, Final):
            t.finals.append(msg)
            t.partial = None
        elif isinstance(msg, Partial):
            t.partial = msg if msg.text else None
        elif isinstance(msg, Closed):
            t.closed = msg
        else:
            return
        for v in list(t.viewers):
            v.put(msg)
            if v.dropped:
                t.viewers.discard(v)

    def end(self, t: Transcript) -> None:
        t.live = False
        t.ended_at = time.monotonic()

    def get(self, session: str) -> Transcript | None:
        self.expire()
        return self._sessions.get(session)

    def watch(self, session: str) -> Outbox:
        """A new viewer of ``session``, primed with the finals so far (and the live partial),
        or ``closed`` at the end if the session is over."""
        t = self.get(session)
        if t is None:
            raise ClientError("unknown_session", f"no session {session!r}")
        if len(t.viewers) >= self.max_viewers:
            raise ClientError("too_many_viewers", f"session {session!r} has {self.max_viewers} viewers")
        v = Outbox(max_pending=max(512, 2 * len(t.finals) + 64))
        for f in t.finals:
            v.put(f)
        if t.partial is not None:
            v.put(t.partial)
        if t.closed is not None:
            v.put(t.closed)
        else:
            t.viewers.add(v)
        return v

    def unwatch(self, session: str, v: Outbox) -> None:
        t = self._sessions.get(session)
        if t is not None:
            t.viewers.discard(v)

    def expire(self) -> None:
        now = time.monotonic()
        for sid in [
            s
            for s, t in self._sessions.items()
            if not t.live and t.ended_at is not None and now - t.ended_at > self.retention_s
        ]:
            del self._sessions[sid]

    @property
    def viewer_count(self) -> int:
        return sum(len(t.viewers) for t in self._sessions.values())

    @property
    def live_count(self) -> int:
        return sum(1 for t in self._sessions.values() if t.live)
