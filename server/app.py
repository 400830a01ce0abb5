"""The ASGI app: routes, and the thin WebSocket layer that feeds sessions and writes events.

Everything here parses, routes and writes; the streaming policy lives in :mod:`.session` and
the model in :mod:`.engine`. The same app runs under uvicorn (``whisperwire serve``), any other
ASGI server, or a Ray Serve deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from . import dialects, subtitles, wire
from .auth import AuthConfig, token_from
from .engine import Engine, EngineOptions
from .errors import ClientError, close_code_for
from .hub import Hub, Outbox, Transcript
from .listen import ListenConnection
from .logs import install_redaction
from .metrics import Metrics
from .pool import WorkerPool
from .serving import RawSend, pong_deadline
from .session import StreamOptions
from .vad import VadOptions

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
    max_message_bytes: int = 1 << 20  # 1 MiB: 5.5 s of 48 kHz float32, 32 s of 16 kHz s16
    # Frames up to this size are read and refused with ``message_too_large``; larger ones the
    # WebSocket layer cuts off with close 1009 (``whisperwire serve`` sets uvicorn's ws_max_size)
    max_frame_bytes: int = 16 << 20
    # permessage-deflate on WebSockets (``whisperwire serve`` sets uvicorn's; Ray Serve's proxy
    # keeps its own, on): off, because uvicorn inflates every message one socket read holds,
    # read ahead or not: a client sending deflated 14 MiB appends of silence (14 KB each on
    # the wire) had ~18 inflated in one read, 0.55 s of the loop every session shares, for a
    # session that takes one per 2.3 s (bench.flood). PCM barely compresses anyway
    ws_deflate: bool = False
    # A connection has this long to send its request headers (a WebSocket: its upgrade) after
    # connecting; idle and slowloris connections are closed (``whisperwire serve`` only)
    handshake_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0  # no message at all for this long ends a session
    # a ``finalize`` that waits for audio (``min_final_ms``) stops waiting once no audio came
    # for this long: the client stopped sending (push-to-talk, a muted mic, a file's end)
    finalize_grace_s: float = 0.5
    # a speaker's socket that died (not closed) leaves its stream open this long, undecided,
    # for the client to come back to its session on a new one (listen.py); 0: end at once
    rejoin_grace_s: float = 10.0
    # ... an OpenAI realtime one: push-to-talk clients send nothing between turns
    realtime_idle_timeout_s: float = 900.0
    max_session_s: float = 4 * 3600.0
    transcript_retention_s: float = 3600.0
    allowed_origins: tuple[str, ...] = ()  # browsers' Origin header; empty: any
    status_interval_s: float = 1.0
    max_errors: int = 20  # client errors within 10 s: then too_many_errors, closed (1000)
    max_pending_messages: int = 2000  # to a client that does not read, before it is dropped
    # speech a session may hold undecoded (about 18 MiB) before the server stops reading its
    # socket: enough that files and reconnect backlogs of a few minutes never meet it, since a
    # client held back by TCP finds its keepalive pings stuck behind its own audio
    max_backlog_s: float = 300.0
    # a live stream is read at most this many times faster than real time, after a burst of
    # ``stream_burst_s`` (pace.py): silence sent flat out costs no decode, only the loop's
    # time, which every other session shares; 0: no limit. File requests are not paced
    max_stream_speed: float = 100.0
    stream_burst_s: float = 60.0
    # on SIGTERM, open sessions get this long to decode their last words; then the rest is
    # cut short (listen.py ``cut_short``). Under an orchestrator, a little less than its stop
    # grace (Kubernetes 30 s, docker stop 10 s), so that the cut, not SIGKILL, ends them
    drain_timeout_s: float = 60.0
    send_timeout_s: float = 10.0  # one message that long unsent: the client is not reading
    # a viewer that answers the server's keepalive ping (uvicorn's, every 20 s) this late is
    # gone (its connection died silently: a laptop asleep, a frozen process) and is dropped,
    # freeing its ``max_viewers`` slot; 0: never. Speakers have no such deadline (serving.py)
    viewer_pong_timeout_s: float = 20.0
    web_dir: Path | None = None


def default_web_dir() -> Path | None:
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "web", here.parent.parent / "web"):
        if (cand / "index.html").is_file():
            return cand
    return None



async def _refuse(ws: WebSocket, exc: ClientError, api: str, accepted: bool = False) -> None:
    """Accept only to say why not: browsers cannot read a refused handshake's status, so the
    reason travels as an ``error`` event, then the close code. Logged: uvicorn says
    "connection open" for it as for a session (a page waiting for its speaker's session asks
    every 3 s: that one at debug)."""
    log.log(logging.DEBUG if exc.code == "unknown_session" else logging.INFO,
            "event=refused api=%s code=%s message=%r", api, exc.code, exc.message)
    if not accepted:
        await ws.accept()
    await ws.send_text(wire.encode(wire.Error(exc.code, exc.message)))
    await ws.close(close_code_for(exc.code), exc.message[:120])


class WhisperWire:
    """The server's parts (engine, channels, metrics) and its endpoints. Every check on a
    WebSocket runs before it is accepted; one that fails is refused with an ``error``."""

    def __init__(self, config: ServerConfig, engine: Engine | WorkerPool,
                 hub: Hub | None = None) -> None:
        self.config, self.engine = config, engine
        # one process: the in-process Hub; a cluster passes its own (ray_serve.py)
        self.hub = hub if hub is not None else Hub(config.transcript_retention_s,
                                                   config.max_viewers)
        self.metrics = Metrics(engine, lambda: self.hub.live_count,
                               lambda: self.hub.viewer_count)
        self.live: set[ListenConnection] = set()
        self.draining = asyncio.Event()
        self._drain: asyncio.Future | None = None  # the one drain, once it began
        self.hub.on_lost = self.lose_session

    def lose_session(self, sid: str) -> None:
        """The cluster's directory ended this replica's claim on ``sid`` (it stalled past its
        lease): the speaker's finals no longer reach the channel, so the speaker is ended with
        ``closed(replica_lost)`` and close code 1012, and reconnects (the page does) to a
        replica that holds the channel."""
        for c in list(self.live):
            if c.sid == sid:
                c.shutdown("replica_lost")

    # -- admission ---------------------------------------------------------------------------
    def unready(self) -> str | None:
        """Why decodes cannot be served now (for ``/readyz`` and refusals), or None."""
        if self.draining.is_set():
            return "the server is shutting down"
        health = getattr(self.engine, "health", None)
        if health is not None:
            return health()
        return None if self.engine.loaded else "the model is still loading"

    def check_origin(self, conn: HTTPConnection) -> None:
        origin = conn.headers.get("origin")
        allowed = self.config.allowed_origins
        if allowed and origin is not None and origin not in allowed:
            raise ClientError("forbidden_origin", "this origin may not connect")

    def admit_speaker(self, ws: WebSocket) -> tuple[wire.ListenParams, Transcript]:
        """The speaker's parameters and its channel, or ClientError saying why not."""
        self.check_origin(ws)
        token = token_from(ws.headers, ws.query_params)
        return self.admit(token, lambda: wire.ListenParams.from_query(ws.query_params))

    def may_speak(self, token: str | None) -> None:
        """A speaker's token, and a server that serves: ClientError saying why not."""
        if not self.config.auth.can_speak(token):
            raise ClientError("unauthorized", "a valid speak token is required")
        if self.draining.is_set():
            raise ClientError("shutting_down", "the server is shutting down")
        problem = self.unready()
        if problem is not None:
            raise ClientError("not_ready", problem)

    def admit(self, token: str | None, parse: Callable[[], wire.ListenParams]
              ) -> tuple[wire.ListenParams, Transcript]:
        """Any API's speaker: its token, then room, then its parameters (``parse`` raises
        ClientError for bad ones); the channel it opens, or ClientError saying why not."""
        self.may_speak(token)
        params = parse()
        # (a live id is taken, whatever room there is: "server_full, try again later" said to a
        # second speaker under a live id on a full server sent it to wait for nothing)
        self.hub.may_open(params.session)
        if self.hub.live_count >= self.config.max_sessions:
            raise ClientError("server_full",
                              f"all {self.config.max_sessions} sessions are in use")
        langs = self.engine.languages
        if params.language not in (None, "auto") and params.language not in langs:
            try:
                from faster_whisper.tokenizer import _LANGUAGE_CODES as WHISPER_LANGUAGES
            except ImportError:  # (faster-whisper's private list: without it, no such hint)
                WHISPER_LANGUAGES = (params.language,)
            known = (f"no Whisper model knows it (this one knows {', '.join(langs)})"
                     if params.language not in WHISPER_LANGUAGES
                     else f"it is English-only; a multilingual model (whisperwire serve --model "
                     f"base) knows {params.language!r}" if tuple(langs) == ("en",)
                     else f"it knows {', '.join(langs)}")
            raise ClientError("bad_language", f"model {self.engine.model_name} does not know "
                              f"language {params.language!r}; {known}")
        if params.task == "translate" and len(langs) <= 1:
            raise ClientError("bad_task", f"model {self.engine.model_name} is English-only: it "
                              "transcribes, it does not translate")
        return params, self.hub.open(params.session)

    def admit_viewer(self, conn: HTTPConnection) -> str:
        """The channel id a viewer or download asks for, once it may see it."""
        sid = conn.path_params["session"]
        if not wire.valid_session_id(sid):
            raise ClientError("bad_session", wire.BAD_SESSION)
        if not self.config.auth.can_view(token_from(conn.headers, conn.query_params), sid):
            raise ClientError("unauthorized", "a valid view token is required")
        return sid

    # -- WebSockets --------------------------------------------------------------------------
    async def listen(self, ws: WebSocket) -> None:
        back = self.dropped_speaker(ws)
        if back is not None:
            await ws.accept()
            try:
                await back.rejoin(ws)
            except ClientError as exc:  # it stopped waiting meanwhile (its grace ran out)
                self.metrics.errors.labels(exc.code).inc()
                await _refuse(ws, exc, "listen", accepted=True)
            return
        try:
            params, transcript = self.admit_speaker(ws)
        except ClientError as exc:
            self.metrics.errors.labels(exc.code).inc()
            await _refuse(ws, exc, "listen")
            return
        await ws.accept()
        await self.speak(ListenConnection(ws, params, self.engine, self.hub, transcript,
                                          self.config, self.metrics))

    def dropped_speaker(self, ws: WebSocket) -> ListenConnection | None:
        """The stream a speaker's socket goes on: its session's, dropped and waiting for it,
        asked for with the same parameters and a speak token; or None (then it is admitted,
        or refused, as any speaker). Before the room check: a full server takes it back."""
        sid = ws.query_params.get("session")
        waiting = [c for c in self.live if sid and c.sid == sid and c.waiting]
        if not waiting:
            return None
        try:
            self.check_origin(ws)
            self.may_speak(token_from(ws.headers, ws.query_params))
            params = wire.ListenParams.from_query(ws.query_params)
        except ClientError:
            return None  # (admitting it says why not)
        return next((c for c in waiting if c.same_stream(params)), None)

    async def speak(self, conn: ListenConnection) -> None:
        """Run an accepted speaker of any API as one of the live sessions (drained at
        shutdown), until its last words are final."""
        self.live.add(conn)
        try:
            await conn.run()
        finally:
            self.live.discard(conn)
            release = getattr(self.engine, "release", None)
            if release is not None:
                release(conn.sid)

    async def events(self, ws: WebSocket) -> None:
        """A viewer follows a channel: its finals so far, then each speaker's events live,
        ``closed`` when a speaker ends; the socket stays open until the channel expires (1000)
        or the server shuts down (1001)."""
        try:
            self.check_origin(ws)
            sid = self.admit_viewer(ws)
            viewer = self.hub.watch(sid)
        except ClientError as exc:
            if exc.code != "unknown_session":  # (a page or overlay waiting for its speaker
                self.metrics.errors.labels(exc.code).inc()  # asks every 3 s: no error)
            await _refuse(ws, exc, "events")
            return
        await ws.accept()
        pong_deadline(ws, self.config.viewer_pong_timeout_s)
        reader = asyncio.create_task(_hang_up(ws, viewer))
        try:
            with contextlib.suppress(Exception):  # a gone viewer (or one that stopped reading)
                while (msg := await viewer.next()) is not None:
                    await asyncio.wait_for(ws.send_text(wire.encode(msg)),
                                           self.config.send_timeout_s)
                if not viewer.dropped:
                    await ws.close(1001 if self.draining.is_set() else 1000)
        finally:
            self.hub.unwatch(sid, viewer)
            reader.cancel()

    # -- HTTP --------------------------------------------------------------------------------
    async def transcript(self, request: Request) -> Response:
        try:
            sid = self.admit_viewer(request)
        except ClientError as exc:
            status = 401 if exc.code == "unauthorized" else 400
            return JSONResponse({"error": exc.code, "message": exc.message}, status_code=status)
        fmt = request.path_params["fmt"]
        t = self.hub.get(sid)
        if t is None:
            return JSONResponse({"error": "unknown_session"}, status_code=404)
        finals = subtitles.at_turns(list(t.finals), t.turns)
        disp = {"Content-Disposition": f'inline; filename="{sid}.{fmt}"'}  # an ASCII id
        # (a cue kept up 5/6 s stays within the audio, once the channel has ended: while a
        # speaker is live, ``audio_seconds`` is where its connection began)
        end = t.audio_seconds if not t.live and t.audio_seconds else None
        if fmt == "srt":
            return PlainTextResponse(subtitles.to_srt(finals, audio_end=end),
                                     media_type="application/x-subrip", headers=disp)
        if fmt == "vtt":
            return PlainTextResponse(subtitles.to_vtt(finals, audio_end=end), media_type="text/vtt",
                                     headers=disp)
        if fmt == "txt":
            return PlainTextResponse(subtitles.to_txt(finals), headers=disp)
        if fmt == "json":
            # offset: where the live (or next) speaker's connection begins on the channel's clock
            # (the ended speakers' audio: a speaker starts there); instance: this channel's
            # life on the server (a restarted server has a new one). A speaker that reconnects
            # needs both (client/speaker.py).
            return Response(subtitles.to_json(
                sid, list(t.finals), t.live, t.turns, instance=t.instance,
                offset=round(t.audio_seconds, 3)),
                            media_type="application/json")
        return JSONResponse({"error": "unknown_format", "formats": ["srt", "vtt", "txt", "json"]},
                            status_code=404)

    async def metrics_page(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def healthz(self, request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def readyz(self, request: Request) -> JSONResponse:
        problem = self.unready()
        body = {"ready": problem is None, "model": self.engine.model_name,
                "device": self.engine.device, "compute_type": self.engine.compute_type,
                "decode_workers": self.engine.workers}
        if problem is not None:
            body["reason"] = problem
        return JSONResponse(body, status_code=200 if problem is None else 503)

    # -- life --------------------------------------------------------------------------------
    async def drain(self, timeout: float | None = None,
                    hurry: Callable[[], bool] = lambda: False) -> None:
        """Stop taking sessions; finalise every open one (its speaker gets the last finals and
        ``closed``) and wait for them, up to ``timeout`` seconds (``drain_timeout_s``), or
        until ``hurry()`` (a second Ctrl-C); cut short those still decoding then (a backlog of
        speech sent faster than real time); then let the viewers go. Once: a later call (the
        lifespan's end drains too, for servers other than ours) waits for that one to end,
        and the engine stops only after it."""
        if self._drain is None:
            self._drain = asyncio.ensure_future(self._drain_once(timeout, hurry))
        await asyncio.shield(self._drain)

    async def _drain_once(self, timeout: float | None, hurry: Callable[[], bool]) -> None:
        self.draining.set()
        conns = list(self.live)
        timeout = self.config.drain_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while self.live and time.monotonic() < deadline and not hurry():
            for c in list(self.live):  # (also one admitted just before the drain began)
                if not c.whole_input:  # (a file is read to its end, and decoded if in time)
                    c.shutdown("server_shutdown")
            await asyncio.sleep(0.05)
        cut = list(self.live)
        for c in cut:
            c.cut_short()
        deadline = time.monotonic() + 5.0
        while self.live and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.hub.finish_viewers()
        deadline = time.monotonic() + min(5.0, timeout)
        while self.hub.viewer_count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        log.info("event=drained sessions=%d cut_short=%d left=%d", len(conns), len(cut),
                 len(self.live))

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        if not self.engine.loaded:
            await asyncio.to_thread(self.engine.load)
        await self.engine.start()
        try:
            yield
        finally:
            await self.drain()
            await self.engine.stop()

    def routes(self, web: Path | None) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            WebSocketRoute("/v1/listen", self.listen),
            WebSocketRoute("/v1/sessions/{session}/events", self.events),
            Route("/v1/sessions/{session}/transcript.{fmt}", self.transcript),
            Route("/healthz", self.healthz),
            Route("/readyz", self.readyz),
            Route("/metrics", self.metrics_page),
            *dialects.routes(self),  # Deepgram and OpenAI on the same sessions
        ]
        if web is not None:
            overlay = str(web / "overlay.html")

            async def overlay_page(request: Request) -> FileResponse:
                return FileResponse(overlay)

            routes.append(Route("/overlay", overlay_page))
            routes.append(Mount("/", StaticFiles(directory=str(web), html=True), name="web"))
        return routes


async def _hang_up(ws: WebSocket, viewer: Outbox) -> None:
    """Viewers say nothing; reading tells us when they hang up."""
    with contextlib.suppress(Exception):
        while (await ws.receive())["type"] != "websocket.disconnect":
            pass
    viewer.drop()


def create_app(config: ServerConfig | None = None, engine: Engine | WorkerPool | None = None,
               hub: Hub | None = None) -> Starlette:
    """The ASGI app. The engine is loaded at startup unless a loaded one is passed in; ``hub``
    replaces the in-process channels (a cluster's, in :mod:`.ray_serve`)."""
    install_redaction()  # whatever ASGI server runs us, its request lines lose their tokens
    config = config or ServerConfig()
    server = WhisperWire(config, engine or Engine(config.engine), hub)
    app = Starlette(routes=server.routes(config.web_dir or default_web_dir()),
                    lifespan=server.lifespan, middleware=[Middleware(RawSend)])
    app.state.config = config
    app.state.server = server
    app.state.engine = server.engine
    app.state.hub = server.hub
    app.state.metrics = server.metrics
    app.state.drain = server.drain
    app.state.live = server.live
    return app
