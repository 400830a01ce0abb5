"""Limits, admission, auth and slow consumers, each on a real server configured for it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx
import pytest
from conftest import LiveServer, load16k, read_all, run, s16, wav_bytes
from viewing import view
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.auth import load_token_file

pytestmark = pytest.mark.e2e



async def first_and_close(url: str, headers=None):
    import websockets

    async with websockets.connect(url, additional_headers=headers or {}) as ws:
        return await read_all(ws), ws.close_code


def test_max_sessions_refuses_clearly(engine):
    with LiveServer(ServerConfig(max_sessions=1), engine) as srv:
        import websockets

        async def go():
            async with websockets.connect(srv.url + "/v1/listen") as first:
                await first.recv()
                return await first_and_close(srv.url + "/v1/listen")

        msgs, code = run(go())
        assert msgs[0].code == "server_full" and code == 1013

        async def same_id():  # (told "server_full, try again later", it waited for nothing)
            for _ in range(100):  # (once the speaker above has finished: it is live till then)
                if srv.app.state.hub.live_count == 0:
                    break
                await asyncio.sleep(0.1)
            async with websockets.connect(srv.url + "/v1/listen?session=full-id") as first:
                assert isinstance(wire.decode(await first.recv()), wire.Ready)
                return await first_and_close(srv.url + "/v1/listen?session=full-id")

        msgs, _ = run(same_id())
        assert msgs[0].code == "session_taken", msgs


def test_idle_timeout_and_max_duration(engine):
    with LiveServer(ServerConfig(idle_timeout_s=1.0), engine) as srv:
        import websockets

        async def go(send_every: float, n: int):
            async with websockets.connect(srv.url + "/v1/listen") as ws:
                await ws.recv()
                try:
                    for _ in range(n):
                        await ws.send(b"\x00\x00" * 160)
                        await asyncio.sleep(send_every)
                except websockets.ConnectionClosed:
                    pass
                return [wire.decode(m) async for m in ws]

        msgs = run(go(0.0, 1))
        assert [m.code for m in msgs if isinstance(m, wire.Error)] == ["idle_timeout"]
        assert msgs[-1].reason == "idle_timeout"
    with LiveServer(ServerConfig(max_session_s=1.5), engine) as srv:
        msgs = run(go(0.1, 40))
        assert [m.code for m in msgs if isinstance(m, wire.Error)] == ["max_duration"]
        assert msgs[-1].reason == "max_duration"


def test_tokens_for_speaking_and_viewing(engine, tmp_path):
    tf = tmp_path / "tokens"
    tf.write_text("# tokens\nspeak s3cret\nview look\n")
    auth = load_token_file(tf)
    assert (auth.speak_tokens, auth.view_tokens) == (("s3cret",), ("look",))
    with LiveServer(ServerConfig(auth=auth), engine) as srv:
        msgs, code = run(first_and_close(srv.url + "/v1/listen"))
        assert msgs[0].code == "unauthorized" and code == 1008
        msgs, code = run(first_and_close(srv.url + "/v1/listen?token=look"))
        assert msgs[0].code == "unauthorized"  # a view token cannot speak
        params = wire.ListenParams(session="auth1")
        x = s16(load16k("LJ001-0002.wav"))

        async def speak_with_header():
            import websockets

            async with websockets.connect(
                f"{srv.url}/v1/listen?session=auth1",
                additional_headers={"Authorization": "Bearer s3cret"}) as ws:
                await ws.recv()
                await ws.send(x)
                await ws.send(json.dumps({"type": "close"}))
                return [wire.decode(m) async for m in ws]

        msgs = run(speak_with_header())
        assert any(isinstance(m, wire.Final) for m in msgs)
        del params
        # viewing and transcripts need a view (or speak) token
        denied, code = run(view(srv.url, "auth1"))
        assert denied[0].code == "unauthorized" and code == 1008
        ok, _ = run(view(srv.url, "auth1", token="look"))
        assert any(isinstance(m, wire.Final) for m in ok)
        base = f"{srv.http}/v1/sessions/auth1/transcript.txt"
        assert httpx.get(base).status_code == 401
        assert httpx.get(base + "?token=wrong").status_code == 401
        r = httpx.get(base, headers={"Authorization": "Bearer look"})
        assert r.status_code == 200 and "modern" in r.text


def test_origin_allow_list(engine):
    with LiveServer(ServerConfig(allowed_origins=("https://captions.example",)), engine) as srv:
        msgs, code = run(first_and_close(srv.url + "/v1/listen",
                                         {"Origin": "https://evil.example"}))
        assert msgs[0].code == "forbidden_origin" and code == 1008

        async def allowed():
            import websockets

            async with websockets.connect(srv.url + "/v1/listen",
                                          additional_headers={"Origin": "https://captions.example"}) as ws:
                return wire.decode(await ws.recv())

        assert isinstance(run(allowed()), wire.Ready)


def test_allow_origin_is_read_as_the_origin_a_browser_sends():
    """A copied URL's trailing slash (or a path, or upper case) made the flag match no
    browser's Origin, and every page was locked out; a value that is no origin was taken."""
    from whisperwire.server.cli import build_parser

    def origin(value: str) -> str:
        return build_parser().parse_args(["serve", "--allow-origin", value]).allow_origin[0]

    assert origin("https://Captions.Example/") == "https://captions.example"
    assert origin("https://captions.example:443") == "https://captions.example"
    assert origin("http://127.0.0.1:8765/page.html") == "http://127.0.0.1:8765"
    for bad in ("notaurl", "ftp://x.example", "https://"):
        with pytest.raises(SystemExit):
            origin(bad)


