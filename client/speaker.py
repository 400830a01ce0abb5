"""A speaker's connection that comes back after a drop, as the browser page's does
(``whisperwire mic``).

A microphone cannot pause. While the connection is down (a network blip, a server restarting,
a Ray replica lost) capture goes on and what it hears is held, up to ``HELD_MAX_S`` (the oldest
goes first), and sent once the server takes the session again under the same id. The server
finishes a dropped connection's audio into finals on the session's channel, finals this speaker
never received: after the reconnect they are read from the channel's transcript and shown, each
once. Every connection's times are put on the channel's clock (a reconnected speaker's own
times start again at 0), so a saved file has one clock, as viewers and downloads have it; a
server that restarted has a new channel, whose clock is put after the old one's.

A refusal (an ``error`` before ``ready``, or close code 1003 or 1008) is an answer and is not
retried, except after a drop those a moment changes: ``session_taken`` (the server is still
finishing the dropped connection's last words), ``shutting_down``, ``not_ready``, ``server_full``. A ``closed`` that says the server went away (``server_shutdown``,
``replica_lost``) while the microphone is still on is a drop too.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from enum import Enum
from typing import Any
from urllib.parse import quote, urlencode

from whisperwire.server import wire
from whisperwire.server.hub import on_channel_clock

from .connect import parse_event
from .stream import StreamResult

__all__ = ["HELD_MAX_S", "Held", "RETRIES_S", "speak"]

RETRIES_S = (0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10)  # the page's: 12 tries over ~85 s
HELD_MAX_S = 120.0  # audio held while disconnected, as the page holds
UP_S = 10.0  # a connection up this long clears the count of failed tries
REFUSAL_CODES = (1003, 1008)
GONE = ("server_shutdown", "replica_lost")  # ``closed`` reasons that are drops
# refusals that a moment changes (the page's list): retried after a drop, never at the start
TRANSIENT = ("session_taken", "shutting_down", "not_ready", "server_full")


class Held:
    """PCM not sent yet, oldest first, at most ``max_bytes`` (beyond, the oldest goes)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.let_go = 0  # bytes dropped for room
        self.more = asyncio.Event()
        self._q: deque[bytes] = deque()

    def add(self, piece: bytes) -> None:
        self._q.append(piece)
        self.size += len(piece)
        while self.size > self.max_bytes and len(self._q) > 1:
            gone = self._q.popleft()
            self.size -= len(gone)
            self.let_go += len(gone)
        self.more.set()

    def take(self) -> bytes | None:
        if not self._q:
            return None
        piece = self._q.popleft()
        self.size -= len(piece)
        return piece

    def put_back(self, piece: bytes) -> None:
        self._q.appendleft(piece)
        self.size += len(piece)


