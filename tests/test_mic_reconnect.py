"""``whisperwire mic`` and ``whisperwire stream`` across a dropped connection: it comes back to its session, the audio
heard meanwhile is held and sent, the finals the server made of the dropped connection's last
audio are shown, each final once, on one clock. Before, the command ended at the first drop
(exit 1) and everything said after it was lost.

The real server and model; the drop is a TCP proxy between them that is cut, as a network
blip or a restarting load balancer cuts it (the server sees the socket die; the client sees a
connection closed without a close frame)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import wave
from argparse import Namespace

import numpy as np
import pytest

from conftest import LiveServer, load16k, references, s16
from tcp_proxy import CuttableProxy
from whisperwire.client import mic, stream
from whisperwire.server.app import ServerConfig
from whisperwire.server.wer import extra_repeats, longest_missing, normalize, wer

pytestmark = pytest.mark.e2e

FILES = ["LJ001-0001.wav", "LJ001-0003.wav"]


def joined_wav(tmp_path, files=FILES, name="two.wav") -> tuple[str, float]:  # type: ignore[no-untyped-def]
    pcm = np.concatenate([load16k(f) for f in files] + [np.zeros(16000, np.float32)])
    path = tmp_path / name
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(s16(pcm))
    return str(path), len(pcm) / 16000


def run_mic(live_server, tmp_path, sid: str, new_server=None,  # type: ignore[no-untyped-def]
            command: str = "mic"):
    """``whisperwire mic`` (or ``stream``, in real time) on the two files through a proxy cut
    6 s in for 3 s (and then led to ``new_server``, if given); its exit status, how many
    connections the proxy took, the file and its length."""
    wav, seconds = joined_wav(tmp_path)
    out = tmp_path / f"{command}.srt"

    async def go():  # type: ignore[no-untyped-def]
        proxy = CuttableProxy(int(live_server.url.rsplit(":", 1)[1]))
        args = Namespace(list_devices=False, url=proxy.url, output=str(out), input_file=wav,
                         device=None, language=None, session=sid, task="transcribe",
                         zh_script=None, token=None, lines=True, file=wav, speed=1.0)
        main = mic.main if command == "mic" else stream.main
        run = asyncio.ensure_future(asyncio.to_thread(main, args))
        await asyncio.sleep(6.0)  # mid-sentence in the first file
        proxy.cut()
        await asyncio.sleep(3.0)  # down for 3 s: the microphone goes on, its audio is held
        proxy.mend(new_server and int(new_server.url.rsplit(":", 1)[1]))
        try:
            return await asyncio.wait_for(run, 120), proxy.accepted
        finally:
            proxy.close()

    status, accepted = asyncio.run(go())
    return status, accepted, out, seconds


def every_word_once(text: str) -> None:
    ref = " ".join(references()[f] for f in FILES)
    assert wer(ref, text) <= 0.12, text
    assert longest_missing(normalize(ref), normalize(text)) <= 2, text
    assert not extra_repeats(normalize(ref), normalize(text)), text


def on_one_clock(out, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """The saved cues run forward and end with the audio."""
    cues = [ln for ln in out.read_text().splitlines() if "-->" in ln]
    starts = [c.split(" --> ")[0] for c in cues]
    assert starts == sorted(starts) and len(cues) >= 3
    last_end = cues[-1].split(" --> ")[1].replace(",", ".").split(":")
    assert float(last_end[2]) + 60 * int(last_end[1]) <= seconds + 1.0


@pytest.mark.timeout(180)
def test_mic_comes_back_after_a_drop_and_loses_no_words(live_server, tmp_path, capfd):
    sid = "mic-blip"
    status, accepted, out, seconds = run_mic(live_server, tmp_path, sid)
    stdout, stderr = capfd.readouterr()
    assert status == 0, stderr
    assert accepted >= 2 and "reconnecting" in stderr, stderr  # it did drop and come back
    printed = stdout.split("\n")
    every_word_once(" ".join(printed))

    # each final the channel has is printed once, in order (those made after the cut too)
    with urllib.request.urlopen(f"{live_server.http}/v1/sessions/{sid}/transcript.json") as r:
        channel = json.loads(r.read())
    # two connections, one stream: the server held it open for the second (no speaker's end
    # at the cut, which would have made finals of a sentence cut in two)
    assert channel["turns"] == []
    assert [ln for ln in printed if ln.strip()] == [f["text"] for f in channel["finals"]]
    on_one_clock(out, seconds)


@pytest.mark.timeout(180)
def test_mic_comes_back_to_a_restarted_server_and_says_again_what_it_lost(live_server, tmp_path,
                                                                        capfd):
    """A server that restarted has a new, empty channel: the words the old one had not made
    final are gone with it, so the audio after the last final shown is sent again."""
    # the old server is gone: its dropped stream is not held for a return (held, it would
    # end 10 s later on the engine both share, its last decodes making the new server's busy)
    engine = live_server.app.state.engine
    with LiveServer(ServerConfig(rejoin_grace_s=0), engine=engine) as old, \
            LiveServer(engine=engine) as restarted:
        status, accepted, out, seconds = run_mic(old, tmp_path, "mic-restart",
                                                 new_server=restarted)
        stdout, stderr = capfd.readouterr()
        assert status == 0, stderr
        assert accepted >= 2 and "reconnecting" in stderr, stderr
        every_word_once(stdout)
        went_on = restarted.app.state.hub.get("mic-restart").finals  # it went on there
        # ... after a second said again as context ('said'): no word of it was said again
        assert went_on and went_on[0].start >= 0.5, went_on[:1]
    on_one_clock(out, seconds)


@pytest.mark.timeout(180)
def test_mic_comes_back_to_its_channel_in_a_new_stream_with_a_second_of_context(live_server,
                                                                                 tmp_path, capfd):
    """The channel goes on, but in a new stream (another server on the same hub, as a Ray
    replica after its replica went; or back after the server's grace): that stream heard
    nothing before, so the in-flight audio goes again after the second before the channel's
    end, as ``said``, and the stream's 0 moves back by it. Before, it began exactly at the
    channel's end, and the word there came clipped ("They to take" for "They all to take")."""
    from whisperwire.server.hub import Hub

    engine, hub = live_server.app.state.engine, Hub()
    with LiveServer(ServerConfig(rejoin_grace_s=0), engine=engine, hub=hub) as old, \
            LiveServer(engine=engine, hub=hub) as other:
        status, accepted, out, seconds = run_mic(old, tmp_path, "mic-moved", new_server=other)
        stdout, stderr = capfd.readouterr()
        assert status == 0, stderr
        assert accepted >= 2 and "reconnecting" in stderr, stderr
        every_word_once(stdout)
        t = hub.get("mic-moved")
        assert t is not None and len(t.turns) == 1, "two streams on one channel"
        first_end = t.finals[t.turns[0] - 1].end
        # the second stream's 0 lies before the first stream's last word's end: it heard that
        # second again (without ``said`` it began at the first stream's end, after it)
        assert t.offset < first_end - 0.3, (t.offset, first_end)
        assert all(a.end <= b.start + 1e-6 for a, b in zip(t.finals, t.finals[1:]))
    on_one_clock(out, seconds)


@pytest.mark.timeout(180)
def test_stream_comes_back_after_a_drop_and_loses_no_words(live_server, tmp_path, capfd):
    """``whisperwire stream FILE`` is the same speaker as ``mic`` (its file paced as a
    microphone would give it). Before, the drop ended it with exit 1 and the rest of the file
    was never sent."""
    sid = "stream-blip"
    status, accepted, out, seconds = run_mic(live_server, tmp_path, sid, command="stream")
    stdout, stderr = capfd.readouterr()
    assert status == 0, stderr
    assert accepted >= 2 and "reconnecting" in stderr, stderr
    printed = stdout.split("\n")
    every_word_once(" ".join(printed))
    with urllib.request.urlopen(f"{live_server.http}/v1/sessions/{sid}/transcript.json") as r:
        channel = json.loads(r.read())
    assert [ln for ln in printed if ln.strip()] == [f["text"] for f in channel["finals"]]
    on_one_clock(out, seconds)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("channels", ["restarted", "shared"])
def test_stream_cut_short_by_a_shutdown_sends_the_rest_to_the_restarted_server(tmp_path, capfd,
                                                                               channels):
    """``whisperwire stream --speed 0``: 50 s of speech sent at once, then the server stops
    with a 1 s drain deadline, far too little to decode it. The stream is cut short
    (``shutdown_incomplete``, 1012 without ``closed``); the command takes that for a drop,
    comes back and sends again what was not made final: every word arrives once. Either to a
    restarted server (a new channel), or to another that goes on with the same channel, as a
    Ray Serve replica does after a scale-down: that channel had ended at all the audio
    received, so the command sent nothing again and the untranscribed speech was lost.
    (Before all this, a shutdown past its grace cancelled the handlers.)"""
    from whisperwire.server.hub import Hub

    files = [f"LJ001-000{i}.wav" for i in range(1, 9)]
    wav, seconds = joined_wav(tmp_path, files, "lj.wav")
    ref = " ".join(references()[f] for f in files)
    hub = Hub() if channels == "shared" else None
    with LiveServer(ServerConfig(drain_timeout_s=1.0, rejoin_grace_s=0), hub=hub) as old, \
            LiveServer(hub=hub) as restarted:
        async def go():  # type: ignore[no-untyped-def]
            proxy = CuttableProxy(old.port)
            args = Namespace(url=proxy.url, output=None, file=wav, language=None,
                             session="cut-short", task="transcribe", zh_script=None,
                             token=None, lines=True, speed=0.0)
            run = asyncio.ensure_future(asyncio.to_thread(stream.main, args))
            for _ in range(300):  # until the server holds 20 s of speech it has not decoded
                await asyncio.sleep(0.1)
                if any(c.session.backlog > 20 for c in old.app.state.server.live):
                    break
            else:
                raise AssertionError("the stream never built a backlog")
            old.server.should_exit = True  # SIGTERM's way in
            await asyncio.to_thread(old.thread.join, 30)
            assert not old.thread.is_alive()
            proxy.cut()
            proxy.mend(restarted.port)
            try:
                return await asyncio.wait_for(run, 180), proxy.accepted
            finally:
                proxy.close()

        status, accepted = asyncio.run(go())
    stdout, stderr = capfd.readouterr()
    assert status == 0, stderr
    assert "shutdown_incomplete" in stderr or "were not transcribed" in stderr, stderr
    assert accepted >= 2, stderr
    # the summary counts the file once, not the audio said again (before: 86.1 s of 51.2)
    assert f"-- {seconds:.1f}s audio in" in stderr, stderr
    text = " ".join(stdout.split("\n"))
    assert wer(ref, text) <= 0.12, text
    assert longest_missing(normalize(ref), normalize(text)) <= 3, text
    assert not extra_repeats(normalize(ref), normalize(text)), text
