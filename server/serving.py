"""Running the app under uvicorn the way ``whisperwire serve`` does.

Three things uvicorn does not do on its own: finish every open session before the sockets close
on SIGTERM; let go of connections that never finish their request headers (uvicorn only times
out idle keep-alive connections *after* a first response, so a silent or slowloris socket is
kept for ever), or their TLS handshake (60 s otherwise); and read frames a little past the app's own limit so the app can answer them
with ``message_too_large`` instead of the transport cutting them off with 1009. And one thing
it does that the server declines: permessage-deflate (``ServerConfig.ws_deflate``). All of it
is read from the app's :class:`~.app.ServerConfig`, so tests and ``serve`` behave the same.

And a WebSocket upgrade the websockets library will not take (a request line or header over its
line limit, too many headers, a request it cannot read) is answered and closed: uvicorn's
sans-I/O protocol neither sent websockets' 414/431 nor closed, so the client waited for ever
and the server kept the socket (:func:`answered_upgrades`). The line limit is raised to fit
the longest query string the README allows (:data:`UPGRADE_LINE_BYTES`).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

__all__ = ["UPGRADE_LINE_BYTES", "answered_upgrades", "graceful_server", "handshake_deadline"]

# The longest request line or header line a WebSocket upgrade may have. The README allows a
# prompt (or Deepgram's keyterms) of 1000 characters: percent-encoded UTF-8 that is up to 12 KB
# (9 KB in Chinese), and the token and other parameters come with it; websockets' default, 8 KiB,
# refused a 1000-character Chinese prompt. Raising it costs no memory the server would not spend
# anyway: uvicorn's HTTP parser has read the whole request before websockets parses it again.
UPGRADE_LINE_BYTES = 16 * 1024

# The answer to an upgrade that websockets could not read at all (it only ends the stream)
_BAD_BODY = b"Failed to open a WebSocket connection: invalid HTTP request.\n"
_BAD_UPGRADE = (b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; "
                b"charset=utf-8\r\nContent-Length: %d\r\n\r\n%s" % (len(_BAD_BODY), _BAD_BODY))


def handshake_deadline(http: Any, timeout: float) -> Any:
    """uvicorn's HTTP protocol (a class, or a name such as ``"auto"``), made to close a
    connection whose request headers are not complete ``timeout`` seconds after it connected
    (or after its last response). A WebSocket upgrade hands the connection on and ends the
    deadline. Protocols without the h11/httptools shape are returned unchanged."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    base = import_from_string(HTTP_PROTOCOLS.get(http, http)) if isinstance(http, str) else http
    if not all(hasattr(base, m) for m in ("handle_websocket_upgrade", "on_response_complete")):
        return http

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout, self._expire, self.cycle)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self, cycle: Any) -> None:
            self._deadline = None
            idle = self.cycle is cycle and (cycle is None or cycle.response_complete)
            if idle and not self.transport.is_closing():
                self.transport.close()  # no request began in time: idle, or headers trickling

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def handle_websocket_upgrade(self, *args: Any) -> None:
            super().handle_websocket_upgrade(*args)
            if _handshake_started(self.transport.get_protocol()):
                self._disarm()
            # else the deadline stays: an upgrade that nobody answered is let go at it

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    HeaderDeadline.__name__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


def _handshake_started(ws_protocol: Any) -> bool:
    """Whether the WebSocket protocol took the upgrade on (it answers from now on). uvicorn's
    sans-I/O protocol says so at once; others, which shake hands later, are taken at their
    word, as before."""
    return bool(getattr(ws_protocol, "handshake_initiated", True))


def answered_upgrades(ws: Any) -> Any:
    """uvicorn's WebSocket protocol (a class, or a name such as ``"websockets-sansio"``), made to
    send the answer websockets wrote for an upgrade it refused, and close. uvicorn's sans-I/O
    protocol only looks for a parsed request: when websockets refused one (414 for a long
    request line, 431 for a long header or over 128 of them) or could not read it, its answer
    stayed unsent and the socket open, for ever (the header deadline had ended at the upgrade).
    Other protocols are returned unchanged."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    base = _ws_class(ws)
    if not (isinstance(base, type) and issubclass(base, WebSocketsSansIOProtocol)):
        return ws
    _fit_upgrade_lines()

    class AnsweredUpgrade(base):  # type: ignore[misc, valid-type]
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self.handshake_initiated and self.conn.handshake_exc is not None:
                self._refuse()

        def _refuse(self) -> None:
            # websockets' own answer (414, 431), or a 400 where it only ended the stream
            answer = b"".join(self.conn.data_to_send())
            self.handshake_complete = self.close_sent = True  # (as uvicorn after a refusal)
            self.transport.write(answer or _BAD_UPGRADE)
            self.transport.close()

    AnsweredUpgrade.__name__ = f"Answered{base.__name__}"
    return AnsweredUpgrade


def _ws_class(ws: Any) -> Any:
    """The class uvicorn will use for ``ws``; None for "none" or one it cannot import (uvicorn
    says why itself, as it loads its config)."""
    from uvicorn.config import WS_PROTOCOLS
    from uvicorn.importer import ImportFromStringError, import_from_string

    if not isinstance(ws, str):
        return ws
    try:
        return import_from_string(WS_PROTOCOLS.get(ws, ws) or "")
    except (ImportError, ImportFromStringError):
        return None


def _fit_upgrade_lines() -> None:
    """websockets' line limit raised to :data:`UPGRADE_LINE_BYTES`, never lowered (its
    ``WEBSOCKETS_MAX_LINE_LENGTH`` may say more). It has no per-connection setting: this is the
    module value that variable sets, read as each line is parsed."""
    from websockets import http11

    http11.MAX_LINE_LENGTH = max(http11.MAX_LINE_LENGTH, UPGRADE_LINE_BYTES)


class RawSend:
    """ASGI middleware that keeps the ASGI server's own ``send`` in the scope of a WebSocket
    (Starlette wraps it), for :func:`pong_deadline`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            scope = {**scope, "whisperwire.raw_send": send}
        await self.app(scope, receive, send)


