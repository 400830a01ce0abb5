"""A speaker's connection that comes back after a drop, as the browser page's does
(``whisperwire mic``, and ``stream`` with a file paced as a microphone gives it).

A microphone cannot pause. While the connection is down (a network blip, a server restarting,
a Ray replica lost) capture goes on and what it hears is held, up to ``HELD_MAX_S`` (the oldest
goes first, and the user is told), and sent once the server takes the session again under the
same id. Back within the server's rejoin grace, the connection goes on in the dropped one's
stream; later, the server has finished that audio into finals. Either way the channel may
have finals this speaker never received: after the reconnect they are read from the channel's
transcript (``transcript.json``) and shown, each once (and not again if the stream sends them). Audio the dropped connection sent that
never reached the server (in flight when it dropped) is sent again; a server that restarted has
a new channel (``instance``) and lost what it had not made final, so everything after the last
final shown is sent again. A stream the server did not keep (``ready`` without ``rejoined``:
a restarted server, another Ray replica, back after the grace) also gets the second before
that point again, as context (``said``: :mod:`.rejoin`). Every connection's times are put on the channel's clock (a
reconnected speaker's own times start again at 0; a restarted server's channel goes on after
the old one's), so a saved file has one clock, as viewers and downloads have it.

A refusal (an ``error`` before ``ready``, or close code 1003 or 1008) is an answer and is not
retried, except after a drop those a moment changes: ``session_taken`` (the server is still
finishing the dropped connection's last words), ``shutting_down``, ``not_ready``,
``server_full``. A ``closed`` that says the server went away (``server_shutdown``,
``replica_lost``) while there is audio to send is a drop too, and so is a connection that says
nothing for ``SILENT_S`` (the server says ``status`` every second: the link died silently).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import sys
import time
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from enum import Enum
from typing import Any
from urllib.parse import quote

from whisperwire.server import wire

from .connect import bearer, listen_url, parse_event
from .rejoin import Channel, Rejoin
from .stream import StreamResult

__all__ = ["HELD_MAX_S", "Pcm", "RETRIES_S", "speak"]

RETRIES_S = (0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10)  # the page's: 12 tries over ~85 s
HELD_MAX_S = 120.0  # audio held while disconnected, as the page holds
UP_S = 10.0  # a connection up this long clears the count of failed tries
OPEN_S = 10.0  # a reconnect's handshake (the first connection waits 30 s, as every command)
SILENT_S = 15.0  # no message this long: the link is dead
CLOSE_S = 120.0  # after ``close``, the last finals and ``closed`` come within this
FETCH_S = 5.0  # reading the channel's transcript, and tries of it
FETCH_TRIES = 3
REFUSAL_CODES = (1003, 1008)
GONE = {"server_shutdown": "the server is shutting down",  # ``closed`` reasons that are drops
        "replica_lost": "the server lost the session"}
# refusals that a moment changes (the page's list): retried after a drop, never at the start
TRANSIENT = ("session_taken", "shutting_down", "not_ready", "server_full")


class Pcm:
    """PCM pieces, oldest first, at most ``max_bytes`` of them (beyond, the oldest go, counted
    in ``let_go``): the audio held to send, and the audio sent lately to say again."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.let_go = 0
        self._q: deque[bytes] = deque()

    def add(self, piece: bytes) -> None:
        self._q.append(piece)
        self.size += len(piece)
        while self.size > self.max_bytes and len(self._q) > 1:
            gone = self._q.popleft()
            self.size -= len(gone)
            self.let_go += len(gone)

    def take(self) -> bytes | None:
        if not self._q:
            return None
        piece = self._q.popleft()
        self.size -= len(piece)
        return piece

    def put_back(self, pieces: list[bytes]) -> None:
        """``pieces`` (oldest first) in front of what is there."""
        for piece in reversed(pieces):
            self._q.appendleft(piece)
            self.size += len(piece)

    def take_last(self, n: int) -> list[bytes]:
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
    STUCK = "stuck"  # the session never closed after ``close``: done
    DROPPED = "dropped"  # try again
    BUSY = "busy"  # refused for a moment after a drop: try again


