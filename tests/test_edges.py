"""What happens at the edges of a session: a decoder that keeps failing, an engine that cannot
serve, odd session ids. Real server, model and speech."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
from conftest import LiveServer, load16k, read_all, run, s16
from viewing import speak, view
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig

pytestmark = pytest.mark.e2e




class FailsAfter:
    """The real engine, whose decodes start failing after ``ok`` of them (a device lost
    mid-session, say)."""

    def __init__(self, engine, ok: int) -> None:  # type: ignore[no-untyped-def]
        self._engine, self._ok = engine, ok

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._engine, name)

    async def decode(self, request):  # type: ignore[no-untyped-def]
        if self._ok <= 0:
            raise RuntimeError("device lost")
        self._ok -= 1
        return await self._engine.decode(request)


@pytest.mark.timeout(120)
def test_decoding_that_keeps_failing_ends_the_session_and_keeps_the_transcript(engine):
    import websockets

    with LiveServer(ServerConfig(), FailsAfter(engine, 8)) as srv:
        # jfk four times, read while it is sent, as a client does: the talk goes on until the
        # server gives up (one jfk, read only after it was sent, held fewer than the nine
        # decodes this needs on a busy CPU: steps then cover more audio each, and a session
        # whose input stops, unclosed, asks for nothing more)
        x = s16(np.tile(load16k("jfk.wav"), 4))

        async def go():
            async with websockets.connect(f"{srv.url}/v1/listen?session=broken") as ws:
                await ws.recv()
                reader = asyncio.ensure_future(read_all(ws))
                try:
                    for i in range(0, len(x), 8000):  # 250 ms a time, 2x real time; no close
                        if reader.done():
                            break
                        await ws.send(x[i : i + 8000])
                        await asyncio.sleep(0.125)
                except websockets.ConnectionClosed:
                    pass  # the server gave up while we were still talking
                msgs = await asyncio.wait_for(reader, 30)  # the server must end it
                return msgs, ws.close_code

        msgs, code = run(go())
        errors = [m.code for m in msgs if isinstance(m, wire.Error)]
        assert errors and set(errors) == {"decode_failed"}
        assert isinstance(msgs[-1], wire.Closed) and msgs[-1].reason == "decode_failed"
        assert code == 1011
        t = srv.app.state.hub.get("broken")
        assert t is not None and not t.live
        sent = [m.text for m in msgs if isinstance(m, wire.Final)]
        assert sent and [f.text for f in t.finals] == sent, "finals before the failure are kept"


@pytest.mark.timeout(120)
def test_readyz_and_new_speakers_follow_the_engines_health(engine):
    before = set(engine._loops)
    with LiveServer(ServerConfig(), engine) as srv:
        assert httpx.get(srv.http + "/readyz").status_code == 200
        (loop,) = set(engine._loops) - before
        # the decode scheduler of this server dies (an observer raising did exactly this)
        loop.call_soon_threadsafe(engine._loops[loop][1].cancel)
        for _ in range(50):
            r = httpx.get(srv.http + "/readyz")
            if r.status_code == 503:
                break
        assert r.status_code == 503 and r.json()["reason"] == "the decode scheduler stopped"
        msgs, code = run(speak(srv.url, b"\x00\x00" * 1600))
        assert msgs[0].code == "not_ready" and "scheduler" in msgs[0].message and code == 1013


@pytest.mark.parametrize("sid", ["会議", "..", ".", "a" * 65, "a b", "x\u0660"])
def test_odd_session_ids_are_refused_at_connect(live_server, sid):
    msgs, code = run(speak(live_server.url, b"\x00\x00" * 160, session=sid))
    assert msgs[0].code == "bad_session" and code == 1008
    seen, vcode = run(view(live_server.url, sid))
    assert seen[0].code == "bad_session" and vcode == 1008


@pytest.mark.parametrize("path, status", [
    ("%E4%BC%9A%E8%AD%B0", 400), ("%2E%2E", 400), ("%2E", 400), ("a" * 300, 400),
    ("a%2Fb", 404), ("no-such-id", 404),
])
def test_transcript_of_odd_ids_is_400_or_404_never_500(live_server, path, status):
    for fmt in ("srt", "vtt", "txt", "json"):
        r = httpx.get(f"{live_server.http}/v1/sessions/{path}/transcript.{fmt}")
        assert r.status_code == status, (path, fmt, r.status_code)


def test_a_dotted_id_is_served_with_a_download_name(live_server):
    msgs, _ = run(speak(live_server.url, s16(load16k("LJ001-0002.wav")), session="a.b-C_9"))
    assert isinstance(msgs[0], wire.Ready) and msgs[0].session == "a.b-C_9"
    r = httpx.get(f"{live_server.http}/v1/sessions/a.b-C_9/transcript.srt")
    assert r.status_code == 200
    assert r.headers["content-disposition"] == 'inline; filename="a.b-C_9.srt"'


def test_deeply_nested_json_is_bad_json_and_the_session_goes_on(live_server):
    import websockets

    async def go():
        async with websockets.connect(f"{live_server.url}/v1/listen") as ws:
            await ws.recv()
            await ws.send("[" * 1000 + "]" * 1000)
            await ws.send(s16(load16k("LJ001-0002.wav")))
            await ws.send(json.dumps({"type": "close"}))
            return [wire.decode(m) async for m in ws], ws.close_code

    msgs, code = run(go())
    assert [m.code for m in msgs if isinstance(m, wire.Error)] == ["bad_json"]
    assert any(isinstance(m, wire.Final) for m in msgs) and code == 1000
