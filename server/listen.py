"""One speaker's WebSocket: binary audio and JSON control in, caption events out.

The connection feeds a :class:`~.session.StreamSession`, asks the engine for the decodes it
has due, publishes every caption event to the channel (:mod:`.hub`) and writes them to the
speaker through an outbox, so a speaker that stops reading never blocks decoding. Whatever ends
the stream (``close``, a hang-up, a timeout, shutdown), what was heard is still decoded and
finalised into the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from . import wire
from .audio import Resampler, pcm_to_float
from .errors import ClientError
from .hub import Hub, Outbox, Transcript, on_connection_clock
from .metrics import Metrics
from .pace import IngestPace
from .session import StreamSession
from .text import caption_script
from .vad import SpeechEnd, SpeechStart, VadEvent, VadSegmenter, webrtc_classifier

if TYPE_CHECKING:
    from .app import ServerConfig

__all__ = ["ListenConnection", "Phase", "VadTap"]

log = logging.getLogger("whisperwire.server")

MAX_DECODE_FAILURES = 3  # in a row; then the session ends with decode_failed (1011)
# A frame's audio goes into the session this much at a time, the event loop free between (see
# ListenConnection.feed)
FEED_SLICE_S = 1.0


class Phase(enum.Enum):
    """Where a speaker's connection is: whether input is still taken, and whether the peer
    still gets events (it may hang up or stop reading before its input ends)."""

    LISTENING = "listening"  # taking audio; events are written to the speaker
    UNHEARD = "unheard"  # still taking audio, but the peer is gone or not reading
    FINISHING = "finishing"  # no more input; decoding the rest, events still written
    DETACHED = "detached"  # no more input, peer gone: decoding the rest for the channel
    CLOSED = "closed"  # ``closed`` published, socket closed

    @property
    def writes(self) -> bool:
        return self in (Phase.LISTENING, Phase.FINISHING)

    @property
    def input_over(self) -> bool:
        return self in (Phase.FINISHING, Phase.DETACHED, Phase.CLOSED)


class VadTap:
    """The session's VAD, with its utterance starts and ends kept for a dialect that reports
    them (Deepgram's ``SpeechStarted``, OpenAI's ``speech_started``/``speech_stopped``)."""

    def __init__(self, vad: VadSegmenter) -> None:
        self.vad = vad
        self.marks: list[SpeechStart | SpeechEnd] = []

    def _keep(self, events: list[VadEvent]) -> list[VadEvent]:
        self.marks.extend(e for e in events if isinstance(e, (SpeechStart, SpeechEnd)))
        return events

    def feed(self, samples: Any) -> list[VadEvent]:
        return self._keep(self.vad.feed(samples))

    def flush(self) -> list[VadEvent]:
        return self._keep(self.vad.flush())

    def take(self) -> list[SpeechStart | SpeechEnd]:
        out, self.marks = self.marks, []
        return out


class ListenConnection:
    """Create, then ``await run()``; :meth:`shutdown` (from anywhere on the loop) makes it
    finish like a ``close``.

    Other APIs (:mod:`.dialects`) subclass it and supply only their own parsing and encoding:
    :meth:`greet`, :meth:`take_text`, :meth:`take_audio`, :meth:`encode` and
    :meth:`close_frame`; the session, decoding, channel, limits and finishing stay here."""

    api = "whisperwire"  # which API the speaker uses, for the log
    # whether a dropped client comes back to its session id (the page and the CLI do; a
    # dialect's clients open a new stream), so the stream waits ``rejoin_grace_s`` for it
    rejoins = True

    def __init__(self, ws: WebSocket, params: wire.ListenParams, engine: Any, hub: Hub,
                 transcript: Transcript, config: ServerConfig, metrics: Metrics,
                 vad: VadSegmenter | None = None, whole_input: bool = False) -> None:
        self.ws, self.params, self.engine, self.hub = ws, params, engine, hub
        self.metrics = metrics
        self.transcript = transcript
        self.config = config
        self.sid = transcript.session
        self.idle_timeout_s = config.idle_timeout_s
        self.max_text_chars = 4096  # control messages; a dialect with audio in JSON allows more
        self.vad = VadTap(vad or VadSegmenter(config.vad,
                                              webrtc_classifier(config.vad.aggressiveness)))
        # no language on a multilingual model is detection, and detects as ``auto`` does: a
        # short first phrase waits for the next to join it (alone, base hears "他称" as
        # "Taochun"). OpenAI's clients and Deepgram's ``multi`` ask so.
        language = params.language
        if language is None and len(engine.languages) > 1:
            language = "auto"
        self.session = StreamSession(
            config.stream,
            self.vad,  # type: ignore[arg-type]
            language=language,
            task=params.task,
            prompt=params.prompt,
            zh_script=params.zh_script,
            name=transcript.session,
        )
        self.session.segment = len(transcript.finals)  # a channel's numbering goes on
        self.resampler = Resampler(params.sample_rate)
        self.phase = Phase.LISTENING
        self.decode_failed = False
        self.decoding = False  # a request is with the engine (the session must not drop it)
        self.wake = asyncio.Event()
        self.progress = asyncio.Event()  # a decode finished (the backlog may have shrunk)
        self.stop_reading = asyncio.Event()
        self.stop_reason = "server_shutdown"
        self.outbox = Outbox(config.max_pending_messages)
        self._errors: deque[float] = deque()
        self._t0 = time.monotonic()
        self.taken_s = 0.0  # seconds of audio the stream took, over all its connections
        # all of its input is at hand (a file request, its length bounded): read flat out, and
        # a drain lets it read to the end, its deadline deciding
        self.whole_input = whole_input
        # how fast a live socket is read, whatever the audio is (None: as fast as it comes)
        self.pace = (IngestPace(config.max_stream_speed, config.stream_burst_s)
                     if config.max_stream_speed > 0 and not whole_input else None)
        self.conn_start = 0.0  # ... when the current connection began: its time 0
        self._writer: asyncio.Task | None = None
        self._back: asyncio.Future | None = None  # while a dropped speaker may come back
        self._let_go: asyncio.Future | None = None  # a rejoined socket's handler waits on it
        self._said_once = False  # (``said`` moves the channel's clock: once a stream)
        self.may_come_back = False  # the socket went without hanging up on purpose
        self.cut = False  # the server stopped before the last words were decoded
        self._pump: asyncio.Task | None = None
        self._unfed: Any = None  # what feed() left of a long frame, for _feed_rest()
        # when a client sending at real-time pace sends its next frame: the last frame's
        # arrival plus its length (monotonic; a finalize's grace counts from here)
        self._audio_until = 0.0

    def shutdown(self, reason: str = "server_shutdown") -> None:
        """Stop taking audio and finish like a ``close``: the last words still come."""
        if not self.stop_reading.is_set():
            self.stop_reason = reason
            self.stop_reading.set()

    def cut_short(self) -> None:
        """The server stops before this stream's last words were decoded (the drain's deadline
        passed): stop decoding, tell the speaker how much speech it received went untranscribed,
        and close with 1012 (service restart) and no ``closed``. The page and the CLI take that
        for a drop: they come back (to the restarted server) and send again what was not made
        final. Before, the shutdown cancelled the handlers with tracebacks after 90 s."""
        if self.cut or self.phase is Phase.CLOSED or (self._pump is not None
                                                      and self._pump.done()):
            return  # (decoding is over: only the last writes are left)
        self.cut = True
        left = self.session.lag
        log.warning("session=%s event=cut_short untranscribed_s=%.1f", self.sid, left)
        self.send(wire.Error("shutdown_incomplete", f"the server is stopping: {left:.1f} s of "
                             "speech it received were not transcribed; connect again and send "
                             "them again"))
        self.shutdown("server_shutdown")
        if self._pump is not None:
            self._pump.cancel()

    def _detach(self) -> None:
        """The peer is gone or not reading: stop writing, keep decoding for the channel."""
        if self.phase is Phase.LISTENING:
            self.phase = Phase.UNHEARD
        elif self.phase is Phase.FINISHING:
            self.phase = Phase.DETACHED

    # -- the whole life --------------------------------------------------------------------
    async def run(self) -> None:
        log.info("session=%s event=open api=%s sample_rate=%d encoding=%s language=%s speaker=%d",
                 self.sid, self.api, self.params.sample_rate, self.params.encoding,
                 self.params.language, self.transcript.speakers)
        self._t0 = time.monotonic()
        self.greet()
        self.tell_viewers_language()
        self._writer = asyncio.create_task(self._write(self.ws, self.outbox))
        self._pump = asyncio.create_task(self._decode_all())
        ticker = asyncio.create_task(self._status())
        reason = "disconnected"
        try:
            reason = await self._read()
            while reason == "disconnected" and await self._came_back():
                reason = await self._read()
        except asyncio.CancelledError:
            # nobody waits for the rest (a file's client hung up; a shutdown past its grace):
            # the decoder is not kept busy with it, as it was for minutes of a long file
            self._pump.cancel()
            raise
        finally:
            try:
                await self._finish(reason, self._pump, ticker)
            finally:
                self._release()

    def greet(self, rejoined: bool = False) -> None:
        """The first message: ``ready`` with the session id (and its view token), and whether
        the connection goes on in this stream after a drop."""
        auth = self.config.auth
        self.send(wire.Ready(self.sid, self.engine.model_name, self.engine.device,
                             self.engine.compute_type, self.params.sample_rate,
                             view_token=auth.view_token(self.sid) if auth.enabled else None,
                             rejoined=True if rejoined else None))

    def close_frame(self, reason: str) -> tuple[int, str]:
        """The WebSocket close code and reason text that end a session closed for ``reason``
        (our clients read the ``closed`` event before it; a dialect's read the frame)."""
        # (1012, service restart: connect again; the page and the CLI do)
        return {"decode_failed": 1011, "replica_lost": 1012}.get(reason, 1000), ""

    # -- a dropped speaker's way back ---------------------------------------------------------
    @property
    def waiting(self) -> bool:
        """Dropped, and waiting for its speaker to come back (:meth:`rejoin`)."""
        return self._back is not None and not self._back.done()

    async def _came_back(self) -> bool:
        """After a drop the page and the CLI come back to the session within seconds. For
        ``rejoin_grace_s`` the stream stays as it was, undecided, so a word the drop cut in two
        is heard whole when the rest comes (made final at once, half a word was misheard: "ask"
        became "S" or "is"). True: a socket came back and the stream goes on on it; False: the
        stream ends as dropped (its last words become final)."""
        grace = self.config.rejoin_grace_s
        if not (self.rejoins and self.hub.rejoins and self.may_come_back) or grace <= 0 \
                or self.decode_failed or self.stop_reading.is_set():
            return False
        self._release()
        back = self._back = asyncio.get_running_loop().create_future()
        stop = asyncio.ensure_future(self.stop_reading.wait())
        try:
            await asyncio.wait({back, stop}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            self._back = None
            if not back.done():
                back.cancel()
            elif not back.cancelled():
                self._let_go = back.result()[1]  # (released in run(), even if cancelled here)
        if back.cancelled():
            if not self.stop_reading.is_set():
                log.info("session=%s event=not_back after_s=%.0f", self.sid, grace)
                self.metrics.rejoins.labels("not_back").inc()
            return False
        self.metrics.rejoins.labels("back").inc()
        self._go_on(back.result()[0])
        return True

    def _go_on(self, ws: WebSocket) -> None:
        """The stream's next connection: its own outbox and writer, its times from 0, and
        ``offset`` in ``transcript.json`` where it begins, so the client knows what of the
        dropped connection's audio never arrived (and sends it again)."""
        old = self.outbox
        old.drop()
        self.ws, self.outbox = ws, Outbox(self.config.max_pending_messages)
        self.conn_start = self.taken_s
        self.hub.rejoined(self.transcript, self.taken_s)
        self.phase = Phase.LISTENING
        log.info("session=%s event=rejoined audio_s=%.1f", self.sid, self.taken_s)
        self.greet(rejoined=True)
        self._writer = asyncio.create_task(self._write(ws, self.outbox))

    async def rejoin(self, ws: WebSocket) -> None:
        """Give a socket that came back (accepted, same parameters) to this stream, which
        must be :attr:`waiting`; returns once the stream is done with it."""
        if self._back is None or self._back.done():
            raise ClientError("session_taken", f"session {self.sid!r} is already live")
        let_go = asyncio.get_running_loop().create_future()
        self._back.set_result((ws, let_go))
        await let_go

    def same_stream(self, params: wire.ListenParams) -> bool:
        """Whether a speaker asking for ``params`` may go on in this stream: its session, and
        the rest as this one's (whose session may have been the server's choice)."""
        return params == dataclasses.replace(self.params, session=self.sid)

    def _release(self) -> None:
        """The current socket's handler may return: the stream is done with it."""
        if self._let_go is not None and not self._let_go.done():
            self._let_go.set_result(None)

    async def _finish(self, reason: str, pump: asyncio.Task, ticker: asyncio.Task) -> None:
        """Every end of stream flushes: the last words become finals, then ``closed``."""
        self.phase = Phase.FINISHING if self.phase is Phase.LISTENING else Phase.DETACHED
        if not self.decode_failed:  # the session abandoned its audio: nothing more to add
            self.session.feed_audio(self.resampler.flush())
            self.session.finish()
            self.on_vad(self.vad.take())
        self.wake.set()
        try:
            await pump
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.cut or (task is not None and task.cancelling()):
                raise  # (this handler was cancelled, not only its decoding cut short)
        finally:
            ticker.cancel()
            if self.decode_failed:
                reason = "decode_failed"
            heard = self.session.audio_seconds
            if self.cut:
                # (finals the flush made of a VAD-confirmed early end decode)
                self._publish(self.session.events())
                # its channel ends where its finals do: what comes after is to be sent again,
                # and a speaker coming back to the same channel reckons from its end
                heard = self.session.final_to
            closed = wire.Closed(reason, heard)
            self.hub.publish(self.transcript, closed)
            self.hub.end(self.transcript, heard)
            if self.cut:  # (a cut stream did not end: its speaker is to come back)
                self.outbox.finish()
            else:
                self.send(closed)
            await self._writer
            if self.phase.writes:
                code, text = (1012, "") if self.cut else self.close_frame(reason)
                with contextlib.suppress(Exception):  # the peer may be gone already
                    await asyncio.wait_for(self.ws.close(code, text), self.config.send_timeout_s)
            self.phase = Phase.CLOSED
            log.info("session=%s event=closed reason=%s audio_s=%.1f finals=%d", self.sid,
                     reason, self.session.audio_seconds, len(self.transcript.finals))

    # -- input -----------------------------------------------------------------------------
    async def _receive(self) -> dict | str:
        """The next ASGI message, or a reason string when the session must end without one."""
        started = time.monotonic()
        recv = asyncio.ensure_future(self.ws.receive())
        stop = asyncio.ensure_future(self.stop_reading.wait())
        left = self.config.max_session_s - (started - self._t0)
        timeout = min(self.idle_timeout_s, max(0.0, left))
        try:
            while True:
                wait = max(0.0, timeout - (time.monotonic() - started))
                nudge = self._finalize_grace_left(started)
                done, _ = await asyncio.wait({recv, stop}, timeout=wait if nudge is None
                                             else min(wait, nudge),
                                             return_when=asyncio.FIRST_COMPLETED)
                if done or nudge is None or nudge >= wait:
                    break
                self._finalize_without_audio(started)
        except asyncio.CancelledError:
            recv.cancel()
            raise
        finally:
            stop.cancel()
        if stop in done:
            recv.cancel()
            return self.stop_reason
        if recv in done:
            return recv.result()
        recv.cancel()
        if left <= self.idle_timeout_s:
            self.send(wire.Error("max_duration", "the session reached its maximum duration"))
            return "max_duration"
        self.send(wire.Error("idle_timeout",
                             f"no message for {self.idle_timeout_s:.0f} s; closing"))
        return "idle_timeout"

    def _finalize_grace_left(self, since: float) -> float | None:
        """Seconds until a ``finalize`` that waits for audio stops waiting (None: none waits).
        Counted from the last audio and from when this read began, so a read held back by the
        pace or the backlog never counts as the client's silence."""
        if self.decode_failed or not self.session.finalize_waits:
            return None
        quiet_from = max(self._audio_until, since)
        return max(0.0, quiet_from + self.config.finalize_grace_s - time.monotonic())

    def _finalize_without_audio(self, since: float) -> None:
        if self._finalize_grace_left(since) == 0.0:
            log.info("session=%s event=finalize_without_audio", self.sid)
            self.session.finalize_now()
            self.wake.set()

    async def _read(self) -> str:
        """Take messages until the stream ends (or its socket went); returns why."""
        while True:
            await self._room()
            try:
                msg = await self._receive()
            except WebSocketDisconnect as exc:
                return self._gone(exc.code)
            except RuntimeError:
                return self._gone(1006)
            if isinstance(msg, str):
                return msg
            if msg["type"] == "websocket.disconnect":
                return self._gone(msg.get("code", 1006))
            if self.outbox.dropped:
                return "slow_consumer"
            try:
                if self._take(msg):
                    return "client_close"
                await self._feed_rest()
            except ClientError as exc:
                log.info("session=%s event=client_error code=%s", self.sid, exc.code)
                self.send(wire.Error(exc.code, exc.message))
                if self._too_many_errors():
                    self.send(wire.Error("too_many_errors", "too many bad messages; closing"))
                    return "too_many_errors"

    def _gone(self, code: int) -> str:
        """The socket went without our ``close``. A normal closure (1000) hangs up on purpose,
        and a server restart (1012, its ASGI server's shutdown) ends the stream too; any other
        (the page unloading, 1001; a link that died, 1005 or 1006) may come back."""
        self._detach()
        self.may_come_back = code not in (1000, 1012)
        return "disconnected"

    async def _room(self) -> None:
        """Stop reading while more speech waits for the decoder than ``max_backlog_s``, or
        while the stream is ahead of its pace (pace.py): the socket then pushes back on the
        client (TCP flow control), so a session's memory, lag and share of the event loop
        stay bounded at any input rate, and nothing it sent is dropped."""
        if self.pace is not None and (ahead := self.pace.wait(time.monotonic())) > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop_reading.wait(), ahead)
        limit = self.config.max_backlog_s
        while self.session.backlog > limit and not self.stop_reading.is_set():
            self.progress.clear()
            waits = {asyncio.ensure_future(self.progress.wait()),
                     asyncio.ensure_future(self.stop_reading.wait())}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def _take(self, msg: dict) -> bool:
        """One message from the speaker; True for ``close``. Raises ClientError."""
        data, text = msg.get("bytes"), msg.get("text")
        if data is not None:
            limit = self.config.max_message_bytes
            if len(data) > limit:
                raise ClientError("message_too_large", f"audio frames are limited to {limit} bytes")
            self.feed(self.take_audio(data))
        elif text is not None:
            if len(text) > self.max_text_chars:
                raise ClientError("message_too_large",
                                  f"text messages are limited to {self.max_text_chars} characters")
            return self._take_text(text)
        return False

    def _take_text(self, text: str) -> bool:
        """:meth:`take_text`, where a failure no check foresaw (a dialect's control message of
        a shape nobody tested) is the message's ``bad_message``, logged with its traceback,
        and the session goes on: it once ended the session with no error event. Audio frames
        are not covered: a failure there is the server's, and ends the session."""
        try:
            return self.take_text(text)
        except ClientError:
            raise
        except Exception:  # noqa: BLE001 - see above
            log.exception("session=%s event=message_failed", self.sid)
            raise ClientError("bad_message", "the server could not handle that message; the "
                              "session goes on") from None

    def take_audio(self, data: bytes) -> Any:
        """Audio bytes as float32 samples at ``params.sample_rate``. Raises ClientError."""
        bps = self.params.bytes_per_sample
        if len(data) % bps:
            raise ClientError("bad_audio",
                              f"{self.params.encoding} frames must be a multiple of {bps} bytes")
        return pcm_to_float(data, self.params.encoding)

    def take_text(self, text: str) -> bool:
        """A control message; True when it ends the stream. Raises ClientError."""
        m = wire.decode(text, allowed=wire.CLIENT_MESSAGES)
        if isinstance(m, wire.Close):
            return True
        if isinstance(m, wire.Said):
            self._said(m.seconds, m.last)
            return False
        self.finalize()
        return False

    def _said(self, seconds: float, last: wire.Word | None = None) -> None:
        """``said``: only before the stream's first audio (a stream this connection goes on
        with, back within the grace, has its own context), and at most ``MAX_SAID_S``;
        ``last``: the speaker's last final word, for a channel that does not go on here."""
        if self.session.samples_in or self.taken_s or self._said_once:
            raise ClientError("bad_message",
                              "'said' comes once, before the stream's first audio")
        if not 0.0 <= seconds <= wire.MAX_SAID_S:
            raise ClientError("bad_message", f"'said' is 0 to {wire.MAX_SAID_S:g} seconds")
        if last is not None and not (0.0 <= last.start <= last.end <= seconds + 0.5):
            raise ClientError("bad_message", "'said''s last word lies in its seconds")
        self._said_once = True
        t = self.transcript
        goes_on = self.hub.said(t, seconds)
        words = [w for f in t.finals[-1:] for w in f.words[-1:]] if goes_on else []
        # (the channel's own last word where it goes on; else the one the speaker was shown)
        self.session.said(seconds, next((dataclasses.replace(
            w, start=w.start - t.offset, end=w.end - t.offset) for w in words), last))

    def feed(self, x: Any) -> None:
        """Samples at the declared rate into the session (and its VAD), ``FEED_SLICE_S`` at a
        time: the rest of a longer frame waits for :meth:`_feed_rest`. Resampling and the VAD
        run on the event loop every session shares, and one frame may hold minutes (an
        OpenAI ``append`` of 15 MiB is 230 s): taken whole, it held every other session and
        ``/healthz`` for 0.4 s, and it went past the stream's pace and backlog limit."""
        if self.decode_failed:
            return  # ending: the session has let its audio go
        n = max(1, int(self.params.sample_rate * FEED_SLICE_S))
        x, rest = (x[:n], x[n:]) if len(x) > n else (x, None)
        self.metrics.audio_in.inc(len(x) / self.params.sample_rate)
        self.taken_s += len(x) / self.params.sample_rate
        if self.pace is not None:
            self.pace.took(len(x) / self.params.sample_rate, time.monotonic())
        self.session.feed_audio(self.resampler.process(x))
        self.on_vad(self.vad.take())
        self.wake.set()
        # (not the arrival alone: a client sending 1 s frames in real time is silent for 1 s
        # between them, and each finalize went short while its speech was still coming; a
        # longer frame counts as its last slice, at most FEED_SLICE_S)
        self._audio_until = time.monotonic() + len(x) / self.params.sample_rate
        self._unfed = rest  # (only once this slice went in: a failure leaves nothing behind)

    async def _feed_rest(self) -> None:
        """What :meth:`feed` left of a long frame, a slice at a time, with other sessions'
        work, the pace and the backlog limit between slices, as between frames. A frame
        already read is taken whole even while the server stops (``_room`` returns then),
        unless the stream was cut short: its speaker sends again what was not made final."""
        while self._unfed is not None and not self.cut:
            rest, self._unfed = self._unfed, None
            await asyncio.sleep(0)
            await self._room()
            self.feed(rest)
        self._unfed = None

    def finalize(self) -> None:
        """Everything heard so far becomes final (the session goes on)."""
        if not self.decode_failed:
            self.session.finalize()
            self._publish(self.session.events())  # (its answer, if nothing was left to decode)
            self.wake.set()

    def on_vad(self, marks: list[SpeechStart | SpeechEnd]) -> None:
        """Utterance starts and ends as the VAD finds them (our protocol does not send them)."""

    def _too_many_errors(self) -> bool:
        now = time.monotonic()
        self._errors.append(now)
        while self._errors and now - self._errors[0] > 10.0:
            self._errors.popleft()
        return len(self._errors) > self.config.max_errors

    # -- decoding --------------------------------------------------------------------------
    async def _decode_all(self) -> None:
        """Ask the engine for whatever the session has due, until it is flushed and input is
        over. Decoding that keeps failing ends the session (``decode_failed``, close 1011); what
        was final stays in the transcript."""
        failures = 0
        while True:
            # (finals can come from input alone: an early end decode the VAD confirmed)
            self._publish(self.session.events())
            req = self.session.next_decode(busy=self.engine.busy)
            if req is None:
                if self.phase.input_over and self.session.flushed:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            self.decoding = True
            try:
                result = await self.engine.decode(req)
            except Exception:  # noqa: BLE001 - the engine logged it; the audio is kept
                self.decoding = False
                failures += 1
                self.session.failed(req.id)
                if failures >= MAX_DECODE_FAILURES:
                    self._give_up()
                    return
                self.send(wire.Error("decode_failed", "decoding failed; retrying"))
                await asyncio.sleep(0.2 * failures)
                continue
            self.decoding = False
            failures = 0
            self.session.decoded(req.id, result)
            self.progress.set()
            self._publish(self.session.events())

    def _give_up(self) -> None:
        log.error("session=%s event=decode_gave_up", self.sid)
        self.decode_failed = True
        self.session.abandon()
        self.send(wire.Error("decode_failed", "decoding keeps failing; the session ends here "
                             "and its transcript so far is kept"))
        self.shutdown("decode_failed")

    def _publish(self, events: list[wire.Message]) -> None:
        heard = self.session.audio_seconds
        for ev in events:
            if isinstance(ev, wire.Final):
                self.metrics.final_lag.observe(max(0.0, heard - ev.end))
            elif isinstance(ev, wire.Partial) and ev.text:
                self.metrics.partial_lag.observe(max(0.0, heard - ev.end))
            if not (isinstance(ev, wire.Language) and self.session.task == "translate"):
                self.hub.publish(self.transcript, ev)  # (a translation's captions: English)
            self.send(ev)

    def tell_viewers_language(self) -> None:
        """Viewers learn the captions' language, which the page and the overlay mark the text
        with (a stable overlay URL carries none): the language asked for, the model's only
        one, English for a translation; a detected one comes as the session's ``language``
        event (:meth:`_publish`). Only viewers: a speaker gets ``language`` for detection."""
        s = self.session
        lang = "en" if s.task == "translate" else s.language
        if lang in (None, "auto") and len(self.engine.languages) == 1:
            lang = self.engine.languages[0]
        if lang in (None, "auto"):
            return
        # (from here on: a realtime ``session.update`` may change it mid-stream)
        self.hub.publish(self.transcript, wire.Language(lang, 1.0, s.audio_seconds,
                                                        caption_script(lang, s.zh_script)))

    # -- output ----------------------------------------------------------------------------
    async def _status(self) -> None:
        while True:
            await asyncio.sleep(self.config.status_interval_s)
            lag = self.session.lag
            self.metrics.lag.observe(lag)
            self.send(wire.Status(self.session.audio_seconds, lag, self.session.backlog))

    def send(self, msg: wire.Message) -> None:
        if isinstance(msg, wire.Error):
            self.metrics.errors.labels(msg.code).inc()
        self.outbox.put(on_connection_clock(msg, self.conn_start))
        if self.outbox.dropped and not self.stop_reading.is_set():
            log.warning("session=%s event=slow_consumer", self.sid)
            self.shutdown("slow_consumer")

    def encode(self, msg: Any) -> list[str]:
        """The text frames one outgoing event becomes (none, for events a dialect lacks)."""
        return [wire.encode(msg)]

    async def _write(self, ws: WebSocket, outbox: Outbox) -> None:
        """Write one connection's outbox to its socket (a rejoined one has its own)."""
        while (msg := await outbox.next()) is not None:
            if not self.phase.writes or ws is not self.ws:
                continue
            try:
                for text in self.encode(msg):
                    await asyncio.wait_for(ws.send_text(text), self.config.send_timeout_s)
            except asyncio.TimeoutError:
                if ws is not self.ws:
                    continue  # (it went meanwhile, and its speaker came back on another)
                # its socket is full and stays full: stop writing, finish the transcript
                log.warning("session=%s event=slow_consumer", self.sid)
                self._detach()
                self.outbox.drop()
                self.shutdown("slow_consumer")
            except Exception:  # noqa: BLE001 - a gone peer; keep decoding for the transcript
                if ws is self.ws:
                    self._detach()
