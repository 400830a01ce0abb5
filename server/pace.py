"""How fast a live stream's audio is read: at most ``speed`` times real time, after a burst.

The backlog limit (``max_backlog_s``) holds back a client whose *speech* outruns the decoder.
Silence costs no decode, so a client sending digital silence (or noise the VAD calls silence)
flat out was read as fast as the event loop could parse it: 30,000 s of "audio" in 10 s, every
other session's events and ``/healthz`` waiting 200 ms behind it. Reading a stream no faster
than ``speed`` times real time bounds what one stream costs the loop, whatever it sends; the
burst lets a reconnecting client resend what it held, and a file sent flat out start at once.
Pure: audio seconds and clock readings in, seconds to wait out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IngestPace"]


@dataclass
class IngestPace:
    speed: float  # audio seconds read per second of wall time, sustained
    burst: float  # audio seconds that may be read ahead of that pace
    _credit: float | None = None  # audio seconds that may be read now (negative: owed)
    _at: float = 0.0  # the clock reading ``_credit`` is for

    def _refill(self, now: float) -> float:
        if self._credit is None:
            self._credit = self.burst
        else:
            self._credit = min(self.burst, self._credit + (now - self._at) * self.speed)
        self._at = now
        return self._credit

    def took(self, seconds: float, now: float) -> None:
        """The stream read ``seconds`` of audio (one message may be more than the burst)."""
        self._credit = self._refill(now) - seconds

    def wait(self, now: float) -> float:
        """Seconds to wait before the next message is read (0: read it now)."""
        credit = self._refill(now)
        return 0.0 if credit >= 0 else -credit / self.speed
