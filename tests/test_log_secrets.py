"""No token, view token or audio in a log line, at any level: tokens with quotes or ";" in
them (the token file takes any character but whitespace), a token hidden behind an encoded
"?", and websockets' debug lines of the frames a session sends and receives."""

from __future__ import annotations

import json
import logging
import socket
import sys
import time

import httpx
import pytest
from conftest import run
from whisperwire.server.logs import RedactTokens, redact

TOKENS = {"quote": "Q'uoteSECRETAA", "semi": "semi;colonSECRETBB", "dquote": 'dq"quoteSECRETCC',
          "plain": "SPEAKSECRET123"}
VIEW = "VIEWSECRET456"


@pytest.mark.parametrize("line", [
    "GET /v1/sessions/a/transcript.txt?token=Q'uoteSECRETAA HTTP/1.1",
    'GET /v1/sessions/a/transcript.txt?token=dq"quoteSECRETCC HTTP/1.1',
    "/v1/sessions/a/transcript.txt?token=Q'uoteSECRETAA",  # (the access line's path argument)
    "/overlay?session=a&token=dq\"quote'SECRETCC&x=1",
    "/x?token=semi;colonSECRETBB",
    "/x?tok%65n=Q'uoteSECRETAA",
    "/x?a=1&api_key=Q'uoteSECRETAA&b=2",
    "/x?token=hash#SECRETDD",
    # a token behind an encoded separator: refused by the server, still the user's secret
    "/v1/sessions/a/transcript.txt?x=1%3Ftoken=SPEAKSECRET123",
    "/x?x=1%26token=SPEAKSECRET123",
    "/x?x=1%3Ftoken%3DSPEAKSECRET123",
    "/x?x=1%253Ftoken%253DSPEAKSECRET123",
    "{'type': 'websocket', 'query_string': b'token=Q\\'uoteSECRETAA'}",
])
def test_a_token_is_redacted_whatever_its_characters(line):
    out = redact(line)
    assert "SECRET" not in out and "***" in out


@pytest.mark.parametrize("line, expected", [
    ('"WebSocket /v1/listen?token=SECRET" [accepted]', '"WebSocket /v1/listen?token=***" [accepted]'),
    ("GET /x?a=1&token=SECRET&b=2 HTTP/1.1", "GET /x?a=1&token=***&b=2 HTTP/1.1"),
    ("GET /x?x=1%3Ftoken=SECRET&b=2", "GET /x?x=***&b=2"),
])
def test_the_rest_of_the_line_stays(line, expected):
    assert redact(line) == expected


def _logged(msg: str, *args: object, name: str = "uvicorn.error") -> str:
    record = logging.LogRecord(name, logging.DEBUG, __file__, 1, msg, args, None)
    RedactTokens().filter(record)
    return record.getMessage()


def test_a_ready_frame_never_shows_its_view_token():
    from websockets.frames import Frame, Opcode

    view_token = "k9OaDsC7XBhWE3ecWzyo0eAB"
    ready = json.dumps({"type": "ready", "session": "vt", "model": "tiny.en",
                        "view_token": view_token}, separators=(",", ":"))
    out = _logged("> %s", Frame(Opcode.TEXT, ready.encode()))
    assert view_token[-12:] not in out and view_token[:12] not in out
    assert out.startswith("> TEXT '{\"type\":\"ready\"") and f"[{len(ready)} bytes]" in out


def test_audio_frames_say_their_length_only():
    from websockets.frames import Frame, Opcode

    out = _logged("< %s", Frame(Opcode.BINARY, b"\x01\x02" * 1600))
    assert out == "< BINARY [3200 bytes]"
    assert _logged("< %s", Frame(Opcode.CONT, b"\x01\x02", fin=False)) == \
        "< CONT [2 bytes, continued]"
    audio = json.dumps({"type": "input_audio_buffer.append", "audio": "QUJD" * 100})
    out = _logged("< %s", Frame(Opcode.TEXT, audio.encode()))
    assert "QUJD" not in out and "[400 chars]" in out


def test_other_frames_keep_their_debug_lines():
    from websockets.frames import Frame, Opcode

    assert _logged("< %s", Frame(Opcode.TEXT, b'{"type":"finalize"}')) == \
        "< TEXT '{\"type\":\"finalize\"}' [19 bytes]"
    assert "1000 (OK) bye" in _logged("> %s", Frame(Opcode.CLOSE, b"\x03\xe8bye"))
    token = json.dumps({"type": "x", "token": 'dq"quoteSECRETCC', "b": "c"})
    assert "SECRET" not in _logged("< %s", Frame(Opcode.TEXT, token.encode()))


