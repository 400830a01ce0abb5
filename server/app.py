"""The ASGI app: routes, and the thin WebSocket layer that feeds sessions and writes events.

Everything here parses, routes and writes; the streaming policy lives in :mod:`.session` and
the model in :mod:`.engine`. The same app runs under uvicorn (``whisperwire serve``), any other
ASGI server, or a Ray Serve deployment.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from . import subtitles, wire
from .audio import Resampler, pcm_to_float
from .engine import Engine, EngineOptions
from .errors import ClientError, close_code_for
from .hub import Hub, Transcript
from .session import StreamOptions, StreamSession
from .vad import VadOptions, VadSegmenter, webrtc_classifier

__all__ = ["ServerConfig", "create_app"]

log = logging.getLogger("whisperwire.server")


@dataclass(frozen=True)
class ServerConfig:
    engine: EngineOptions = field(default_factory=EngineOptions)
    stream: StreamOptions = field(default_factory=StreamOptions)
    vad: VadOptions = field(default_factory=VadOptions)
    max_message_bytes: int = 1 << 20  # 1 MiB: over 10 s of 48 kHz float32
    transcript_retention_s: float = 3600.0
    max_viewers: int = 100
    web_dir: Path | None = None


def default_web_dir() -> Path | None:
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "web", here.parent.parent / "web", here / "web"):
        if (cand / "index.html").is_file():
            return cand
    return None


class ListenConnection:
    """One speaker's WebSocket: binary audio and JSON control in, caption events out."""

    def __init__(self, ws: WebSocket, params: wire.ListenParams, engine: Engine, hub: Hub,
                 transcript: Transcript, config: ServerConfig) -> None:
        self.ws, self.params, self.engine, self.hub = ws, params, engine, hub
        self.transcript = transcript
        self.config = config
        self.sid = transcript.session
        self.session = StreamSession(
            config.stream,
            VadSegmenter(config.vad, webrtc_classifier(config.vad.aggressiveness)),
            language=params.language,
            task=params.task,
            prompt=params.prompt,
        )
        self.resampler = Resampler(params.sample_rate)
        self.wake = asyncio.Event()
        self.outbox: asyncio.Queue[wire.Message | None] = asyncio.Queue()
        self.closing = False
        self.connected = True

    async def run(self) -> None:
        self.send(wire.Ready(self.sid, self.engine.model_name, self.engine.device,
                             self.engine.compute_type, self.params.sample_rate))
        writer = asyncio.create_task(self._write())
        pump = asyncio.create_task(self._pump())
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
                closed = wire.Closed(reason, self.session.audio_seconds)
                self.hub.publish(self.transcript, closed)
                self.hub.end(self.transcript)
                self.send(closed)
                self.outbox.put_nowait(None)
                await writer
                if self.connected:
                    try:
                        await self.ws.close(1000)
                    except Exception:  # noqa: BLE001 - the peer may be gone already
                        pass
                log.info("session %s closed (%s, %.1fs audio)", self.sid, reason,
                         self.session.audio_seconds)

    async def _read(self) -> str:
        bps = self.params.bytes_per_sample
        while True:
            try:
                msg = await self.ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                self.connected = False
                return "disconnected"
            if msg["type"] == "websocket.disconnect":
                self.connected = False
                return "disconnected"
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
                    self.session.feed_audio(self.resampler.process(x))
                    self.wake.set()
                elif text is not None:
                    m = wire.decode(text, allowed=wire.CLIENT_MESSAGES)
                    if isinstance(m, wire.Close):
                        return "client_close"
                    self.session.finalize()
                    self.wake.set()
            except ClientError as exc:
                log.info("session %s: client error %s: %s", self.sid, exc.code, exc.message)
                self.send(wire.Error(exc.code, exc.message))

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
                    self.send(wire.Error("decode_failed", "decoding keeps failing; closing"))
                    self.session.abandon()
                    return
                await asyncio.sleep(0.2 * failures)
                continue
            failures = 0
            self.session.decoded(req.id, result)
            for ev in self.session.events():
                self.hub.publish(self.transcript, ev)
                self.send(ev)

    def send(self, msg: wire.Message) -> None:
        self.outbox.put_nowait(msg)

    async def _write(self) -> None:
        while True:
            msg = await self.outbox.get()
            if msg is None:
                return
            if not self.connected:
                continue
            try:
                await self.ws.send_text(wire.encode(msg))
            except Exception:  # noqa: BLE001 - a gone peer; keep decoding for the transcript
                self.connected = False


def create_app(config: ServerConfig | None = None, engine: Engine | None = None) -> Starlette:
    """The ASGI app. The engine is loaded at startup unless a loaded one is passed in."""
    config = config or ServerConfig()
    engine = engine or Engine(config.engine)
    hub = Hub(config.transcript_retention_s, config.max_viewers)

    async def listen(ws: WebSocket) -> None:
        await ws.accept()
        try:
            params = wire.ListenParams.from_query(ws.query_params)
            if params.language not in (None, "auto") and params.language not in engine.languages:
                raise ClientError("bad_language", f"model {engine.model_name} does not know "
                                  f"language {params.language!r}")
            transcript = hub.open(params.session)
        except ClientError as exc:
            await ws.send_text(wire.encode(wire.Error(exc.code, exc.message)))
            await ws.close(close_code_for(exc.code), exc.message[:120])
            return
        if not engine.loaded:
            await ws.send_text(wire.encode(wire.Error("not_ready", "the model is still loading")))
            await ws.close(1013)
            return
        await ListenConnection(ws, params, engine, hub, transcript, config).run()

    async def events(ws: WebSocket) -> None:
        """A viewer: the finals so far, then the speaker's partials and finals live, then
        ``closed``."""
        await ws.accept()
        sid = ws.path_params["session"]
        try:
            viewer = hub.watch(sid)
        except ClientError as exc:
            await ws.send_text(wire.encode(wire.Error(exc.code, exc.message)))
            await ws.close(close_code_for(exc.code))
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
        sid, fmt = request.path_params["session"], request.path_params["fmt"]
        t = hub.get(sid)
        if t is None:
            return JSONResponse({"error": "unknown_session"}, status_code=404)
        finals = list(t.finals)
        name = f"{sid}.{fmt}"
        disp = {"Content-Disposition": f'inline; filename="{name}"'}
        if fmt == "srt":
            return PlainTextResponse(subtitles.to_srt(finals), media_type="application/x-subrip", headers=disp)
        if fmt == "vtt":
            return PlainTextResponse(subtitles.to_vtt(finals), media_type="text/vtt", headers=disp)
        if fmt == "txt":
            return PlainTextResponse(subtitles.to_txt(finals), headers=disp)
        if fmt == "json":
            return Response(subtitles.to_json(sid, finals, t.live), media_type="application/json")
        return JSONResponse({"error": "unknown_format", "formats": ["srt", "vtt", "txt", "json"]},
                            status_code=404)

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> JSONResponse:
        ok = engine.loaded
        return JSONResponse({"ready": ok, "model": engine.model_name, "device": engine.device,
                             "compute_type": engine.compute_type}, status_code=200 if ok else 503)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        if not engine.loaded:
            await asyncio.to_thread(engine.load)
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    routes: list = [
        WebSocketRoute("/v1/listen", listen),
        WebSocketRoute("/v1/sessions/{session}/events", events),
        Route("/v1/sessions/{session}/transcript.{fmt}", transcript),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
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
    return app
