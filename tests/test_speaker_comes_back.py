"""A speaker's socket dies mid-word and the client comes back to its session on a new one (the
page and the CLI do, within seconds). The server keeps the stream open for that
(``rejoin_grace_s``), so the word the drop cut in two is heard whole. Before, the server made
finals of the dropped connection's audio at once: a cut in "ask" gave "S NOT!" or "is not..."
(CI on 2026-12-05: the page's blip test 4 s into jfk).

The real server and model; the drop is a TCP proxy that is cut (the server sees the socket die,
no close frame). The client here does what ours do: after ``ready`` it reads
``transcript.json``, whose ``offset`` says where the new connection's audio begins, and sends
the rest of the file from there."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import numpy as np
import pytest
import websockets

from conftest import LiveServer, load16k, read_all, references, s16
from tcp_proxy import CuttableProxy
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.wer import normalize, wer

pytestmark = pytest.mark.e2e

CUT_S = 3.6  # into jfk: inside "ask" (Americans ... ask not)


def channel(server, sid: str) -> dict:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(f"{server.http}/v1/sessions/{sid}/transcript.json") as r:
        return json.loads(r.read())


async def connect(server, query: str, tries: int = 20):  # type: ignore[no-untyped-def]
    """A speaker's socket once ``ready``, trying again on ``session_taken`` (0.5 s apart) as
    our clients do after a drop; the socket, and the refusals met on the way."""
    refusals = []
    for _ in range(tries):
        ws = await websockets.connect(f"{server.url}/v1/listen?{query}")
        m = json.loads(await ws.recv())
        if m["type"] == "ready":
            return ws, refusals
        await ws.close()
        assert m["type"] == "error" and m["code"] == "session_taken", m
        refusals.append(m["code"])
        await asyncio.sleep(0.5)
    raise AssertionError("never taken back")


async def speak_with_a_drop(server, away_s: float, kw: dict) -> tuple[list, dict, float]:  # type: ignore[no-untyped-def]
    """jfk up to CUT_S through a proxy that is then cut (the session id is the server's
    choice, as the page's and the CLI's are); ``away_s`` later the rest, on a new connection to
    that session, from where the server says it begins. The new connection's messages, the
    channel's ``transcript.json`` at the end, and where it said the new connection begins.
    ``kw`` gets the refusals met coming back; with ``other`` (a query), a speaker asking for it
    tries the session first, and its answer is kept."""
    x = np.concatenate([load16k("jfk.wav"), np.zeros(8000, np.float32)])
    proxy = CuttableProxy(server.port)
    try:
        first = await websockets.connect(f"{proxy.url}/v1/listen")
        ready = json.loads(await first.recv())
        sid = ready["session"]
        cut = int(CUT_S * 16000)
        for i in range(0, cut, 3200):  # 5x real time: the server has it all before the cut
            await first.send(s16(x[i:min(i + 3200, cut)]))
            await asyncio.sleep(0.04)
        deadline = time.monotonic() + 10
        while True:  # until the server heard all of it (its status says so)
            m = json.loads(await first.recv())
            if m["type"] == "status" and m["audio_seconds"] >= CUT_S - 1e-3:
                break
            assert time.monotonic() < deadline, "the server never heard the first part"
        proxy.cut()
        if "other" in kw:  # another speaker, or this one with other parameters: not let in
            live = server.app.state.live
            while not any(c.sid == sid and c.waiting for c in live):  # (the drop is seen)
                await asyncio.sleep(0.02)
            async with websockets.connect(f"{server.url}/v1/listen?{kw['other']}&session={sid}"
                                          ) as o:
                kw["answer"] = json.loads(await o.recv())
        await asyncio.sleep(away_s)
        ws, kw["refusals"] = await connect(server, f"session={sid}")
        async with ws:
            begins = channel(server, sid)["offset"]
            for i in range(int(round(begins * 16000)), len(x), 3200):
                await ws.send(s16(x[i:i + 3200]))
                await asyncio.sleep(0.04)
            await ws.send(json.dumps({"type": "close"}))
            msgs = await asyncio.wait_for(read_all(ws), 60)
        return msgs, channel(server, sid), begins
    finally:
        proxy.close()


def rejoins(server) -> dict[str, float]:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(f"{server.http}/metrics") as r:
        lines = r.read().decode().splitlines()
    return {o: sum(float(ln.rsplit(" ", 1)[1]) for ln in lines
                   if ln.startswith(f'whisperwire_rejoins_total{{outcome="{o}"}}'))
            for o in ("back", "not_back")}


@pytest.mark.timeout(120)
def test_a_speaker_back_within_the_grace_goes_on_in_the_same_stream(live_server):
    kw: dict = {}
    before = rejoins(live_server)
    msgs, ch, begins = asyncio.run(speak_with_a_drop(live_server, 1.5, kw))
    assert rejoins(live_server)["back"] == before["back"] + 1
    text = " ".join(normalize(ch["text"]))
    assert "ask not what your country" in text, ch["text"]
    assert wer(references()["jfk.wav"], ch["text"]) <= 0.1, ch["text"]
    # one stream, taken back at once: no speaker's end at the drop, and the new connection
    # began where the first one's audio ended
    assert kw["refusals"] == [] and ch["turns"] == [], (kw, ch)
    assert begins == pytest.approx(CUT_S, abs=1e-3)
    assert not any(abs(f["end"] - CUT_S) < 0.05 for f in ch["finals"]), ch["finals"]
    # the new connection's times count from its own start, as a new connection's do
    mine = [m for m in msgs if isinstance(m, wire.Final)]
    assert mine and mine[-1].end + CUT_S == pytest.approx(ch["finals"][-1]["end"], abs=1e-3)
    sent = len(load16k("jfk.wav")) / 16000 + 0.5 - CUT_S
    assert all(m.audio_seconds <= sent + 0.01 for m in msgs if isinstance(m, wire.Status))
    closed = msgs[-1]
    assert isinstance(closed, wire.Closed) and closed.audio_seconds == pytest.approx(sent,
                                                                                     abs=0.01)


@pytest.mark.timeout(120)
def test_a_speaker_not_back_within_the_grace_has_its_last_words_made_final(live_server):
    """Nobody comes back (a speaker asking for other parameters is not let in: it would
    decode the rest differently): the stream ends ``rejoin_grace_s`` after the drop, its last
    words final; the next speaker of the session starts after them."""
    kw: dict = {"other": "sample_rate=8000"}
    with LiveServer(ServerConfig(rejoin_grace_s=1.0), engine=live_server.app.state.engine
                    ) as server:
        _, ch, begins = asyncio.run(speak_with_a_drop(server, 3.0, kw))
        assert rejoins(server) == {"back": 0, "not_back": 1}
    assert kw["answer"]["type"] == "error" and kw["answer"]["code"] == "session_taken"
    # the dropped stream ended at the cut ("ask" cut in two, as any end cuts it), and the
    # next speaker's words follow it
    assert begins == pytest.approx(CUT_S, abs=1e-3)
    assert len(ch["turns"]) == 1 and ch["turns"][0] >= 1, ch
    assert ch["finals"][ch["turns"][0] - 1]["end"] <= CUT_S + 1e-3
    text = " ".join(normalize(ch["text"]))
    assert text.startswith("and so my fellow americans") and "country" in text, ch["text"]


@pytest.mark.timeout(90)
def test_a_speaker_that_hangs_up_is_not_waited_for(live_server):
    """A close frame with 1000 (not our ``close``, but on purpose) ends the stream at once:
    its last words are final now, not ``rejoin_grace_s`` later."""
    async def go(server) -> dict:  # type: ignore[no-untyped-def]
        async with websockets.connect(f"{server.url}/v1/listen") as ws:
            sid = json.loads(await ws.recv())["session"]
            await ws.send(s16(load16k("jfk.wav")[: 3 * 16000]))
            await asyncio.sleep(0.5)
        deadline = time.monotonic() + 30  # (the grace is 60 s)
        while (ch := channel(server, sid))["live"]:
            assert time.monotonic() < deadline, "the hung-up stream was waited for"
            await asyncio.sleep(0.1)
        return ch

    with LiveServer(ServerConfig(rejoin_grace_s=60.0), engine=live_server.app.state.engine
                    ) as server:
        ch = asyncio.run(go(server))
    assert "americans" in " ".join(normalize(ch["text"])), ch


def test_a_connection_s_events_count_from_its_start():
    """Every timed event a speaker gets, moved to a connection that began 3.6 s into the
    stream (what began before it is below 0); untimed ones unchanged."""
    from whisperwire.server.hub import on_connection_clock

    w = wire.Word(" ask", 3.3, 3.9, 0.9)
    at = 3.6
    f = on_connection_clock(wire.Final(4, " Ask not.", 3.3, 4.5, (w,), eou=True), at)
    assert (f.start, f.end, f.words[0].start, f.words[0].end) == pytest.approx(
        (-0.3, 0.9, -0.3, 0.3))
    assert f.segment == 4 and f.text == " Ask not." and f.eou
    p = on_connection_clock(wire.Partial(5, " what", 4.5, 5.0), at)
    assert (p.start, p.end) == pytest.approx((0.9, 1.4))
    assert on_connection_clock(wire.UtteranceEnd(6.0), at).end == pytest.approx(2.4)
    assert on_connection_clock(wire.Language("en", 0.9, 1.0), at).start == pytest.approx(-2.6)
    assert on_connection_clock(wire.Status(11.5, 0.4, 0.1), at).audio_seconds == \
        pytest.approx(7.9)
    assert on_connection_clock(wire.Closed("client_close", 11.5), at).audio_seconds == \
        pytest.approx(7.9)
    err = wire.Error("bad_json", "x")
    assert on_connection_clock(err, at) is err
    assert on_connection_clock(f, 0.0) is f