def _raw_ws(port: int, path: str):
    """A bare WebSocket client on a plain socket with a tiny receive buffer: it can send, and
    it never reads a byte after the handshake (no client library's flow control in between)."""
    import base64
    import os
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0]
    sock.settimeout(8.0)  # a server that stopped reading must not hang the test

    def send_binary(payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        hdr = bytes([0x82]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536 else
                               bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(hdr + mask + body)

    return sock, send_binary


def test_client_that_never_reads_is_dropped_and_its_transcript_kept(engine):
    """A speaker that stops reading cannot make the server buffer without bound: once its pipe
    is full and messages pile up, the server finalises the session and lets it go."""
    import time

    cfg = ServerConfig(max_pending_messages=20, status_interval_s=0.002, send_timeout_s=1.5)
    with LiveServer(cfg, engine, sndbuf=4096) as srv:
        sock, send = _raw_ws(srv.port, "/v1/listen?session=deaf")
        x = s16(load16k("jfk.wav"))
        hub = srv.app.state.hub
        deadline = time.monotonic() + 60
        try:
            i = 0
            while time.monotonic() < deadline:
                t = hub.get("deaf")
                if t is not None and not t.live:
                    break
                send(x[i % len(x): i % len(x) + 3200])  # 100 ms a time, faster than real time
                i += 3200
                time.sleep(0.01)
        except OSError:
            pass
        finally:
            sock.close()
        for _ in range(200):
            t = hub.get("deaf")
            if t is not None and not t.live:
                break
            time.sleep(0.05)
        assert t is not None and not t.live and t.closed.reason == "slow_consumer"
        assert t.finals, "what was said before is in the transcript"


def test_outbox_coalesces_partials_keeps_finals_and_drops_a_stuck_peer():
    from whisperwire.server.hub import Outbox

    o = Outbox(max_pending=5)
    for i in range(3):
        o.put(wire.Partial(0, f"p{i}", 0.0, 1.0))
    o.put(wire.Final(0, "f", 0.0, 1.0))
    o.put(wire.Status(1.0, 0.1))
    o.put(wire.Status(2.0, 0.2))
    got = [run(o.next()) for _ in range(3)]
    assert [type(m).__name__ for m in got] == ["Partial", "Final", "Status"]
    assert got[0].text == "p2" and got[2].audio_seconds == 2.0
    for i in range(6):
        o.put(wire.Final(i, "x", 0.0, 1.0))
    assert o.dropped and run(o.next()) is None


def _scrape(server) -> dict[str, float]:  # type: ignore[no-untyped-def]
    text = httpx.get(server.http + "/metrics").text
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
            if ln.startswith("whisperwire_")}


def test_metrics_count_sessions_audio_and_errors(live_server):
    """Deltas across one session: the shared server has served other tests' sessions before."""
    import websockets

    before = _scrape(live_server)
    params = wire.ListenParams()
    run(stream_chunks(live_server.url, paced(s16(load16k("jfk.wav")), params, 0), params))

    async def bad_json():
        async with websockets.connect(live_server.url + "/v1/listen") as ws:
            await ws.recv()
            await ws.send("{nope")
            await ws.send(json.dumps({"type": "close"}))
            return [m async for m in ws]

    run(bad_json())
    after = _scrape(live_server)

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("whisperwire_audio_in_seconds_total") == pytest.approx(11.0, abs=0.01)
    assert delta("whisperwire_decode_batch_size_count") >= 1
    assert delta('whisperwire_decode_stage_seconds_total{stage="encode"}') > 0
    # every window goes through one model call at least, alone or with batch-mates
    assert delta("whisperwire_decode_batch_size_sum") >= delta("whisperwire_decode_calls_total") >= 1
    assert delta("whisperwire_final_lag_seconds_count") >= 1
    assert delta('whisperwire_errors_total{code="bad_json"}') == 1
    # none stays live: another test's dropped speaker may still be waited for (its stream
    # ends within --rejoin-grace, 10 s), so the gauge is read again until it is 0
    deadline = time.monotonic() + 15
    while after["whisperwire_sessions"] != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _scrape(live_server)
    assert after["whisperwire_sessions"] == 0
    assert "whisperwire_viewers" in after


def test_a_full_server_says_when_to_try_again_over_http(engine):
    """The file endpoints answer a full server with 429 and ``Retry-After`` (the OpenAI SDK
    waits that long before retrying; it guessed 0.5-8 s), Deepgram's live handshake too."""

    with LiveServer(ServerConfig(max_sessions=0), engine) as srv:
        wav = wav_bytes(load16k("jfk.wav")[:16000])
        oa = httpx.post(srv.http + "/v1/audio/transcriptions", data={"model": "whisper-1"},
                        files={"file": ("a.wav", wav, "audio/wav")}, timeout=30)
        dg = httpx.post(srv.http + "/deepgram/v1/listen", content=wav,
                        headers={"Content-Type": "audio/wav"}, timeout=30)
        live = httpx.get(srv.http + "/deepgram/v1/listen", timeout=30, headers={
            "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    for r in (oa, dg, live):
        assert r.status_code == 429 and r.headers.get("retry-after") == "5", (r, r.text)


def test_a_full_server_refuses_an_openai_realtime_socket_as_try_again_later(engine):
    """A realtime socket refused at admission was closed 1008 (a policy violation, which a
    client does not retry) with an ``invalid_request_error``, where our own socket gets 1013
    and the file API 429 with ``rate_limit_error``."""
    import websockets

    async def refused(url: str) -> tuple:
        async with websockets.connect(f"{url}/v1/realtime?intent=transcription") as ws:
            event = json.loads(await asyncio.wait_for(ws.recv(), 10))
            with contextlib.suppress(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return event, ws.close_code, ws.close_reason

    with LiveServer(ServerConfig(max_sessions=0), engine) as srv:
        event, code, reason = asyncio.run(refused(srv.url))
    assert event["type"] == "error" and event["error"]["code"] == "server_full", event
    assert event["error"]["type"] == "rate_limit_error", event
    assert code == 1013 and reason, (code, reason)


def test_a_refused_socket_is_a_log_line(engine, caplog):
    """A speaker or viewer refused at admission left no line of ours (only uvicorn's
    "connection open", as a good one): an operator could not tell refusals from sessions
    (Deepgram's refusals were logged)."""
    import logging

    import websockets

    async def refused(url: str) -> None:
        for path in ("/v1/listen", f"/v1/sessions/{'x' * 65}/events"):
            async with websockets.connect(url + path) as ws:
                with contextlib.suppress(websockets.ConnectionClosed):
                    while True:
                        await asyncio.wait_for(ws.recv(), 10)

    caplog.set_level(logging.INFO, "whisperwire.server")
    with LiveServer(ServerConfig(max_sessions=0), engine) as srv:
        asyncio.run(refused(srv.url))
    assert "event=refused api=listen code=server_full" in caplog.text, caplog.text
    assert "event=refused api=events code=bad_session" in caplog.text, caplog.text


def test_a_refused_deepgram_stream_logs_which_parameter(live_server, caplog):
    """Deepgram's SDK raises "Unexpected error when initializing websocket connection" for
    every 400, dropping the body and ``dg-error`` that name the parameter: the operator of a
    Pipecat or LiveKit agent could learn it only from our log, which said the code alone."""
    import logging

    import websockets

    async def refused() -> None:
        with contextlib.suppress(websockets.InvalidStatus):
            async with websockets.connect(f"{live_server.url}/deepgram/v1/listen?diarize=true"):
                pass

    caplog.set_level(logging.INFO, "whisperwire.server")
    asyncio.run(refused())
    line = next(x for x in caplog.text.splitlines() if "event=refused api=deepgram" in x)
    assert "code=unsupported_parameter" in line and "diarize" in line, line

