"""A fixed session id is a channel: speakers one after another continue one transcript, and a
viewer stays subscribed across them. Real server, model and speech."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from conftest import LiveServer, load16k, read_all, run, s16
from subtitle_check import check_cues
from viewing import speak, still_open, view
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.auth import AuthConfig
from whisperwire.server.hub import Hub

pytestmark = pytest.mark.e2e




def finals(msgs):
    return [m for m in msgs if isinstance(m, wire.Final)]


@pytest.mark.timeout(240)
def test_a_second_speaker_continues_the_channel_and_its_viewer_follows(live_server):
    sid = "chan-follow"
    first = s16(load16k("LJ001-0002.wav"))
    second = s16(load16k("jfk.wav"))

    async def go():
        m1, c1 = await speak(live_server.url, first, session=sid)
        # a viewer joins between the two speakers and stays for both
        watcher = asyncio.create_task(view(live_server.url, sid, closes=2))
        await asyncio.sleep(0.5)
        m2, c2 = await speak(live_server.url, second, session=sid)
        seen, code = await watcher
        return m1, c1, m2, c2, seen, code

    m1, c1, m2, c2, seen, code = run(go())
    assert c1 == 1000 and c2 == 1000
    f1, f2 = finals(m1), finals(m2)
    assert f1 and f2
    # segment numbers continue from the channel's count
    assert [f.segment for f in f2] == list(range(len(f1), len(f1) + len(f2)))
    # the viewer saw the first speaker's finals, its closed, then the second speaker live
    # (and the captions' language once: the second speaker's is the same)
    kinds = [type(m).__name__ for m in seen if not isinstance(m, wire.Partial)]
    assert kinds == ["Channel", "Language"] + ["Final"] * len(f1) + ["Closed"] \
        + ["Final"] * len(f2) + ["Closed"]
    assert seen[0] == wire.Channel(sid, live_server.app.state.hub.get(sid).instance)
    assert [f.text for f in finals(seen)] == [f.text for f in f1 + f2]
    assert code is None, "the viewer socket stays open after the speaker ends"
    # ... and its times are all on the channel's clock: closed's audio too (it was the second
    # speaker's own, seconds before the end of the channel's last final)
    closed = [m for m in seen if isinstance(m, wire.Closed)]
    assert closed[-1].audio_seconds >= finals(seen)[-1].end - 1e-3 > closed[0].audio_seconds
    # the transcript holds both speakers, times in order
    tr = httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.json").json()
    assert tr["text"].split() == " ".join(f.text for f in f1 + f2).split()
    starts = [s["start"] for s in tr["finals"]]
    assert starts == sorted(starts)
    assert starts[len(f1)] >= m1[-1].audio_seconds - 1e-3, "speaker 2 starts after speaker 1"
    cues = check_cues(httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.srt").text,
                      vtt=False)
    assert tr["turns"] == [len(f1)]
    # ... and where the next speaker's audio will begin on the channel's clock (a reconnecting
    # speaker's times go there): after both speakers' audio
    own = [m.audio_seconds for m in m1 + m2 if isinstance(m, wire.Closed)]
    assert len(own) == 2 and tr["offset"] == pytest.approx(sum(own), abs=2e-3)
    assert [f["eou"] for f in tr["finals"]] == [f.eou for f in f1 + f2], "finals as sent"
    # each speaker's text starts its own line and cue, also when the first one's last final
    # went out without eou (jfk then LJ: "... for your country. in being comparatively modern.")
    txt = httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.txt").text
    assert any(line.startswith(f2[0].text.strip()) for line in txt.splitlines()), txt
    assert any(" ".join(c[2]).split()[0] == f2[0].text.split()[0] for c in cues)
    assert run(still_open(live_server.url, sid, 1.0)), "an ended channel keeps its viewers"


@pytest.mark.timeout(240)
def test_a_viewer_connected_during_the_first_speaker_follows_the_next(live_server):
    sid = "chan-live-viewer"
    pcm = s16(load16k("LJ001-0002.wav"))

    async def go():
        import websockets

        async with websockets.connect(f"{live_server.url}/v1/listen?session={sid}") as ws:
            await ws.recv()  # ready: the channel exists now
            watcher = asyncio.create_task(view(live_server.url, sid, closes=2))
            await asyncio.sleep(0.3)
            await ws.send(pcm)
            await ws.send('{"type":"close"}')
            m1 = [wire.decode(m) async for m in ws]
        m2, _ = await speak(live_server.url, pcm, session=sid)
        return await watcher, m1, m2

    (seen, code), m1, m2 = run(go())
    assert sum(isinstance(m, wire.Closed) for m in seen) == 2
    assert [f.text for f in finals(seen)] == [f.text for f in finals(m1) + finals(m2)]
    assert [f.segment for f in finals(seen)] == list(range(len(finals(seen))))
    assert code is None


def test_a_second_live_speaker_is_refused(live_server):
    sid = "chan-taken"

    async def go():
        import websockets

        async with websockets.connect(f"{live_server.url}/v1/listen?session={sid}") as ws:
            await ws.recv()
            async with websockets.connect(f"{live_server.url}/v1/listen?session={sid}") as other:
                return await read_all(other), other.close_code

    msgs, code = run(go())
    assert msgs[0].code == "session_taken" and code == 1008


def test_the_id_stays_taken_until_its_last_final_is_published():
    """The gap between a speaker's close and its last final: nobody else may speak there."""
    hub = Hub(retention_s=60)
    t = hub.open("gap")
    hub.publish(t, wire.Final(0, "one", 0.0, 1.0))
    with pytest.raises(Exception) as e:
        hub.open("gap")  # still finishing: not ended yet
    assert e.value.code == "session_taken"
    hub.end(t, audio_seconds=2.0)
    again = hub.open("gap")
    assert again is t and [f.text for f in again.finals] == ["one"]


