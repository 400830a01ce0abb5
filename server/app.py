"""The ASGI app: routes, and the thin WebSocket layer that feeds sessions and writes events.

Everything here parses, routes and writes; the streaming policy lives in :mod:`.session` and
the model in :mod:`.engine`. The same app runs under uvicorn (``whisperwire serve``), any other
ASGI server, or a Ray Serve deployment.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from . import subtitles, wire
from .audio import Resampler, pcm_to_float
from .auth import AuthConfig, token_from
from .engine import Engine, EngineOptions
from .errors import ClientError, close_code_for
from .hub import Hub, Outbox, Transcript
from .metrics import Metrics
from .pool import WorkerPool
from .session import StreamOptions, StreamSession
from .vad import VadOptions, VadSegmenter, webrtc_classifier

__all__ = ["ServerConfig", "create_app"]

log = logging.getLogger("whisperwire.server")


@dataclass(frozen=True)
class ServerConfig:
    engine: EngineOptions = field(default_factory=EngineOptions)
    stream: StreamOptions = field(default_factory=StreamOptions)
    vad: VadOptions = field(default_factory=VadOptions)
    auth: AuthConfig = field(default_factory=AuthConfig)
    max_sessions: int = 64  # live speaking sessions; more are refused (1013), not queued
    max_viewers: int = 100  # per session
    max_message_bytes: int = 1 << 20  # 1 MiB: over 10 s of 48 kHz float32
    idle_timeout_s: float = 60.0  # no message at all for this long ends a session
    max_session_s: float = 4 * 3600.0
    transcript_retention_s: float = 3600.0
    allowed_origins: tuple[str, ...] = ()  # browsers' Origin header; empty: any
    status_interval_s: float = 1.0
    max_errors: int = 20  # client errors within 10 s before the session is closed (1008)
    max_pending_messages: int = 2000  # to a client that does not read, before it is dropped
    send_timeout_s: float = 10.0  # one message that long unsent: the client is not reading
    web_dir: Path | None = None


def default_web_dir() -> Path | None:
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "web", here.parent.parent / "web"):
        if (cand / "index.html").is_file():
            return cand
    return None


class ListenConnection:
    """One speaker's WebSocket: binary audio and JSON control in, caption events out."""

    def __init__(self, ws: WebSocket, params: wire.ListenParams, engine: Engine, hub: Hub,
                 transcript: Transcript, config: ServerConfig, metrics: Metrics) -> None:
        self.ws, self.params, self.engine, self.hub = ws, params, engine, hub
        self.metrics = metrics
        self.transcript = transcript
        self.config = config
        self.sid = transcript.session
        self.session = StreamSession(
            config.stream,
            VadSegmenter(config.vad, webrtc_classifier(config.vad.aggressiveness)),
            language=params.language,
            task=params.task,
            prompt=params.prompt,
            name=transcript.session,
        )
        self.resampler = Resampler(params.sample_rate)
        self.wake = asyncio.Event()
        self.stop_reading = asyncio.Event()
        self.stop_reason = "server_shutdown"
        self.outbox = Outbox(config.max_pending_messages)
        self.closing = False
        self.connected = True
        self._errors: deque[float] = deque()

    def shutdown(self, reason: str = "server_shutdown") -> None:
        """Stop taking audio and finish like a ``close``: the last words still come."""
        self.stop_reason = reason
        self.stop_reading.set()

    async def run(self) -> None:
        log.info("session=%s event=open sample_rate=%d encoding=%s language=%s", self.sid,
                 self.params.sample_rate, self.params.encoding, self.params.language)
        self.send(wire.Ready(self.sid, self.engine.model_name, self.engine.device,
                             self.engine.compute_type, self.params.sample_rate))
        writer = asyncio.create_task(self._write())
        pump = asyncio.create_task(self._pump())
        ticker = asyncio.create_task(self._status())
        reason = "disconnected"
        try:
            reason = await self._read()
        finally:
            # every end of stream flushes: the last words become finals
            self.session.feed_audio(self.resampler.flush())
            self.session.finalize()
            self.closing = True
            self.wake.set()
            try:
                await pump
            finally:
                ticker.cancel()
                closed = wire.Closed(reason, self.session.audio_seconds)
                self.hub.publish(self.transcript, closed)
                self.hub.end(self.transcript)
                self.send(closed)
                await writer
                if self.connected:
                    try:
                        await asyncio.wait_for(self.ws.close(1000), self.config.send_timeout_s)
                    except Exception:  # noqa: BLE001 - the peer may be gone already
                        pass
                log.info("session=%s event=closed reason=%s audio_s=%.1f finals=%d", self.sid,
                         reason, self.session.audio_seconds, len(self.transcript.finals))

    async def _receive(self) -> dict | str:
        """The next ASGI message, or a reason string when the session must end without one."""
        started = time.monotonic()
        recv = asyncio.ensure_future(self.ws.receive())
        stop = asyncio.ensure_future(self.stop_reading.wait())
        left = self.config.max_session_s - (started - self._t0)
        timeout = min(self.config.idle_timeout_s, max(0.0, left))
        try:
            done, _ = await asyncio.wait({recv, stop}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if recv in done:
            return recv.result()
        recv.cancel()
        if stop in done:
            return self.stop_reason
        if left <= self.config.idle_timeout_s:
            self.send(wire.Error("max_duration", "the session reached its maximum duration"))
            return "max_duration"
        self.send(wire.Error("idle_timeout",
                             f"no message for {self.config.idle_timeout_s:.0f} s; closing"))
        return "idle_timeout"

    async def _read(self) -> str:
        self._t0 = time.monotonic()
        bps = self.params.bytes_per_sample
        while True:
            try:
                msg = await self._receive()
            except (WebSocketDisconnect, RuntimeError):
                self.connected = False
                return "disconnected"
            if isinstance(msg, str):
                return msg
            if msg["type"] == "websocket.disconnect":
                self.connected = False
                return "disconnected"
            if self.outbox.dropped:
                return "slow_consumer"
            data, text = msg.get("bytes"), msg.get("text")
            try:
                if data is not None:
                    if len(data) > self.config.max_message_bytes:
                        raise ClientError("message_too_large",
                                          f"audio frames are limited to {self.config.max_message_bytes} bytes")
                    if len(data) % bps:
                        raise ClientError("bad_audio",
                                          f"{self.params.encoding} frames must be a multiple of {bps} bytes")
                    x = pcm_to_float(data, self.params.encoding)
                    self.metrics.audio_in.inc(len(x) / self.params.sample_rate)
                    self.session.feed_audio(self.resampler.process(x))
                    self.wake.set()
                elif text is not None:
                    if len(text) > 4096:
                        raise ClientError("message_too_large", "control messages are limited to 4 KiB")
                    m = wire.decode(text, allowed=wire.CLIENT_MESSAGES)
                    if isinstance(m, wire.Close):
                        return "client_close"
                    self.session.finalize()
                    self.wake.set()
            except ClientError as exc:
                log.info("session=%s event=client_error code=%s", self.sid, exc.code)
                self.send(wire.Error(exc.code, exc.message))
                if self._too_many_errors():
                    self.send(wire.Error("too_many_errors", "too many bad messages; closing"))
                    return "too_many_errors"

    def _too_many_errors(self) -> bool:
        now = time.monotonic()
        self._errors.append(now)
        while self._errors and now - self._errors[0] > 10.0:
            self._errors.popleft()
        return len(self._errors) > self.config.max_errors

    async def _pump(self) -> None:
        """Ask the engine for whatever the session has due, until it is flushed and closing."""
        failures = 0
        while True:
            req = self.session.next_decode()
            if req is None:
                if self.closing and self.session.flushed:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            try:
                result = await self.engine.decode(req)
            except Exception:  # noqa: BLE001 - the engine logged it; the audio is kept
                failures += 1
                self.session.failed(req.id)
                self.send(wire.Error("decode_failed", "decoding failed; retrying"))
                if failures >= 3:
                    log.error("session=%s event=decode_gave_up", self.sid)
                    self.session.abandon()
                    return
                await asyncio.sleep(0.2 * failures)
                continue
            failures = 0
            self.session.decoded(req.id, result)
            heard = self.session.audio_seconds
            for ev in self.session.events():
                if isinstance(ev, wire.Final):
                    self.metrics.final_lag.observe(max(0.0, heard - ev.end))
                elif isinstance(ev, wire.Partial) and ev.text:
                    self.metrics.partial_lag.observe(max(0.0, heard - ev.end))
                self.hub.publish(self.transcript, ev)
                self.send(ev)

    async def _status(self) -> None:
        while True:
            await asyncio.sleep(self.config.status_interval_s)
            lag = self.session.lag
            self.metrics.lag.observe(lag)
            self.send(wire.Status(self.session.audio_seconds, lag))

    def send(self, msg: wire.Message) -> None:
        if isinstance(msg, wire.Error):
            self.metrics.errors.labels(msg.code).inc()
        self.outbox.put(msg)
        if self.outbox.dropped and not self.stop_reading.is_set():
            log.warning("session=%s event=slow_consumer", self.sid)
            self.shutdown("slow_consumer")

    async def _write(self) -> None:
        while (msg := await self.outbox.next()) is not None:
            if not self.connected:
                continue
            try:
                await asyncio.wait_for(self.ws.send_text(wire.encode(msg)),
                                       self.config.send_timeout_s)
            except asyncio.TimeoutError:
                # its socket is full and stays full: stop writing, finish the transcript
                log.warning("session=%s event=slow_consumer", self.sid)
                self.connected = False
                self.outbox.drop()
                self.shutdown("slow_consumer")
            except Exception:  # noqa: BLE001 - a gone peer; keep decoding for the transcript
                self.connected = False


async def _refuse(ws: WebSocket, exc: ClientError) -> None:
    await ws.send_text(wire.encode(wire.Error(exc.code, exc.message)))
    await ws.close(close_code_for(exc.code), exc.message[:120])


def create_app(config: ServerConfig | None = None, engine: Engine | WorkerPool | None = None
               ) -> Starlette:
    """The ASGI app. The engine is loaded at startup unless a loaded one is passed in."""
    config = config or ServerConfig()
    engine = engine or Engine(config.engine)
    hub = Hub(config.transcript_retention_s, config.max_viewers)
    metrics = Metrics(engine, lambda: hub.live_count, lambda: hub.viewer_count)
    live: set[ListenConnection] = set()
    draining = asyncio.Event()

    def check_origin(conn: HTTPConnection) -> None:
        origin = conn.headers.get("origin")
        if config.allowed_origins and origin is not None and origin not in config.allowed_origins:
            raise ClientError("forbidden_origin", "this origin may not connect")

    async def listen(ws: WebSocket) -> None:
        await ws.accept()
        try:
            check_origin(ws)
            if not config.auth.can_speak(token_from(ws.headers, ws.query_params)):
                raise ClientError("unauthorized", "a valid speak token is required")
            if draining.is_set():
                raise ClientError("shutting_down", "the server is shutting down")
            if not engine.loaded:
                raise ClientError("not_ready", "the model is still loading")
            if hub.live_count >= config.max_sessions:
                raise ClientError("server_full", f"all {config.max_sessions} sessions are in use")
            params = wire.ListenParams.from_query(ws.query_params)
            if params.language not in (None, "auto") and params.language not in engine.languages:
                raise ClientError("bad_language", f"model {engine.model_name} does not know "
                                  f"language {params.language!r}")
            transcript = hub.open(params.session)
        except ClientError as exc:
            metrics.errors.labels(exc.code).inc()
            await _refuse(ws, exc)
            return
        conn = ListenConnection(ws, params, engine, hub, transcript, config, metrics)
        live.add(conn)
        try:
            await conn.run()
        finally:
            live.discard(conn)
            release = getattr(engine, "release", None)
            if release is not None:
                release(transcript.session)

    async def events(ws: WebSocket) -> None:
        """A viewer: the finals so far, then the speaker's partials and finals live, then
        ``closed``."""
        await ws.accept()
        sid = ws.path_params["session"]
        try:
            check_origin(ws)
            if not config.auth.can_view(token_from(ws.headers, ws.query_params)):
                raise ClientError("unauthorized", "a valid view token is required")
            viewer = hub.watch(sid)
        except ClientError as exc:
            await _refuse(ws, exc)
            return

        async def drain_client() -> None:
            # viewers say nothing; reading tells us when they hang up
            try:
                while (await ws.receive())["type"] != "websocket.disconnect":
                    pass
            except Exception:  # noqa: BLE001
                pass
            viewer.drop()

        reader = asyncio.create_task(drain_client())
        try:
            while (msg := await viewer.next()) is not None:
                await ws.send_text(wire.encode(msg))
            if not viewer.dropped:
                await ws.close(1000)
        except Exception:  # noqa: BLE001 - a gone viewer
            pass
        finally:
            hub.unwatch(sid, viewer)
            reader.cancel()

    async def transcript(request: Request) -> Response:
        if not config.auth.can_view(token_from(request.headers, request.query_params)):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        sid, fmt = request.path_params["session"], request.path_params["fmt"]
        t = hub.get(sid)
        if t is None:
            return JSONResponse({"error": "unknown_session"}, status_code=404)
        finals = list(t.finals)
        disp = {"Content-Disposition": f'inline; filename="{sid}.{fmt}"'}
        if fmt == "srt":
            return PlainTextResponse(subtitles.to_srt(finals), media_type="application/x-subrip",
                                     headers=disp)
        if fmt == "vtt":
            return PlainTextResponse(subtitles.to_vtt(finals), media_type="text/vtt", headers=disp)
        if fmt == "txt":
            return PlainTextResponse(subtitles.to_txt(finals), headers=disp)
        if fmt == "json":
            return Response(subtitles.to_json(sid, finals, t.live), media_type="application/json")
        return JSONResponse({"error": "unknown_format", "formats": ["srt", "vtt", "txt", "json"]},
                            status_code=404)

    async def metrics_page(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> JSONResponse:
        ok = engine.loaded and not draining.is_set()
        return JSONResponse({"ready": ok, "model": engine.model_name, "device": engine.device,
                             "compute_type": engine.compute_type}, status_code=200 if ok else 503)

    async def drain(timeout: float = 60.0) -> None:
        """Stop taking sessions; finalise every open one (its speaker gets the last finals and
        ``closed``) and wait for them, up to ``timeout`` seconds."""
        draining.set()
        conns = list(live)
        for c in conns:
            c.shutdown("server_shutdown")
        deadline = time.monotonic() + timeout
        while live and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        log.info("event=drained sessions=%d left=%d", len(conns), len(live))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not engine.loaded:
            await asyncio.to_thread(engine.load)
        await engine.start()
        try:
            yield
        finally:
            await drain()
            await engine.stop()

    routes: list = [
        WebSocketRoute("/v1/listen", listen),
        WebSocketRoute("/v1/sessions/{session}/events", events),
        Route("/v1/sessions/{session}/transcript.{fmt}", transcript),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_page),
    ]
    web = config.web_dir or default_web_dir()
    if web is not None:
        overlay = str(web / "overlay.html")

        async def overlay_page(request: Request) -> FileResponse:
            return FileResponse(overlay)

        routes.append(Route("/overlay", overlay_page))
        routes.append(Mount("/", StaticFiles(directory=str(web), html=True), name="web"))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.engine = engine
    app.state.hub = hub
    app.state.metrics = metrics
    app.state.drain = drain
    app.state.live = live
    return app
