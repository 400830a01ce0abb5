"""``whisperwire serve`` as users run it (a subprocess, its own uvicorn settings): tokens stay out
of its log, oversized frames get an answer, slow or silent connections are let go, and startup
mistakes are sentences, not tracebacks."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import time

import httpx
import pytest
from conftest import load16k, run, s16
from viewing import speak, view
from whisperwire.server import wire

pytestmark = pytest.mark.e2e

TOKEN = "T0k3n-s3cret-xyz"
HANDSHAKE_S = 1.0



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(log, *args: str, scheme: str = "http"):  # type: ignore[no-untyped-def]
    """``whisperwire serve`` on a free port with ``args``, its output in ``log``: the port, once
    it is ready; stopped after."""
    port = _free_port()
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "whisperwire.server", "serve", "--port",
                                 str(port), *args], stdout=f, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"serve exited: {log.read_text()}")
            try:
                if httpx.get(f"{scheme}://127.0.0.1:{port}/readyz",
                             verify=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("served") / "server.log"
    with _serve(log, "--token", TOKEN, "--log-level", "debug", "--handshake-timeout",
                str(HANDSHAKE_S)) as port:
        yield port, log


def _still_open(socks: list, seconds: float, poke=None) -> int:  # type: ignore[no-untyped-def]
    """How many of ``socks`` the server has not closed after ``seconds``; ``poke(sock)`` is
    called every 0.2 s on each still open."""
    open_ = {s.fileno(): s for s in socks}
    deadline = time.monotonic() + seconds
    while open_ and time.monotonic() < deadline:
        for s in list(open_.values()) if poke else ():
            try:
                poke(s)
            except OSError:
                pass
        readable, _, _ = select.select(list(open_.values()), [], [], 0.2)
        for s in readable:
            try:
                if s.recv(65536) == b"":
                    del open_[s.fileno()]
            except OSError:
                del open_[s.fileno()]
    return len(open_)


@pytest.mark.timeout(120)
def test_the_token_never_reaches_the_log(served):
    port, log = served
    url, http = f"ws://127.0.0.1:{port}", f"http://127.0.0.1:{port}"
    msgs, code = run(speak(url, s16(load16k("LJ001-0002.wav")), session="bar", token=TOKEN))
    assert code == 1000 and any(isinstance(m, wire.Final) for m in msgs)
    seen, _ = run(view(url, "bar", token=TOKEN))
    assert any(isinstance(m, wire.Final) for m in seen)
    r = httpx.get(f"{http}/v1/sessions/bar/transcript.srt", params={"token": TOKEN})
    assert r.status_code == 200 and "modern" in r.text
    assert httpx.get(f"{http}/v1/sessions/bar/transcript.txt?session=x&token={TOKEN}&a=b"
                     ).status_code == 200
    assert httpx.get(f"{http}/v1/sessions/bar/transcript.txt?token=wrong-one").status_code == 401
    view_token = msgs[0].view_token
    assert httpx.get(f"{http}/v1/sessions/bar/transcript.txt",
                     params={"token": view_token}).status_code == 200
    time.sleep(0.5)
    text = log.read_text()
    assert "/v1/listen" in text and "transcript.srt" in text, "the lines are there, redacted"
    assert TOKEN not in text and "wrong-one" not in text and view_token not in text


@pytest.mark.timeout(60)
def test_frames_over_the_limit_get_message_too_large(served):
    import websockets

    port, _ = served

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{port}/v1/listen",
                                      additional_headers={"Authorization": f"Bearer {TOKEN}"},
                                      max_size=None) as ws:
            await ws.recv()
            await ws.send(b"\x00" * ((1 << 20) + 2048))
            await ws.send("x" * 10_000_000)
            await ws.send(b"\x00\x00" * 1600)
            await ws.send(json.dumps({"type": "close"}))
            return [wire.decode(m) async for m in ws], ws.close_code

    msgs, code = run(go())
    assert [m.code for m in msgs if isinstance(m, wire.Error)] == ["message_too_large"] * 2
    assert isinstance(msgs[-1], wire.Closed) and code == 1000


@pytest.mark.timeout(60)
def test_silent_and_slowloris_connections_are_closed(served):
    port, _ = served
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    upgrade = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
    for s in slow:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    for s in upgrade:
        s.sendall(b"GET /v1/listen HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
    trickling = {s.fileno() for s in slow + upgrade}

    def poke(s) -> None:  # type: ignore[no-untyped-def]
        if s.fileno() in trickling:  # one header line every 0.2 s: never finished
            s.sendall(b"X-Slow: 1\r\n")

    try:
        left = _still_open(silent + slow + upgrade, HANDSHAKE_S + 4.0, poke)
        assert not left, f"{left} of 25 connections still open"
    finally:
        for s in silent + slow + upgrade:
            s.close()
    # the server still serves
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200


@pytest.mark.timeout(120)
def test_a_tls_handshake_that_never_finishes_is_let_go_at_the_handshake_timeout(tmp_path):
    """With TLS the header deadline starts only once the TLS handshake is done, and uvicorn
    gives the handshake Python's own 60 s: a client that connects and never says hello (or
    stops halfway) held its socket for a minute whatever ``--handshake-timeout`` said."""
    import ssl

    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True)
    with _serve(tmp_path / "server.log", "--tls-cert", str(crt), "--tls-key", str(key),
                "--handshake-timeout", str(HANDSHAKE_S), scheme="https") as port:
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        halfway = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        try:
            for s in halfway:  # a TLS record header that promises more than ever comes
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            left = _still_open(silent + halfway, HANDSHAKE_S + 5.0)
            assert not left, f"{left} of 10 connections still open"
        finally:
            for s in silent + halfway:
                s.close()
        # a client that does finish its handshake is served
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert tls.recv(65536).startswith(b"HTTP/1.1 200")


def _cli(*args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "whisperwire.server", *args],
                          check=False, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_a_missing_model_directory_is_named():
    r = _cli("serve", "--model", "/tmp/no-such-model-dir-ww", "--port", str(_free_port()))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "no such directory" in r.stderr and "/tmp/no-such-model-dir-ww" in r.stderr


def test_a_model_that_cannot_be_downloaded_says_how_to_get_it(tmp_path):
    r = _cli("serve", "--model", "small", "--port", str(_free_port()),
             env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)})
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "download" in r.stderr and "--model DIR" in r.stderr, r.stderr


@pytest.mark.parametrize("content, says", [
    ("view\n", "line 1"), ("speak TOKEN\nspeak\n", "line 2"), ("speak  \n", "line 1"),
])
def test_a_bad_token_file_stops_the_server_with_the_line(tmp_path, content, says):
    tf = tmp_path / "tokens"
    tf.write_text(content)
    r = _cli("serve", "--token-file", str(tf), "--port", str(_free_port()))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert says in r.stderr and "token" in r.stderr


def test_an_empty_token_is_refused():
    r = _cli("serve", "--token", "", "--port", str(_free_port()))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "empty" in r.stderr


@pytest.mark.parametrize("cmd, shows", [
    ("serve", ["(default: 8765)", "(default: 127.0.0.1)", "(default: embedded)",
               "(default: 60.0)", "(default: 64)"]),
    ("stream", ["(default: ws://127.0.0.1:8765)", "(default: 1.0)"]),
    ("captions", ["(default: ws://127.0.0.1:8765)"]),
    ("doctor", ["(default: embedded)"]),
])
def test_help_shows_defaults(cmd, shows):
    r = _cli(cmd, "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for s in shows:
        assert s in text, (cmd, s)