def test_an_asgi_scope_at_trace_level_hides_its_query_string():
    scope = {"type": "websocket", "path": "/v1/listen", "query_string": b"token=Q'uoteSECRETAA"}
    out = _logged("%s [%d] Started scope=%s", "127.0.0.1:5", 1, scope, name="uvicorn.asgi")
    assert "SECRET" not in out and "Started scope={'type': 'websocket'" in out


@pytest.mark.parametrize("scope", [
    # an ops engineer's finding at --log-level trace: the subprotocol list, and a query whose
    # parameter name is percent-encoded (the server reads both as the token)
    {"type": "websocket", "subprotocols": ["token", "SPEAKSECRET123"]},
    {"type": "websocket", "subprotocols": ["bearer", "SPEAKSECRET123"]},
    {"type": "websocket", "query_string": b"tok%65n=SPEAKSECRET123"},
    {"type": "websocket", "query_string": b"%74ok%65n=SPEAKSECRET123&x=1"},
    {"type": "websocket", "query_string": b"a=1&api_key=SPEAKSECRET123"},
])
def test_a_trace_line_of_a_scope_hides_every_spelling_of_the_token(scope):
    out = _logged("%s [%d] Started scope=%s", "127.0.0.1:5", 1, scope, name="uvicorn.asgi")
    assert "SECRET" not in out and "Started scope={'type': 'websocket'" in out, out


# --- ``whisperwire serve --log-level debug`` as users run it


# (test_served.py's: ``whisperwire serve`` on a free port, its output in a log file)
from test_served import _serve  # noqa: E402


def _raw_get(port: int, target: str, upgrade: bool = False) -> bytes:
    """The status line for a GET of ``target`` sent as it is (quotes unencoded)."""
    ws = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
          "Sec-WebSocket-Key: MDEyMzQ1Njc4OWFiY2RlZg==\r\n") if upgrade else "Connection: close\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(10)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{ws}\r\n".encode())
        return s.recv(65536).split(b"\r\n", 1)[0]


async def _speak(port: int, token: str) -> str:
    """A short session of silence with ``token``; its view token."""
    from urllib.parse import quote

    import websockets

    async with websockets.connect(f"ws://127.0.0.1:{port}/v1/listen?session=vt&token="
                                  + quote(token, safe="")) as ws:
        ready = json.loads(await ws.recv())
        for _ in range(5):
            await ws.send(bytes(3200))
        await ws.send(json.dumps({"type": "close"}))
        async for _ in ws:
            pass
    return ready["view_token"]


@pytest.mark.timeout(180)
def test_a_debug_log_holds_no_token_view_token_or_audio(tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("".join(f"speak {t}\n" for t in TOKENS.values()) + f"view {VIEW}\n")
    log = tmp_path / "server.log"
    with _serve(log, "--token-file", str(tokens), "--log-level", "debug") as port:
        view_token = run(_speak(port, TOKENS["quote"]))
        base = "/v1/sessions/vt/transcript.txt"
        assert _raw_get(port, f"{base}?token={TOKENS['dquote']}").endswith(b"200 OK")
        assert _raw_get(port, f"{base}?token={TOKENS['quote']}").endswith(b"200 OK")
        assert _raw_get(port, f"{base}?x=1%3Ftoken={TOKENS['plain']}").endswith(b"401 Unauthorized")
        assert b"101" in _raw_get(port, f"/v1/sessions/vt/events?token={TOKENS['semi']}", True)
        assert httpx.get(f"http://127.0.0.1:{port}{base}",
                         params={"token": view_token}).status_code == 200
        time.sleep(0.5)
    text = log.read_text()
    assert "SECRET" not in text and view_token not in text
    assert "BINARY 00 00" not in text, "audio is never logged"
    assert "< BINARY [3200 bytes]" in text and '> TEXT \'{"type":"ready"' in text
    assert f"{base}?token=*** HTTP/1.1" in text


def test_a_traceback_quoting_the_request_is_redacted():
    try:
        raise ValueError("invalid HTTP header line: Cookie x /v1/listen?token=Q'uoteSECRETAA")
    except ValueError:
        record = logging.LogRecord("uvicorn.error", logging.DEBUG, __file__, 1,
                                   "! no valid HTTP request", (), sys.exc_info())
    RedactTokens().filter(record)
    out = logging.Formatter().format(record)
    assert "SECRET" not in out and "invalid HTTP header line" in out