class Sent:
    """The last ``max_bytes`` of audio sent, to be said again when a drop lost some of it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._q: deque[bytes] = deque()

    def add(self, piece: bytes) -> None:
        self._q.append(piece)
        self.size += len(piece)
        while self.size - len(self._q[0]) >= self.max_bytes:
            self.size -= len(self._q.popleft())

    def last(self, n: int) -> list[bytes]:
        """The last ``n`` bytes (or all there are), oldest first, taken out."""
        out: list[bytes] = []
        while n > 0 and self._q:
            piece = self._q.pop()
            self.size -= len(piece)
            if len(piece) > n:
                self._q.append(piece[: len(piece) - n])
                self.size += len(piece) - n
                piece = piece[len(piece) - n :]
            out.append(piece)
            n -= len(piece)
        return out[::-1]


class Outcome(Enum):
    CLOSED = "closed"  # the session ended (``closed``): done
    REFUSED = "refused"  # the server said no: done
    DROPPED = "dropped"  # try again


class _Speaker:
    def __init__(self, url: str, chunks: AsyncIterator[bytes], params: wire.ListenParams,
                 on_message: Callable[[wire.Message], None] | None, token: str | None,
                 waits_s: tuple[float, ...], held_max_s: float,
                 say: Callable[[str], None]) -> None:
        self.url, self.chunks, self.params, self.token = url, chunks, params, token
        self.on_message = on_message or (lambda m: None)
        self.waits_s, self.say = waits_s, say
        self.bps = params.bytes_per_sample * params.sample_rate  # bytes per audio second
        self.held = Held(int(held_max_s * self.bps))
        self.sent_audio = Sent(int(held_max_s * self.bps))
        self.source_done = asyncio.Event()
        self.res = StreamResult()
        self.session: str | None = params.session
        self.ever_ready = False
        self.seen = -1  # the last final segment shown
        self.sent = 0
        self.t0 = time.monotonic()
        # this connection's time 0 on the (first) channel's clock; the sent bytes it began at
        self.offset, self.began_at = 0.0, 0
        self.restarts = 0.0  # where a restarted server's new channel begins on that clock
        self.last_end: float | None = None  # the end of the last final shown, on that clock

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def run(self) -> StreamResult:
        pump = asyncio.create_task(self._pump())
        try:
            await self._connections()
        finally:
            pump.cancel()
            aclose = getattr(self.chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        return self.res

    async def _connections(self) -> None:
        failures = 0
        while True:
            began = time.monotonic()
            outcome = await self._connect_once()
            if outcome is not Outcome.DROPPED:
                return
            if time.monotonic() - began >= UP_S:
                failures = 0
            if failures >= len(self.waits_s):
                held = self.held.size / self.bps
                self.say(f"lost the server at {self.url} and could not reach it again"
                         + (f"; {held:.1f} s of audio were not sent" if held >= 0.05 else ""))
                return
            self.say(f"connection lost; reconnecting to session {self.session!r} "
                     f"(try {failures + 1} of {len(self.waits_s)})")
            await asyncio.sleep(self.waits_s[failures])
            failures += 1

    async def _pump(self) -> None:
        """The microphone, into :class:`Held`, whatever the connection is doing."""
        try:
            async for piece in self.chunks:
                self.held.add(piece)
        except (asyncio.CancelledError, KeyboardInterrupt):
            pass
        finally:
            self.source_done.set()
            self.held.more.set()

    async def _connect_once(self) -> Outcome:
        import websockets

        p = replace(self.params, session=self.session)
        full = f"{self.url.rstrip('/')}/v1/listen?{urlencode(p.to_query())}"
        try:
            # no keepalive timeout: a speaker faster than the decoder is held back by TCP, and a
            # ping then waits behind its own audio; the audio flowing is the sign of life
            ws = await websockets.connect(full, max_size=None, open_timeout=30,
                                          ping_timeout=None, additional_headers=self.headers)
        except (OSError, TimeoutError, websockets.InvalidHandshake):
            if not self.ever_ready:
                raise  # never reached: said at once, as every command does
            return Outcome.DROPPED
        async with ws:
            ready = asyncio.Event()
            sender = asyncio.create_task(self._send(ws, ready))
            outcome = await self._read(ws, ready)
            sender.cancel()
            if outcome is Outcome.DROPPED:
                ws.transport.abort()
        self.res.close_code, self.res.close_reason = ws.close_code, ws.close_reason or ""
        if outcome is Outcome.DROPPED and ws.close_code in REFUSAL_CODES and not ready.is_set():
            return Outcome.REFUSED
        return outcome

    async def _read(self, ws: Any, ready: asyncio.Event) -> Outcome:
        import websockets

        try:
            async for raw in ws:
                m = parse_event(raw)
                if m is None:
                    continue
                if isinstance(m, wire.Error) and not ready.is_set():
                    if m.code in TRANSIENT and self.ever_ready:
                        return Outcome.DROPPED  # (the dropped connection is still finishing)
                    self._keep(m)
                    return Outcome.REFUSED
                if isinstance(m, wire.Ready):
                    again = self.ever_ready
                    self.session, self.ever_ready = m.session, True
                    if again or self.params.session:  # (a named channel may have a past)
                        await self._catch_up(again)
                    self.began_at = self.sent
                    ready.set()
                    if again:
                        continue
                if isinstance(m, wire.Final):
                    if m.segment <= self.seen:
                        continue
                    self.seen = m.segment
                if isinstance(m, wire.Closed):
                    if m.reason in GONE and not self.source_done.is_set():
                        return Outcome.DROPPED
                    self._keep(m)
                    return Outcome.CLOSED
                self._keep(m)
        except websockets.ConnectionClosed:
            pass
        return Outcome.DROPPED

    async def _send(self, ws: Any, ready: asyncio.Event) -> None:
        """Held audio, then the microphone's as it comes; ``close`` once it has ended."""
        import websockets

        await ready.wait()
        try:
            while True:
                self.held.more.clear()
                piece = self.held.take()
                if piece is None:
                    if self.source_done.is_set():
                        await ws.send(json.dumps({"type": "close"}))
                        return
                    await self.held.more.wait()
                    continue
                try:
                    await ws.send(piece)
                except websockets.ConnectionClosed:
                    self.held.put_back(piece)  # sent again on the next connection
                    return
                self.sent += len(piece)
                self.sent_audio.add(piece)
                self.res.sends.append((time.monotonic() - self.t0, self.sent / self.bps))
        except websockets.ConnectionClosed:
            pass

    def _keep(self, m: wire.Message, offset: float | None = None) -> None:
        m = on_channel_clock(m, self.offset if offset is None else offset)
        if isinstance(m, wire.Final):
            self.last_end = m.end
        self.res.messages.append((time.monotonic() - self.t0, self.sent / self.bps, m))
        self.on_message(m)

    async def _channel(self) -> tuple[list[wire.Final], float] | None:
        """The session's finals as its channel has them (``transcript.json``), and where the
        live speaker's time 0 is on its clock; None if they cannot be read."""
        base = self.url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        req = urllib.request.Request(
            f"{base}/v1/sessions/{quote(self.session or '', safe='')}/transcript.json",
            headers=self.headers)

        def get() -> bytes:
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - the server's URL
                return r.read()

        try:
            body = json.loads(await asyncio.to_thread(get))
            out = [parse_event(json.dumps(f)) for f in body.get("finals", [])]
            return [f for f in out if isinstance(f, wire.Final)], float(body.get("offset", 0.0))
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    async def _catch_up(self, again: bool) -> None:
        """Where this connection's times go on the channel's clock; and after a drop
        (``again``) the finals the server made of the dropped connection's last audio, shown,
        and the audio that connection sent but the server never decoded, sent again: what was
        in flight when it dropped, or, from a server that restarted (a new channel), all after
        the last final."""
        got = await self._channel()
        on_old = (self.sent - self.began_at) / self.bps  # audio sent on the dropped connection
        if got is None:
            if again:
                self.say("could not read the finals made while the connection was down; the "
                         "session's transcript on the server has them")
                self.offset += on_old  # the best guess
            return
        finals, start = got
        if again and not any(f.segment == self.seen for f in finals) and (
                self.seen >= 0 or start == 0.0):
            resume = self.offset if self.last_end is None else max(self.offset, self.last_end)
            self._say_again(self.offset + on_old - resume)
            self.restarts, self.seen = resume, -1
        elif again:
            self._say_again(on_old - (start - (self.offset - self.restarts)))
            for f in finals:
                if f.segment > self.seen:
                    self.seen = f.segment
                    self._keep(f, self.restarts)
        self.seen = max(self.seen, finals[-1].segment if finals else -1)
        self.offset = self.restarts + start

    def _say_again(self, seconds: float) -> None:
        n = int(seconds * self.bps) // self.params.bytes_per_sample * self.params.bytes_per_sample
        if n > 0:
            for piece in reversed(self.sent_audio.last(n)):
                self.held.put_back(piece)


def _say(text: str) -> None:
    print(f"whisperwire: {text}", file=sys.stderr)


async def speak(url: str, chunks: AsyncIterator[bytes], params: wire.ListenParams, *,
                on_message: Callable[[wire.Message], None] | None = None,
                token: str | None = None, waits_s: tuple[float, ...] | None = None,
                held_max_s: float = HELD_MAX_S,
                say: Callable[[str], None] = _say) -> StreamResult:
    """Send ``chunks`` as one session, across drops, and collect what the server says (see the
    module's docstring). Raises what connecting raises only if the server was never reached."""
    waits = RETRIES_S if waits_s is None else waits_s
    return await _Speaker(url, chunks, params, on_message, token, waits, held_max_s, say).run()