def pong_deadline(ws: Any, seconds: float) -> bool:
    """Make the server's keepalive pings close this connection (1011) when its pong is
    ``seconds`` late. ASGI cannot ask that of one connection, but uvicorn's sans-I/O websockets
    protocol reads its ``ping_timeout`` at every ping. For viewers, which send nothing, so a
    missing pong means the peer is gone (a frozen or unplugged viewer was otherwise held until
    its channel expired, an hour later). Elsewhere (Ray Serve's proxy) it does nothing."""
    proto = getattr(ws.scope.get("whisperwire.raw_send"), "__self__", None)
    if seconds <= 0 or not hasattr(proto, "ping_timeout") \
            or getattr(proto, "ping_interval", None) is None:
        return False
    proto.ping_timeout = seconds
    return True


def graceful_server(app: Any, **kw: Any) -> Any:
    """A uvicorn server for ``app`` that, on SIGTERM/SIGINT, stops accepting and finalises
    every open session (each speaker gets its last finals and ``closed``) before uvicorn closes
    the sockets; with the app's handshake timeout and frame limit unless ``kw`` says otherwise.

    Keepalive pings are sent (proxies see traffic on a quiet viewer's socket) but a missing
    pong never closes the connection: while a session's backlog is full the app stops reading
    the socket (``max_backlog_s``), so the client's pong waits behind its own audio, and
    uvicorn's 20 s ping timeout failed the connection (1011) and lost all the held speech. A
    dead speaker is found by the session's idle timeout (and ``send_timeout_s``); a dead viewer
    on a quiet channel by its own pong deadline (:func:`pong_deadline`)."""
    import uvicorn

    from .logs import install_redaction

    kw.setdefault("ws_ping_timeout", None)
    config = getattr(app.state, "config", None)
    limit = config.handshake_timeout_s if config is not None else 0.0
    if config is not None:
        kw.setdefault("ws_max_size", config.max_frame_bytes)
        kw.setdefault("ws_per_message_deflate", config.ws_deflate)
        if config.handshake_timeout_s > 0:
            kw["http"] = handshake_deadline(kw.get("http", "auto"), config.handshake_timeout_s)
    kw["ws"] = answered_upgrades(kw.get("ws", "auto"))

    class GracefulServer(uvicorn.Server):
        async def startup(self, sockets=None):  # type: ignore[no-untyped-def]
            """With TLS, the handshake timeout covers the TLS handshake too: the header
            deadline starts once it is done, and uvicorn gives it the event loop's own 60 s
            (a client that connected and never said hello held its socket for a minute)."""
            loop = asyncio.get_running_loop()
            if self.config.ssl is None or limit <= 0:
                return await super().startup(sockets)
            loop.create_server = functools.partial(loop.create_server,  # type: ignore[method-assign]
                                                   ssl_handshake_timeout=limit)
            try:
                return await super().startup(sockets)
            finally:
                del loop.create_server  # (the loop's own method again)

        async def shutdown(self, sockets=None):  # type: ignore[no-untyped-def]
            for server in self.servers:
                server.close()
            drain = getattr(app.state, "drain", None)
            if drain is not None:  # (a second Ctrl-C, uvicorn's force_exit, cuts it short)
                await drain(hurry=lambda: self.force_exit)
            await super().shutdown(sockets)
            if self.force_exit:
                # uvicorn skips the app's shutdown then, and its lifespan task was cancelled
                # at exit with a CancelledError traceback: end it as after one Ctrl-C
                await self.lifespan.shutdown()

    server = GracefulServer(uvicorn.Config(app, **kw))
    install_redaction()  # uvicorn.Config set up its loggers; filters on them survive that
    return server