class _Speaker:
    def __init__(self, url: str, chunks: AsyncIterator[bytes], params: wire.ListenParams,
                 on_message: Callable[[wire.Message], None] | None, token: str | None,
                 waits_s: tuple[float, ...], held_max_s: float,
                 say: Callable[[str], None], quit: asyncio.Event | None,
                 stop: asyncio.Event | None, ahead_s: float | None) -> None:
        self.url, self.chunks, self.params, self.token = url, chunks, params, token
        self.on_message = on_message or (lambda m: None)
        self.waits_s, self.say, self.quit, self.stop = waits_s, say, quit, stop
        self.bps = params.bytes_per_sample * params.sample_rate  # bytes per audio second
        self.held = Pcm(int(held_max_s * self.bps))  # to send
        self._let_go_at_join = 0  # what ``held`` had let go when last counted (:meth:`_let_go_since`)
        self.sent_audio = Pcm(int(held_max_s * self.bps))  # sent lately
        self.more = asyncio.Event()  # something was added to ``held``, or the source ended
        self.taken = asyncio.Event()  # something was taken from ``held`` to send
        # a source that can wait (a file) is read no further ahead than this: a first Ctrl-C
        # then stops it where the sending is, not after all of it was read into ``held``
        self.ahead = None if ahead_s is None else int(ahead_s * self.bps)
        self.source_done = asyncio.Event()
        self.res = StreamResult()
        self.session: str | None = params.session
        self.ever_ready = False
        self.clock = Rejoin()  # where each connection falls on the channel (pure)
        self.sent = 0  # bytes sent, over all connections (audio said again counts again)
        self.read = 0  # bytes taken from the source
        self.furthest = 0  # how far into the source the sending has come (bytes)
        self.close_sent_at: float | None = None
        self.t0 = time.monotonic()
        self.began_at = 0  # the sent bytes this connection began at
        self.why = "connection lost"  # what the next reconnect says of the drop
        self.quitting = False  # the user quit (a second Ctrl-C): hang up, do not come back

    async def run(self) -> StreamResult:
        pump = asyncio.create_task(self._pump())
        try:
            await self._until_quit(self._connections())
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            aclose = getattr(self.chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(RuntimeError):
                    await aclose()
        if self.held.let_go:
            self.res.unsent_s = self.held.let_go / self.bps
            self.say(f"{self.held.let_go / self.bps:.1f} s of audio were never sent: the "
                     f"server could not take it, and at most {self.held.max_bytes / self.bps:.0f}"
                     " s is held")
        return self.res

    async def _until_quit(self, work: Any) -> None:
        """``work``, unless the user quits first (a second Ctrl-C)."""
        task = asyncio.ensure_future(work)
        if self.quit is None:
            await task
            return
        quitter = asyncio.ensure_future(self.quit.wait())
        done, _ = await asyncio.wait({task, quitter}, return_when=asyncio.FIRST_COMPLETED)
        quitter.cancel()
        if task in done:
            task.result()
            return
        self.quitting = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._lost("stopped")

    def _lost(self, why: str) -> None:
        self.res.gave_up = True  # (said here: ``finish`` need not say the server ended it)
        held = self.held.size / self.bps
        # (a file is read at most ``ahead`` past what was sent: what was held is not all that
        # went unsent; "1.0 s of audio were not sent" of a file 175 s from its end)
        rest = self.ahead is not None and not self.source_done.is_set() and not self.quitting
        unsent = [f"{held:.1f} s of audio"] * (held >= 0.05) + ["the rest of the file"] * rest
        self.say(why + (f"; {' and '.join(unsent)} were not sent" if unsent else ""))

    async def _connections(self) -> None:
        failures = 0
        while True:
            began = time.monotonic()
            outcome = await self._connect_once()
            if outcome not in (Outcome.DROPPED, Outcome.BUSY):
                return
            if time.monotonic() - began >= UP_S:
                failures = 0
            if failures >= len(self.waits_s):
                self._lost(f"lost the server at {self.url} and could not reach it again")
                return
            held = self.held.size / self.bps
            again = "again" if self.stop is not None and self.stop.is_set() else "twice"
            then = (f" (Ctrl-C {again} to stop without sending the {held:.1f} s held)"
                    if self.source_done.is_set() and held >= 0.05 else "")
            why, self.why = self.why, "connection lost"
            self.say(f"{why}; reconnecting to session {self.session!r} "
                     f"(try {failures + 1} of {len(self.waits_s)}){then}")
            await asyncio.sleep(self.waits_s[failures])
            failures += 1

    async def _pump(self) -> None:
        """The microphone, into ``held``, whatever the connection is doing."""
        try:
            async for piece in self.chunks:
                self.read += len(piece)
                self.held.add(piece)
                self.more.set()
                while self.ahead is not None and self.held.size >= self.ahead:
                    self.taken.clear()
                    await self.taken.wait()
        except (asyncio.CancelledError, KeyboardInterrupt):
            pass
        finally:
            self.source_done.set()
            self.more.set()

    async def _connect_once(self) -> Outcome:
        import websockets

        full = listen_url(self.url, replace(self.params, session=self.session))
        try:
            # no keepalive timeout: a speaker faster than the decoder is held back by TCP, and a
            # ping then waits behind its own audio; the server's ``status`` is the sign of life
            ws = await websockets.connect(full, max_size=None, ping_timeout=None,
                                          open_timeout=OPEN_S if self.ever_ready else 30,
                                          additional_headers=bearer(self.token))
        except (OSError, TimeoutError, websockets.InvalidHandshake):
            if not self.ever_ready:
                raise  # never reached: said at once, as every command does
            return Outcome.DROPPED
        ready = asyncio.Event()
        self.close_sent_at = None
        outcome = Outcome.DROPPED
        sender = asyncio.create_task(self._send(ws, ready))
        try:
            outcome = await self._read(ws, ready)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            if outcome in (Outcome.DROPPED, Outcome.BUSY) and not self.quitting:
                ws.transport.abort()  # (it went: the next connection comes back to the stream)
            else:  # done, or the user quits: a normal closure, which the server never waits on
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 5 if outcome is Outcome.CLOSED else 1)
                ws.transport.abort()
        self.res.close_code, self.res.close_reason = ws.close_code, ws.close_reason or ""
        if outcome is Outcome.DROPPED and not ready.is_set() and ws.close_code in REFUSAL_CODES:
            return Outcome.REFUSED
        return outcome

    async def _next(self, ws: Any) -> Any:
        """The next frame; TimeoutError when the server is silent too long (or does not end
        the session in time after ``close``)."""
        wait = SILENT_S
        if self.close_sent_at is not None:
            wait = min(wait, max(0.05, self.close_sent_at + CLOSE_S - time.monotonic()))
        return await asyncio.wait_for(ws.recv(), wait)

    async def _read(self, ws: Any, ready: asyncio.Event) -> Outcome:
        import websockets

        while True:
            try:
                raw = await self._next(ws)
            except asyncio.TimeoutError:
                if self.close_sent_at is not None and \
                        time.monotonic() >= self.close_sent_at + CLOSE_S:
                    self.say(f"the server did not end the session within {CLOSE_S:.0f} s")
                    return Outcome.STUCK
                return Outcome.DROPPED  # the link died without a word
            except websockets.ConnectionClosed:
                return Outcome.DROPPED
            m = parse_event(raw)
            if m is None:
                continue
            if isinstance(m, wire.Error) and not ready.is_set():
                if m.code in TRANSIENT and self.ever_ready:
                    return Outcome.BUSY  # (the dropped connection is still finishing)
                self._keep(m)
                return Outcome.REFUSED
            if isinstance(m, wire.Ready):
                again = self.ever_ready
                self.session, self.ever_ready = m.session, True
                if not await self._catch_up(again, bool(m.rejoined)):
                    return Outcome.DROPPED
                self.began_at = self.sent
                ready.set()
                if again:
                    continue
            elif isinstance(m, (wire.Final, wire.Partial)) and m.segment <= self.clock.seen:
                continue  # (back in the same stream: the catch-up read that final already)
            elif isinstance(m, wire.Final):
                self.clock.saw(m.segment)
            elif isinstance(m, wire.Closed):
                unread = (self.sent - self.began_at) / self.bps - m.audio_seconds
                if m.reason in GONE and (not self.source_done.is_set() or self.held.size
                                         or unread > 0.05):
                    self.why = GONE[m.reason]
                    return Outcome.DROPPED  # (what it never read is sent again)
                self._keep(m)
                return Outcome.CLOSED
            self._keep(m)

    async def _send(self, ws: Any, ready: asyncio.Event) -> None:
        """Held audio, then the microphone's as it comes; ``close`` once it has ended."""
        import websockets

        await ready.wait()
        try:
            if self.clock.said or self.clock.must_say:  # (a new stream after a drop)
                # (less what the held audio let go from its front meanwhile: the lead went first)
                said = self.clock.to_say(self._let_go_since())
                if said > 0 or self.clock.must_say:
                    await ws.send(wire.encode(wire.Said(round(said, 3), self.clock.said_last())))
                self.clock.said_sent()
            while True:
                self.more.clear()
                piece = self.held.take()
                self.taken.set()
                if piece is None:
                    if self.source_done.is_set():
                        self.close_sent_at = time.monotonic()
                        await ws.send(json.dumps({"type": "close"}))
                        return
                    await self.more.wait()
                    continue
                # counted as sent before it is: if the connection drops now, what the server
                # did not get is said again after the reconnect (:meth:`_catch_up`)
                self.sent += len(piece)
                self.sent_audio.add(piece)
                # (all that is held comes after this piece, and what ``held`` let go while
                # disconnected was never sent; audio said again after a drop is no further, so
                # the summary and final delays count the source once, on the channel's clock)
                self.furthest = max(self.furthest,
                                    self.read - self.held.let_go - self.held.size)
                self.res.sends.append((time.monotonic() - self.t0, self.furthest / self.bps))
                await ws.send(piece)
        except websockets.ConnectionClosed:
            pass

    def _keep(self, m: wire.Message) -> None:
        """A message of this connection, on the channel's clock."""
        self._show(self.clock.place(m))

    def _show(self, m: wire.Message) -> None:
        self.res.messages.append((time.monotonic() - self.t0, self.sent / self.bps, m))
        self.on_message(m)

    async def _channel(self) -> Channel | None:
        """The session as ``transcript.json`` has it (three tries); None if that cannot be
        read (or is from a server that does not say ``offset``). Read on a daemon thread: a
        quit never waits for it."""
        base = self.url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        req = urllib.request.Request(
            f"{base}/v1/sessions/{quote(self.session or '', safe='')}/transcript.json",
            headers=bearer(self.token))

        def get() -> bytes:
            with urllib.request.urlopen(req, timeout=FETCH_S) as r:  # noqa: S310 - our server
                return r.read()

        for attempt in range(FETCH_TRIES):
            try:
                body = json.loads(await _on_daemon_thread(get))
                out = [parse_event(json.dumps(f)) for f in body.get("finals", [])]
                return Channel([f for f in out if isinstance(f, wire.Final)],
                               float(body["offset"]), str(body.get("instance", "")))
            except (OSError, http.client.HTTPException):
                await asyncio.sleep(0.5 * (attempt + 1))
            except (ValueError, TypeError, KeyError, AttributeError):
                return None
        return None

    async def _catch_up(self, again: bool, goes_on: bool = False) -> bool:
        """Where this connection's times go on the channel's clock; and after a drop
        (``again``) the finals the server made of the dropped connection's last audio, shown,
        and the audio that connection sent but the server never decoded, sent again (the
        arithmetic: :class:`.rejoin.Rejoin`). False
        when after a drop the transcript cannot be read: no guess is made (it would lose,
        repeat or misplace words); the connection is given up before it sends anything."""
        ch = await self._channel()
        on_old = (self.sent - self.began_at) / self.bps  # audio sent on the dropped connection
        if ch is None:
            if again:
                self.say(f"cannot read session {self.session!r}'s transcript, which coming "
                         "back without losing or repeating words needs")
                return False
            if self.params.session:
                self.say(f"cannot read session {self.session!r}'s transcript: times here are "
                         "this connection's own, not the session's")
            return True
        # (a lead a dropped connection never sent is still the held audio's front: what that
        # let go since counts against it)
        self.clock.said = max(0.0, self.clock.said - self._let_go_since())
        for f in self.clock.joined(ch, again, on_old, self._say_again, goes_on):
            self._show(f)  # (on the clock already)
        if not again:  # (a channel an earlier speaker used: its finals come after its audio)
            self.res.source_at = self.clock.offset
        return True

    def _let_go_since(self) -> float:
        """Seconds the held audio let go from its front since the last count (the lead's
        first, while ``said`` waits to be sent)."""
        gone = (self.held.let_go - self._let_go_at_join) / self.bps
        self._let_go_at_join = self.held.let_go
        return gone

    def _say_again(self, seconds: float) -> float:
        """Put the last ``seconds`` sent back in front of the held audio; how much there was."""
        step = self.params.bytes_per_sample
        n = max(0, int(seconds * self.bps) // step * step)
        pieces = self.sent_audio.take_last(n)
        self.held.put_back(pieces)
        return sum(len(p) for p in pieces) / self.bps


async def _on_daemon_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on a daemon thread (``asyncio.to_thread``'s pool is joined at exit)."""
    import threading

    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(exc: BaseException | None, out: Any) -> None:
        if not done.done():
            done.set_exception(exc) if exc is not None else done.set_result(out)

    def run() -> None:
        try:
            out, exc = fn(), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
            out, exc = None, e
        with contextlib.suppress(RuntimeError):  # the loop ended meanwhile (a quit)
            loop.call_soon_threadsafe(settle, exc, out)

    threading.Thread(target=run, daemon=True).start()
    return await done


def _say(text: str) -> None:
    print(f"whisperwire: {text}", file=sys.stderr)


async def speak(url: str, chunks: AsyncIterator[bytes], params: wire.ListenParams, *,
                on_message: Callable[[wire.Message], None] | None = None,
                token: str | None = None, waits_s: tuple[float, ...] | None = None,
                held_max_s: float = HELD_MAX_S, say: Callable[[str], None] = _say,
                quit: asyncio.Event | None = None, stop: asyncio.Event | None = None,
                ahead_s: float | None = None) -> StreamResult:
    """Send ``chunks`` as one session, across drops, and collect what the server says (see the
    module's docstring). ``stop`` is the first Ctrl-C, which ends ``chunks`` (said here only
    to tell the user which Ctrl-C comes next); ``quit`` (a second one) ends it at once, held
    audio unsent. ``ahead_s``: a source that can wait (a file, not a microphone) is read at
    most this far ahead of what was sent. Raises what connecting raises only if the server
    was never reached."""
    waits = RETRIES_S if waits_s is None else waits_s
    return await _Speaker(url, chunks, params, on_message, token, waits, held_max_s, say,
                          quit, stop, ahead_s).run()