def test_said_moves_a_new_streams_clock_back_on_a_channel_that_goes_on():
    """A speaker back on its channel in a new stream sends a second before the channel's end
    again as context (``said``): the stream's 0 moves back by it, and its finals (after it)
    go on where the channel's ended. A new channel's clock starts at the stream's 0."""
    hub = Hub(retention_s=60)
    t = hub.open("seam")
    assert hub.said(t, 1.0) is False and t.offset == 0.0  # (nothing before it)
    hub.publish(t, wire.Final(0, "one", 7.0, 9.0))
    hub.end(t, audio_seconds=9.0)
    t = hub.open("seam")
    assert t.offset == 9.0
    assert hub.said(t, 1.0) is True and (t.offset, t.audio_seconds) == (8.0, 8.0)
    hub.publish(t, wire.Final(1, "two", 1.0, 1.5))  # (said words never start before 1.0)
    assert [(f.start, f.end) for f in t.finals] == [(7.0, 9.0), (9.0, 9.5)]
    # that stream ends 0.3 s in, inside the second said again; the next one's 0 is a second
    # before where the channel is final to (9.5), not before its end (8.3)
    hub.end(t, audio_seconds=0.3)
    t = hub.open("seam")
    assert t.offset == pytest.approx(8.3) and hub.said(t, 1.0) and t.offset == 8.5


async def _until_none(v):  # type: ignore[no-untyped-def]
    while (m := await v.next()) is not None:
        yield m


def test_a_late_viewer_sees_where_each_speaker_ended():
    """A viewer there when a speaker ends gets its ``closed``, and ends the line; one who comes
    later gets the finals only, and a speaker's last final may lack ``eou`` (made final before
    its client closed): the next speaker's words ran on in the same line. Replayed finals
    close each speaker's utterance, as downloads do (``subtitles.at_turns``)."""
    hub = Hub(retention_s=60)
    t = hub.open("turns")
    hub.publish(t, wire.Final(0, "Ask not", 0.0, 1.0, eou=False))
    hub.end(t, audio_seconds=2.0)
    t = hub.open("turns")
    hub.publish(t, wire.Final(1, "in being modern.", 0.0, 1.0, eou=True))
    v = hub.watch("turns")
    v.finish()

    async def drain() -> list:
        return [m async for m in _until_none(v)]

    replayed = asyncio.run(drain())
    assert [(f.text, f.eou) for f in replayed if isinstance(f, wire.Final)] == [
        ("Ask not", True), ("in being modern.", True)]
    assert t.finals[0].eou is False  # (the finals themselves never change)


@pytest.mark.timeout(120)
def test_viewers_are_closed_1000_when_the_channel_expires(engine):
    with LiveServer(ServerConfig(transcript_retention_s=1.0), engine) as srv:
        async def go():
            await speak(srv.url, s16(load16k("LJ001-0002.wav")), session="brief")
            return await view(srv.url, "brief", until_socket_closes=True, timeout=20)

        seen, code = run(go())
        assert isinstance(seen[-1], wire.Closed) and code == 1000
        assert httpx.get(f"{srv.http}/v1/sessions/brief/transcript.txt").status_code == 404


@pytest.mark.timeout(120)
def test_view_token_from_ready_views_only_its_channel(engine):
    with LiveServer(ServerConfig(auth=AuthConfig(("sp",), ("look",))), engine) as srv:
        pcm = s16(load16k("LJ001-0002.wav"))

        async def go():
            m, _ = await speak(srv.url, pcm, session="vt", token="sp")
            vt = m[0].view_token
            seen, _ = await view(srv.url, "vt", token=vt)
            other, code = await view(srv.url, "vt-other", token=vt)
            as_speaker, scode = await speak(srv.url, pcm[:3200], session="vt", token=vt)
            legacy, _ = await view(srv.url, "vt", token="look")  # --view-token still works
            return m, vt, seen, other, code, as_speaker, scode, legacy

        m, vt, seen, other, code, as_speaker, scode, legacy = run(go())
        assert isinstance(m[0], wire.Ready) and vt and vt not in ("sp", "look")
        assert [f.text for f in finals(seen)] == [f.text for f in finals(m)]
        assert other[0].code == "unauthorized" and code == 1008
        assert as_speaker[0].code == "unauthorized" and scode == 1008
        assert finals(legacy)
        base = f"{srv.http}/v1/sessions/vt/transcript.txt"
        assert httpx.get(base, params={"token": vt}).status_code == 200
        assert httpx.get(f"{srv.http}/v1/sessions/x/transcript.txt",
                         params={"token": vt}).status_code in (401, 404)


def test_ready_has_no_view_token_without_auth(live_server):
    m, _ = run(speak(live_server.url, b"\x00\x00" * 1600, session="noauth-vt"))
    assert isinstance(m[0], wire.Ready) and m[0].view_token is None
