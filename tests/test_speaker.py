"""The reconnecting speaker (client/speaker.py) against a scripted stand-in server: the cases a
real server makes only by chance of timing. (End to end, with the real server and a real drop:
tests/test_mic_reconnect.py.) Each audio chunk carries its index, so the stand-in sees what
arrived, what was lost and what came twice."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

import pytest

from whisperwire.client import speaker
from whisperwire.server import wire

CHUNK = 3200  # 100 ms of 16 kHz s16le


def chunk(k: int) -> bytes:
    return k.to_bytes(2, "little") * (CHUNK // 2)


def index(b: bytes) -> int:
    return int.from_bytes(b[:2], "little")


async def mic(n: int, every: float = 0.02):
    """``n`` chunks, tagged 0..n-1, one every ``every`` seconds."""
    for k in range(n):
        await asyncio.sleep(every)
        yield chunk(k)


def final(seg: int, start: float, text: str = "") -> str:
    w = wire.Word(f" w{seg}", start, start + 0.3, 0.9)
    return wire.encode(wire.Final(seg, text or f"w{seg}", start, start + 0.3, (w,)))


class StandIn:
    """``plays[i](self, ws)`` serves the i-th connection; ``channel`` is what
    transcript.json answers (None: HTTP 500); ``goes_on``: a connection after a drop goes on
    in the dropped one's stream (``ready``'s ``rejoined``), as one server within its grace."""

    goes_on = True

    def __init__(self, *plays) -> None:  # type: ignore[no-untyped-def]
        self.plays, self.connections, self.got = list(plays), 0, []
        self.channel: dict | None = {"finals": [], "offset": 0.0, "instance": "a", "turns": []}

    fail_reads = 0  # this many transcript.json reads answer 500 first

    def http(self, conn, req):  # type: ignore[no-untyped-def]
        if not req.path.startswith("/v1/sessions/"):
            return None
        if self.fail_reads > 0:
            self.fail_reads -= 1
            return conn.respond(HTTPStatus.INTERNAL_SERVER_ERROR, "busy")
        if self.channel is None:
            return conn.respond(HTTPStatus.INTERNAL_SERVER_ERROR, "no")
        return conn.respond(HTTPStatus.OK, json.dumps(self.channel))

    async def handler(self, ws) -> None:  # type: ignore[no-untyped-def]
        i = self.connections
        self.connections += 1
        self.got.append([])
        await self.plays[min(i, len(self.plays) - 1)](self, ws, self.got[i])

    async def run(self, source, **kw):  # type: ignore[no-untyped-def]
        from websockets.asyncio.server import serve

        async with serve(self.handler, "127.0.0.1", 0, process_request=self.http) as srv:
            url = f"ws://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
            said: list[str] = []
            shown: list[wire.Message] = []
            kw.setdefault("waits_s", (0.05,) * 4)
            res = await asyncio.wait_for(speaker.speak(
                url, source, wire.ListenParams(sample_rate=16000, session="s1"),
                on_message=shown.append, say=said.append, **kw), 30)
            return res, shown, said


async def take(ws, got, until: int | None = None) -> bool:  # type: ignore[no-untyped-def]
    """Audio into ``got`` (chunk indexes) until ``until`` chunks, or the client's ``close``
    (True)."""
    async for m in ws:
        if isinstance(m, bytes):
            got.append(index(m))
            if until is not None and len(got) >= until:
                return False
        elif json.loads(m).get("type") == "close":
            return True
    return False


async def alive(ws) -> None:  # type: ignore[no-untyped-def]
    """``status`` every 0.2 s, as the server says it every second."""
    while True:
        await asyncio.sleep(0.2)
        await ws.send(wire.encode(wire.Status(0.0, 0.0, 0.0)))


async def serve_to_the_end(s, ws, got, seg: int = 1, start: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    rejoined = True if s.connections > 1 and s.goes_on else None
    await ws.send(wire.encode(wire.Ready("s1", "m", "cpu", "int8", 16000, rejoined=rejoined)))
    beat = asyncio.create_task(alive(ws))
    await take(ws, got)
    beat.cancel()
    await ws.send(final(seg, start))
    await ws.send(wire.encode(wire.Closed("client_close", len(got) / 10)))
    await ws.close()


def drop_after(n: int, seg: int = 0):  # type: ignore[no-untyped-def]
    async def play(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        await ws.send(wire.encode(wire.Ready("s1", "m", "cpu", "int8", 16000)))
        await take(ws, got, n)
        await ws.send(final(seg, 0.0))
        s.channel = {"finals": [json.loads(final(seg, 0.0))], "offset": len(got) / 10,
                     "instance": "a", "turns": []}
        ws.transport.abort()
    return play


async def taken(s, ws, got) -> None:  # type: ignore[no-untyped-def]
    await ws.send(wire.encode(wire.Error("session_taken", "session 's1' is already live")))
    await ws.close(1008, "session 's1' is already live")


@pytest.mark.timeout(60)
def test_session_taken_after_a_drop_is_tried_again_and_no_chunk_is_lost_or_repeated():
    """Right after a drop the server is still finishing the old connection: ``session_taken``
    (close 1008) then means "in a moment", not no. It ended the command before."""
    s = StandIn(drop_after(10), taken, serve_to_the_end)
    res, shown, said = asyncio.run(s.run(mic(40)))
    assert s.connections == 3
    assert [m.segment for m in shown if isinstance(m, wire.Final)] == [0, 1]
    assert isinstance(shown[-1], wire.Closed) and res.close_code == 1000
    assert sorted(s.got[0] + s.got[2]) == list(range(40)), "every chunk arrives exactly once"


@pytest.mark.timeout(60)
def test_a_refusal_is_an_answer_and_nothing_leaks():
    async def refuse(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        await ws.send(wire.encode(wire.Error("bad_language", "no such language")))
        await ws.close(1008, "no such language")

    s = StandIn(refuse)
    res, shown, said = asyncio.run(s.run(mic(20)))
    assert s.connections == 1 and res.close_code == 1008
    assert [m.code for m in shown if isinstance(m, wire.Error)] == ["bad_language"]


@pytest.mark.timeout(60)
def test_a_silent_link_is_a_drop(monkeypatch):
    """A connection that dies without a FIN (a laptop's Wi-Fi gone) says nothing; the server
    says ``status`` every second, so silence means dead. Before, the client waited forever."""
    monkeypatch.setattr(speaker, "SILENT_S", 0.5)

    async def mute(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        await ws.send(wire.encode(wire.Ready("s1", "m", "cpu", "int8", 16000)))
        s.channel = {"finals": [], "offset": 0.5, "instance": "a", "turns": []}
        await take(ws, got, 5)
        await asyncio.sleep(10)  # the socket stays open, nothing comes

    s = StandIn(mute, serve_to_the_end)
    res, shown, said = asyncio.run(s.run(mic(60)))
    assert s.connections == 2 and isinstance(shown[-1], wire.Closed)
    assert any("reconnecting" in x for x in said)


@pytest.mark.timeout(60)
def test_a_restarted_server_s_finals_are_shown_and_timed_after_the_old_ones():
    """A restarted server numbers its new channel's finals from 0 again: they were taken for
    replays and never shown when the old transcript could not be read."""
    s = StandIn(drop_after(10, seg=5), serve_to_the_end)

    async def go():  # type: ignore[no-untyped-def]
        real = s.handler

        async def handler(ws) -> None:  # type: ignore[no-untyped-def]
            if s.connections == 1:
                s.channel = {"finals": [], "offset": 0.0, "instance": "b", "turns": []}
            await real(ws)

        s.handler = handler
        return await s.run(mic(40))

    res, shown, said = asyncio.run(go())
    finals = [m for m in shown if isinstance(m, wire.Final)]
    assert [f.segment for f in finals] == [5, 1]
    assert finals[1].start > finals[0].end, "the new channel's clock goes on after the old one"
    # the audio after the old server's last final (which ended at 0.3 s) is said again
    assert s.got[1][0] <= 3 and sorted(set(s.got[0] + s.got[1])) == list(range(40))


@pytest.mark.timeout(60)
def test_an_unreadable_transcript_after_a_drop_is_never_guessed_at():
    """Without the channel's transcript a reconnect cannot know what the server heard: it
    guessed, and a restarted server's finals (numbered from 0 again) were then filtered as
    replays, audio was lost or sent twice, times were off. Now that connection is given up
    before it sends anything, and the next one, which can read it, goes on."""
    s = StandIn(drop_after(10, seg=5), serve_to_the_end)

    async def go():  # type: ignore[no-untyped-def]
        real = s.handler

        async def handler(ws) -> None:  # type: ignore[no-untyped-def]
            if s.connections == 1:  # a restarted server, unreadable for a moment
                s.channel = {"finals": [], "offset": 0.0, "instance": "b", "turns": []}
                s.fail_reads = 4
            await real(ws)

        s.handler = handler
        return await s.run(mic(40))

    res, shown, said = asyncio.run(go())
    assert s.connections == 3 and s.got[1] == [], "the unread one sent nothing"
    assert any("cannot read" in x for x in said)
    finals = [m for m in shown if isinstance(m, wire.Final)]
    assert [f.segment for f in finals] == [5, 1] and finals[1].start > finals[0].end
    assert sorted(set(s.got[0] + s.got[2])) == list(range(40))


@pytest.mark.timeout(60)
def test_a_second_ctrl_c_while_disconnected_quits_at_once():
    async def gone(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        ws.transport.abort()

    s = StandIn(drop_after(5), gone)

    async def go():  # type: ignore[no-untyped-def]
        quit_now = asyncio.Event()
        asyncio.get_running_loop().call_later(1.5, quit_now.set)
        return await s.run(mic(1000), quit=quit_now, waits_s=(1.0,) * 10)

    res, shown, said = asyncio.run(go())
    assert said[-1].startswith("stopped"), said
    assert "not sent" in said[-1]


def test_held_audio_drops_the_oldest_beyond_its_bound_and_sent_audio_gives_the_last_bytes():
    h = speaker.Pcm(3 * CHUNK)
    for k in range(5):
        h.add(chunk(k))
    out = [index(h.take()) for _ in range(3)]
    assert out == [2, 3, 4] and h.let_go == 2 * CHUNK and h.take() is None
    s = speaker.Pcm(4 * CHUNK)
    for k in range(6):
        s.add(chunk(k))
    last = s.take_last(CHUNK + CHUNK // 2)
    assert [len(p) for p in last] == [CHUNK // 2, CHUNK] and index(last[1]) == 5
    assert s.size == 4 * CHUNK - len(b"".join(last))  # what is left to say again
    s.put_back(last)
    assert [s.take() for _ in range(2)] == last  # in front: what is said again goes first

@pytest.mark.timeout(60)
def test_a_server_shutting_down_before_it_read_everything_gets_the_rest_elsewhere():
    """``closed(server_shutdown)`` after the microphone stopped ended the session even when the
    server had not read all that was sent (it holds back reading under load). The channel
    goes on elsewhere in a new stream (a Ray replica): a second before what was not heard
    goes too, as context (``said``)."""
    async def shutting(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        await ws.send(wire.encode(wire.Ready("s1", "m", "cpu", "int8", 16000)))
        await take(ws, got)  # all of it, up to the client's close...
        heard = 12  # ...but only 12 chunks were decoded before the shutdown
        s.channel = {"finals": [json.loads(final(0, 0.0))], "offset": heard / 10,
                     "instance": "a", "turns": []}
        await ws.send(final(0, 0.0))
        await ws.send(wire.encode(wire.Closed("server_shutdown", heard / 10)))
        await ws.close(1001)

    s = StandIn(shutting, serve_to_the_end)
    s.goes_on = False
    res, shown, said = asyncio.run(s.run(mic(20)))
    assert s.connections == 2 and s.got[1] == list(range(2, 20))
    assert [m.reason for m in shown if isinstance(m, wire.Closed)] == ["client_close"]


def test_a_client_that_gave_up_is_not_told_the_server_ended_it(capsys):
    """After "stopped" (a second Ctrl-C) or "could not reach it again", ``finish`` added that
    the server had ended the connection."""
    from whisperwire.client.stream import StreamResult, finish

    res = StreamResult(gave_up=True)
    res.messages.append((0.0, 0.0, wire.Ready("s1", "m", "cpu", "int8", 16000)))
    assert finish(res, "ws://127.0.0.1:1", None) == 1
    assert capsys.readouterr().err == ""


@pytest.mark.timeout(60)
def test_a_file_flat_out_stops_at_the_first_ctrl_c_where_the_sending_is():
    """``whisperwire stream FILE --speed 0``: a file does not have to be read ahead as a
    microphone's audio is held. Before, the whole file went into the held audio at once, and
    the first Ctrl-C stopped nothing: all of it was sent. The server here reads 20 chunks,
    then the user presses Ctrl-C."""
    from whisperwire.client.stream import paced, until_stopped

    n = 6000  # 10 minutes, 19 MB
    stop = asyncio.Event()

    async def slow_then_stopped(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        await ws.send(wire.encode(wire.Ready("s1", "m", "cpu", "int8", 16000)))
        beat = asyncio.create_task(alive(ws))
        await take(ws, got, until=20)
        stop.set()  # Ctrl-C
        await take(ws, got)
        beat.cancel()
        await ws.send(wire.encode(wire.Closed("client_close", len(got) / 10)))
        await ws.close()

    params = wire.ListenParams(sample_rate=16000, session="s1")
    pcm = b"".join(chunk(k) for k in range(n))
    s = StandIn(slow_then_stopped)
    res, _, said = asyncio.run(s.run(until_stopped(paced(pcm, params, 0), stop), stop=stop,
                                     ahead_s=1.0))
    got = s.got[0]
    assert got == list(range(len(got))), "in order, none lost or twice"
    assert len(got) < n // 2, len(got)  # (what the sockets' buffers held when it came)
    assert res.of_type(wire.Closed) and not res.gave_up


@pytest.mark.timeout(60)
def test_audio_let_go_while_disconnected_fails_the_command():
    """Speech heard while the server was out of reach for longer than the held audio's bound
    is lost: the command said so, and still exited 0 as if every word had arrived."""
    from whisperwire.client.stream import finish

    async def gone(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        ws.transport.abort()

    s = StandIn(drop_after(5), gone, gone, serve_to_the_end)
    res, shown, said = asyncio.run(s.run(mic(60), held_max_s=0.3, waits_s=(0.3,) * 6))
    assert any("were never sent" in x for x in said), said
    assert res.unsent_s > 0.5
    assert finish(res, "ws://127.0.0.1:1", None) == 1


@pytest.mark.timeout(60)
def test_a_file_whose_server_is_gone_for_good_says_the_rest_of_it_was_not_sent():
    """``stream`` of a long file, the server gone for good mid-file: it said "1.0 s of audio
    were not sent" (the read-ahead it held) of a file 175 s from its end."""
    from whisperwire.client.stream import paced

    async def gone(s, ws, got) -> None:  # type: ignore[no-untyped-def]
        ws.transport.abort()

    params = wire.ListenParams(sample_rate=16000, session="s1")
    pcm = b"".join(chunk(k) for k in range(600))  # 60 s, sent at 10x
    s = StandIn(drop_after(5), gone)
    res, _, said = asyncio.run(s.run(paced(pcm, params, 10), ahead_s=1.0, waits_s=(0.05,) * 3))
    assert res.gave_up
    assert any("could not reach it again" in x and "the rest of the file were not sent" in x
               for x in said), said
