"""Published sessions: their transcripts, kept after the speaker leaves.

The speaker's connection publishes every caption event here; whoever wants a session's text
later (viewers, transcript downloads) reads it from here, never from the connection.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from .errors import ProtocolError
from .wire import Closed, Final, Message

__all__ = ["Hub", "Transcript"]


@dataclass
class Transcript:
    session: str
    finals: list[Final] = field(default_factory=list)
    live: bool = True
    closed: Closed | None = None
    ended_at: float | None = None

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.finals)


class Hub:
    """Session ids and transcripts. ``retention_s`` is how long an ended session's transcript
    stays readable."""

    def __init__(self, retention_s: float = 3600.0) -> None:
        self.retention_s = retention_s
        self._sessions: dict[str, Transcript] = {}

    def open(self, session: str | None) -> Transcript:
        """Register a speaking session; a live id cannot be taken twice."""
        self.expire()
        sid = session or secrets.token_urlsafe(12)
        old = self._sessions.get(sid)
        if old is not None and old.live:
            raise ProtocolError("session_taken", f"session {sid!r} is already live")
        t = self._sessions[sid] = Transcript(sid)
        return t

    def publish(self, t: Transcript, msg: Message) -> None:
        if isinstance(msg, Final):
            t.finals.append(msg)
        elif isinstance(msg, Closed):
            t.closed = msg

    def end(self, t: Transcript) -> None:
        t.live = False
        t.ended_at = time.monotonic()

    def get(self, session: str) -> Transcript | None:
        self.expire()
        return self._sessions.get(session)

    def expire(self) -> None:
        now = time.monotonic()
        for sid in [
            s
            for s, t in self._sessions.items()
            if not t.live and t.ended_at is not None and now - t.ended_at > self.retention_s
        ]:
            del self._sessions[sid]

    @property
    def live_count(self) -> int:
        return sum(1 for t in self._sessions.values() if t.live)
