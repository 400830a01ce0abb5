"""WebSocket upgrades over websockets' limits get an answer and a closed socket; the longest
query string the README allows (a 1000-character prompt, in Chinese too) fits.

uvicorn's sans-I/O WebSocket protocol never sent the 414/431 websockets wrote for a request line
or header over 8 KiB (or over 128 headers), and never closed: the client waited for ever and
the server kept every such socket, past its own handshake timeout."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

import pytest
from conftest import run
from whisperwire.server import wire

UPGRADE = ("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: MDEyMzQ1Njc4OWFiY2RlZg==\r\n"
           "Sec-WebSocket-Version: 13\r\n{extra}\r\n")


def _upgrade(port: int, target: str, extra: str = "", wait: float = 5.0) -> bytes | None:
    """What the server sent for this upgrade before it closed; None if it had not closed
    within ``wait`` seconds (less than the 10 s handshake timeout: a close must be an answer)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(wait)
        s.sendall(UPGRADE.format(target=target, extra=extra).encode())
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except TimeoutError:
            return None
        return data


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target, extra, status", [
    ("/v1/listen?token=SECRET&prompt=" + "a" * 20_000, "", b"414"),
    ("/v1/listen", "Cookie: " + "c" * 17_000 + "\r\n", b"431"),
    ("/v1/listen", "".join(f"X-H{i}: v\r\n" for i in range(130)), b"431"),
])
def test_an_upgrade_over_the_limits_is_answered_and_closed(live_server, target, extra, status):
    answer = _upgrade(live_server.port, target, extra)
    assert answer is not None, "no answer and the socket still open"
    assert answer.startswith(b"HTTP/1.1 " + status) and b"SECRET" not in answer


@pytest.mark.timeout(60)
@pytest.mark.parametrize("extra", ["Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n"])
def test_an_upgrade_websockets_cannot_read_gets_a_400(live_server, extra):
    """websockets refuses a handshake with a body without writing an answer, only an end of
    stream: the server says 400 itself."""
    answer = _upgrade(live_server.port, "/v1/listen", extra)
    assert answer is not None, "no answer and the socket still open"
    assert answer.startswith(b"HTTP/1.1 400") and b"WebSocket" in answer


@pytest.mark.timeout(60)
def test_many_refused_upgrades_leave_no_socket_open(live_server):
    socks = [socket.create_connection(("127.0.0.1", live_server.port)) for _ in range(20)]
    try:
        for s in socks:
            s.sendall(UPGRADE.format(target="/v1/listen?prompt=" + "a" * 20_000, extra="").encode())
        for s in socks:
            s.settimeout(5)
            assert s.recv(65536).startswith(b"HTTP/1.1 414")
            assert s.recv(65536) == b"", "the server closed it"
    finally:
        for s in socks:
            s.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("char", ["中", "\U00020000"])  # 9 and 12 bytes a character, encoded
def test_a_1000_character_prompt_fits_in_the_upgrade(live_server, char):
    import websockets

    async def go():
        url = f"{live_server.url}/v1/listen?sample_rate=48000&prompt="
        async with websockets.connect(url + char * 1000 + "&token=" + "t" * 64,
                                      open_timeout=8) as ws:
            return wire.decode(await ws.recv())

    assert isinstance(run(go()), wire.Ready)


@contextlib.contextmanager
def _serving(app, **kw):  # type: ignore[no-untyped-def]
    """``graceful_server(app, **kw)`` on a free port of 127.0.0.1, in a thread: the port."""
    from whisperwire.server.serving import graceful_server

    server = graceful_server(app, host="127.0.0.1", port=0, log_level="warning",
                             lifespan="on", **kw)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _deaf_protocol():  # type: ignore[no-untyped-def]
    """uvicorn's sans-I/O WebSocket protocol that never reads the upgrade it is handed: one
    that neither takes the request nor refuses it."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    class Deaf(WebSocketsSansIOProtocol):
        def data_received(self, data: bytes) -> None:
            pass

    return Deaf


@pytest.mark.timeout(60)
def test_an_upgrade_nobody_answers_is_let_go_at_the_handshake_timeout(engine):
    """The header deadline ended at every upgrade, answered or not: whatever the WebSocket side
    did not take on was kept for ever."""
    from whisperwire.server.app import ServerConfig, create_app

    app = create_app(ServerConfig(handshake_timeout_s=1.0), engine)
    with _serving(app, ws=_deaf_protocol()) as port:
        started = time.monotonic()
        assert _upgrade(port, "/v1/listen", wait=6.0) == b"", "closed, without an answer"
        assert time.monotonic() - started < 4.0


def test_the_line_limit_fits_the_readme_and_is_never_lowered(monkeypatch):
    from websockets import http11
    from whisperwire.server.serving import UPGRADE_LINE_BYTES, answered_upgrades

    monkeypatch.setattr(http11, "MAX_LINE_LENGTH", 8192)
    answered_upgrades("websockets-sansio")
    assert http11.MAX_LINE_LENGTH == UPGRADE_LINE_BYTES >= len("%F0%A0%80%80") * 1000 + 2048
    monkeypatch.setattr(http11, "MAX_LINE_LENGTH", 65536)  # WEBSOCKETS_MAX_LINE_LENGTH said so
    answered_upgrades("websockets-sansio")
    assert http11.MAX_LINE_LENGTH == 65536
    assert answered_upgrades(asyncio.Protocol) is asyncio.Protocol, "others as they are"
