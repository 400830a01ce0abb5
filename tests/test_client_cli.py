"""The command-line clients at their edges: every failure a user can meet ends with a sentence
and a non-zero status, never a traceback. Real server, real model, real speech."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import wave
from argparse import Namespace

import numpy as np
import pytest
from conftest import LiveServer, ROOT, SPEECH, load16k, s16
from whisperwire.client import captions, mic
from whisperwire.client.connect import ClientFault, check_output, ws_url
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.wer import normalize

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

JFK = str(SPEECH / "jfk.wav")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "whisperwire.server", *args],
                          capture_output=True, text=True, timeout=timeout)


def first_final(server: LiveServer, session: str, within_s: float = 60) -> None:
    """Wait until ``session`` on ``server`` has made its first final (a stream mid-way)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        t = server.app.state.hub.get(session)
        if t is not None and t.finals:
            return
        time.sleep(0.05)


def said_plainly(r: subprocess.CompletedProcess, *words: str) -> None:
    """Non-zero, one sentence on stderr naming ``words``, no traceback."""
    assert r.returncode != 0, r.stderr
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr



# -- before connecting: files, URLs, --output --------------------------------------------------

@pytest.mark.parametrize("given, want", [
    ("ws://h:1", "ws://h:1"), ("wss://h:1/x", "wss://h:1/x"),
    ("h:8765", "ws://h:8765"), ("127.0.0.1:8765/", "ws://127.0.0.1:8765/"),
    # an endpoint pasted for the server's address: it was asked for as .../v1/listen/v1/listen,
    # and the server's 403 was read as a wrong token; a proxy's prefix stays
    ("ws://h:1/v1/listen", "ws://h:1"), ("ws://h:1/v1", "ws://h:1"),
    ("wss://h/ww/v1/listen/", "wss://h/ww"), ("ws://h:1/v1/sessions/a/events", "ws://h:1"),
    ("wss://h/api/v1", "wss://h/api/v1"),  # (a proxy's prefix that ends in /v1 stays)
])
def test_urls_accept_websocket_urls_and_bare_hosts(given, want):
    assert ws_url(given) == want


@pytest.mark.parametrize("given, hint", [("http://h:1", "--url ws://h:1"),
                                         ("https://h/x", "--url wss://h/x")])
def test_http_urls_name_the_websocket_address(given, hint):
    with pytest.raises(ClientFault, match=hint):
        ws_url(given)


def test_the_deepgram_endpoint_is_not_taken_for_the_server():
    with pytest.raises(ClientFault, match="Deepgram-compatible endpoint.*--url ws://h:1$"):
        ws_url("ws://h:1/deepgram/v1/listen")


@pytest.mark.parametrize("bad", ["ftp://h:1", "ws://", "http:///x", "ws://127.0.0.1:99999",
                                 "ws://127.0.0.1:notaport", "ws://127.0.0.1:0"])
def test_other_urls_say_what_is_expected(bad):
    with pytest.raises(ClientFault, match="expected ws://HOST:PORT"):
        ws_url(bad)


def test_output_is_checked_before_anything_is_sent(tmp_path):
    check_output(str(tmp_path / "a.srt"))
    with pytest.raises(ClientFault, match="unsupported format .docx"):
        check_output(str(tmp_path / "a.docx"))
    with pytest.raises(ClientFault, match="no such directory"):
        check_output(str(tmp_path / "missing" / "a.srt"))
    with pytest.raises(ClientFault, match="is a directory"):
        os.mkdir(tmp_path / "d.txt")
        check_output(str(tmp_path / "d.txt"))
    with pytest.raises(ClientFault, match="is a directory"):  # (was: "unsupported format (none)")
        check_output(str(tmp_path))


def test_stream_on_a_missing_or_non_audio_file_says_so(live_server, tmp_path):
    from PIL import Image

    png = tmp_path / "img.png"
    Image.new("RGB", (8, 8)).save(png)
    said_plainly(cli("stream", str(tmp_path / "nope.wav"), "--url", live_server.url),
                 "no such file")
    r = cli("stream", str(tmp_path / "nope.wav"), "--url", live_server.url)
    assert "cannot reach" not in r.stderr
    said_plainly(cli("stream", str(ROOT / "README.md"), "--url", live_server.url),
                 "README.md is not an audio")
    said_plainly(cli("stream", str(png), "--url", live_server.url), "has no audio")
    # a WAV header and no samples: refused as the HTTP dialects refuse it, not streamed as
    # nothing ("no captions", status 0)
    empty = tmp_path / "empty.wav"
    with wave.open(str(empty), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    r = cli("stream", str(empty), "--url", live_server.url)
    said_plainly(r, "empty.wav holds no audio samples")
    assert r.returncode == 2, r.returncode


@pytest.mark.parametrize("speed", ["-1", "nan", "inf", "fast"])
def test_stream_refuses_a_speed_that_is_no_pace(speed):
    r = cli("stream", JFK, "--url", "ws://127.0.0.1:9", "--speed", speed)
    said_plainly(r, "--speed")
    assert r.returncode == 2 and "cannot reach" not in r.stderr, r.stderr


def test_stream_refuses_a_bad_output_before_streaming(live_server, tmp_path):
    t0 = time.monotonic()
    said_plainly(cli("stream", JFK, "--url", live_server.url,
                     "--output", str(tmp_path / "no" / "x.srt")), "no such directory")
    said_plainly(cli("stream", JFK, "--url", live_server.url, "--output", str(tmp_path / "x.docx")),
                 "unsupported format .docx")
    assert time.monotonic() - t0 < 11 * 2, "refused up front, not after 11 s of streaming"
    assert not (tmp_path / "x.docx").exists()


def test_stream_says_its_session_and_saves_it_with_the_finals(live_server, tmp_path):
    """Viewers need the speaker's session id (``captions ID``, ``/?view=ID``, the overlay):
    ``stream`` and ``mic`` said it nowhere, and their .json had ``"session": ""``."""
    out = tmp_path / "said.json"
    r = cli("stream", JFK, "--url", live_server.url, "--speed", "0", "--output", str(out))
    assert r.returncode == 0, r.stderr
    saved = json.loads(out.read_text())
    assert saved["session"] and saved["finals"]
    # (with the server's --url: a hint without it, pasted, looked for the default server)
    assert f"session {saved['session']} (viewers: whisperwire captions {saved['session']} " \
        f"--url {live_server.url})" in r.stderr
    for _ in range(2):  # the second continues the channel
        r = cli("stream", JFK, "--url", live_server.url, "--speed", "0", "--session",
                "named-cli", "--output", str(out))
        assert json.loads(out.read_text())["session"] == "named-cli"
        assert r.stderr.count("session named-cli") == 1
        assert "-- 11.0s audio in" in r.stderr, r.stderr  # (what it sent: not the channel's 22)


def test_stream_refuses_an_http_url_and_a_foreign_one(live_server):
    said_plainly(cli("stream", JFK, "--url", live_server.http, "--speed", "0"),
                 f"--url {live_server.url}")
    said_plainly(cli("stream", JFK, "--url", "ftp://127.0.0.1:1", "--speed", "0"), "ws://HOST:PORT")
    said_plainly(cli("stream", JFK, "--url", "ws://127.0.0.1:9", "--speed", "0"),
                 "cannot reach the server")


def test_a_token_pasted_with_its_line_break_is_taken_and_a_broken_one_is_said(live_server):
    """A token copied from a file with its newline was sent as it was: the HTTP library refused
    the header, and the client said the server "did not answer as a WhisperWire server"."""
    r = cli("stream", JFK, "--url", live_server.url, "--speed", "0", "--token", "any-token\n")
    assert r.returncode == 0, r.stderr  # (the live server wants no token: one is harmless)
    for cmd in (("stream", JFK), ("captions", "some-session")):
        r = cli(*cmd, "--url", live_server.url, "--token", "two\nlines")
        said_plainly(r, "--token", "line break")
        assert "did not answer" not in r.stderr


def test_captions_of_what_cannot_be_a_session_id_says_so(live_server):
    """'a/b' reached no route on the server and was told 'HTTP 403, forbidden (check
    --token)': the wrong cause."""
    said_plainly(cli("captions", "a/b", "--url", live_server.url), "cannot be a session id")


# -- refusals and endings from the server ------------------------------------------------------

def test_a_wrong_language_is_a_sentence_every_time(live_server):
    for _ in range(3):
        r = cli("stream", JFK, "--url", live_server.url, "--speed", "0", "--language", "de")
        said_plainly(r, "does not know language 'de'", "bad_language")
        assert "nan" not in r.stderr
    # (the hint said "or auto": an English-only model "detects" English in any speech)
    assert "English-only" in r.stderr and "--model base" in r.stderr and "auto" not in r.stderr


def test_a_code_no_whisper_model_knows_is_not_sent_to_the_multilingual_model(live_server):
    """'xx' on tiny.en was told that a multilingual model (--model base) knows it; base
    refuses it too."""
    r = cli("stream", JFK, "--url", live_server.url, "--speed", "0", "--language", "xx")
    said_plainly(r, "does not know language 'xx'", "no Whisper model")
    assert "--model base" not in r.stderr


def test_a_second_speaker_under_a_live_id_is_told_why(live_server):
    async def first():
        p = wire.ListenParams(session="taken-cli")
        return await stream_chunks(live_server.url, paced(s16(load16k(JFK)), p, 1.0), p)

    async def go():
        speaker = asyncio.create_task(first())
        for _ in range(200):
            if live_server.app.state.hub.get("taken-cli") is not None:
                break
            await asyncio.sleep(0.05)
        r = await asyncio.to_thread(cli, "stream", JFK, "--url", live_server.url, "--speed", "0",
                                    "--session", "taken-cli")
        await speaker
        return r

    said_plainly(asyncio.run(go()), "session_taken", "choose another --session")


def test_no_captions_is_said_without_nan(live_server, tmp_path):
    path = tmp_path / "silence.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.zeros(16000 * 2, "<i2").tobytes())
    r = cli("stream", str(path), "--url", live_server.url, "--speed", "0")
    assert r.returncode == 0, r.stderr
    assert "nan" not in r.stderr and "no captions" in r.stderr


def test_the_server_stopping_mid_stream_is_waited_for_and_ctrl_c_twice_ends_it(live_server,
                                                                                tmp_path):
    """A server stopping mid-file may be restarting: ``stream`` says so and tries again, as
    ``mic`` does (tests/test_mic_reconnect.py). Ctrl-C twice ends it at once, with a sentence
    and the finals it had saved."""
    import signal

    out = tmp_path / "partial.txt"
    with LiveServer(engine=live_server.app.state.engine) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "whisperwire.server", "stream", str(SPEECH / "LJ001-0001.wav"),
             "--url", srv.url, "--session", "stopping", "--output", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first_final(srv, "stopping")
        srv.server.should_exit = True  # what SIGTERM does: finalise every session, then stop
    time.sleep(2.0)  # (down, and the client trying again)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    said_plainly(r, "shutting down; reconnecting", "saved")
    assert out.read_text().split() == stdout.split() and stdout.split()


def test_stream_stopped_by_sigterm_still_saves_its_output(live_server, tmp_path):
    """``timeout 8 whisperwire stream talk.wav --output talk.srt`` (or ``docker stop``): the
    client died at once and the file was never written; now SIGTERM stops the sending as
    Ctrl-C does, and the finals of what was sent are saved."""
    import signal

    out = tmp_path / "term.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "whisperwire.server", "stream", str(SPEECH / "real" / "en-05.wav"),
         "--url", live_server.url, "--session", "terminated", "--output", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_final(live_server, "terminated")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert "saved" in stderr and out.read_text().split() == stdout.split() and stdout.split()


def test_unknown_message_types_are_skipped(tmp_path):
    """A newer server may send types this client does not know; protocol v1 says skip them."""
    import websockets

    script = [{"type": "ready", "session": "s", "model": "m", "device": "cpu",
               "compute_type": "int8", "sample_rate": 16000},
              {"type": "something_new", "x": 1},
              {"type": "final", "segment": 0, "text": "Hello there.", "start": 0.0, "end": 1.0,
               "words": [], "eou": True},
              {"type": "closed", "reason": "client_close", "audio_seconds": 1.0}]

    async def speaker_server(ws):
        async for _ in ws:
            for m in script:
                await ws.send(json.dumps(m))
            await ws.close()
            return

    async def viewer_server(ws):
        for m in script[1:]:
            await ws.send(json.dumps(m))
        await ws.close()

    async def go():
        async with websockets.serve(speaker_server, "127.0.0.1", 0) as s:
            url = f"ws://127.0.0.1:{s.sockets[0].getsockname()[1]}"
            p = wire.ListenParams()
            res = await stream_chunks(url, paced(s16(np.zeros(1600)), p, 0), p)
        async with websockets.serve(viewer_server, "127.0.0.1", 0) as s:
            url = f"ws://127.0.0.1:{s.sockets[0].getsockname()[1]}"
            seen = await captions.watch(url, "s", lambda m: None)
        return res, seen

    res, seen = asyncio.run(go())
    assert [type(m) for _, _, m in res.messages] == [wire.Ready, wire.Final, wire.Closed]
    assert [type(m) for m in seen] == [wire.Final, wire.Closed]


# -- the microphone -----------------------------------------------------------------------------

LAPTOP = [{"name": "HDA Intel PCH: ALC257 Analog", "max_input_channels": 2,
           "max_output_channels": 2},
          {"name": "HDMI 0", "max_input_channels": 0, "max_output_channels": 8}]
SPEAKERS_ONLY = [{"name": "HDMI 0", "max_input_channels": 0, "max_output_channels": 8}]


def test_device_listing_says_when_nothing_can_record():
    text, status = mic.describe_devices(LAPTOP)
    assert status == 0 and "ALC257" in text and "HDMI" not in text
    for devices in ([], SPEAKERS_ONLY):
        text, status = mic.describe_devices(devices)
        assert status == 1 and text.startswith("no input device")
        assert "--input-file" in text and "whisperwire stream" in text
        assert ". plug" not in text, "one sentence, as the mic's own refusal"


def test_mic_on_this_machine_says_what_it_has():
    """The real PortAudio here: the listing and the mic agree with what it sees."""
    r = cli("mic", "--list-devices")
    try:
        import sounddevice as sd
    except OSError:
        said_plainly(r, "PortAudio is not installed")
        return
    inputs = mic.input_devices(list(sd.query_devices()))
    if inputs:
        assert r.returncode == 0 and inputs[0][1] in r.stdout
    else:
        said_plainly(r, "no input device")
        assert r.stderr.startswith("whisperwire: no input device"), r.stderr
        said_plainly(cli("mic", "--url", "ws://127.0.0.1:9"), "no input device", "--input-file")


def test_mic_refuses_a_device_and_an_input_file_at_once():
    """Both were taken, and the device was ignored without a word: the user who named a
    microphone heard captions of the file."""
    said_plainly(cli("mic", "--url", "ws://127.0.0.1:9", "--input-file", JFK, "--device", "1"),
                 "--device", "--input-file")


def test_captions_once_stops_at_the_first_closed_and_saves(live_server, tmp_path):
    async def speak():
        p = wire.ListenParams(session="once-cli")
        return await stream_chunks(live_server.url, paced(s16(load16k(JFK)), p, 0), p)

    res = asyncio.run(speak())
    out = tmp_path / "v.txt"
    args = Namespace(url=live_server.url, session="once-cli", token=None, output=str(out),
                     once=True, lines=False)
    assert captions.main(args) == 0
    assert out.read_text().split() == res.text.split()


def test_captions_follows_a_channel_across_speaker_restarts(live_server):
    """By default the viewer keeps following: the second speaker's words arrive on the same
    socket after the first speaker's ``closed``."""
    first, second = load16k(JFK), load16k("LJ001-0002.wav")

    async def go():
        stop = asyncio.Event()
        seen: list[wire.Message] = []
        viewer = asyncio.create_task(captions.watch_when_live(
            live_server.url, "follow-cli", seen.append, follow=True, stop=stop, retry_s=0.2))
        results = []
        for audio in (first, second):
            p = wire.ListenParams(session="follow-cli")
            results.append(await stream_chunks(live_server.url, paced(s16(audio), p, 0), p))
        for _ in range(100):  # the second speaker's last final reaches the viewer
            if sum(isinstance(m, wire.Closed) for m in seen) >= 2:
                break
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(viewer, 10)
        return results, seen

    results, seen = asyncio.run(go())
    texts = " ".join(m.text for m in seen if isinstance(m, wire.Final))
    assert texts.split() == (results[0].text + " " + results[1].text).split()


def test_captions_shows_a_restarted_server_s_channel_from_its_first_final(live_server):
    """The server behind a viewer is killed and started again; a speaker comes back to the new
    one under the same id. The new channel numbers its finals from 0, and they reached the
    viewer first as the replay it gets on joining: taken for replays of the old life (whose
    count was higher), none was shown."""
    from tcp_proxy import CuttableProxy

    engine = live_server.app.state.engine
    speakers = [load16k(JFK), load16k(str(SPEECH / "LJ001-0002.wav")),
                load16k(str(SPEECH / "LJ001-0003.wav"))]

    async def speak(url: str, audio: np.ndarray) -> str:
        p = wire.ListenParams(session="lives-cli")
        return (await stream_chunks(url, paced(s16(audio), p, 0), p)).text

    def finals() -> list[wire.Final]:
        return [m for m in seen if isinstance(m, wire.Final)]

    async def until(done) -> None:  # type: ignore[no-untyped-def]
        for _ in range(300):
            if done():
                return
            await asyncio.sleep(0.1)

    with LiveServer(engine=engine) as old, LiveServer(engine=engine) as restarted:
        proxy = CuttableProxy(old.port)
        seen: list[wire.Message] = []

        async def go() -> list[str]:
            stop = asyncio.Event()
            viewer = asyncio.create_task(captions.follow_channel(
                proxy.url, "lives-cli", seen.append, stop=stop, waits_s=(0.2,) * 20))
            said = [await speak(old.url, a) for a in speakers[:2]]  # two speakers: one channel
            await until(lambda: sum(isinstance(m, wire.Closed) for m in seen) >= 2)
            proxy.cut()
            proxy.mend(restarted.port)
            said.append(await speak(restarted.url, speakers[2]))
            await until(lambda: len(" ".join(f.text for f in finals()).split())
                        >= len(" ".join(said).split()))
            stop.set()
            await asyncio.wait_for(viewer, 30)  # (the proxy answers the close late)
            return said

        try:
            said = asyncio.run(go())
        finally:
            proxy.close()
    old_life = [f.segment for f in finals() if f.segment > 0]
    assert old_life, "the old life's count passed 0"
    assert " ".join(f.text for f in finals()).split() == " ".join(said).split()
    assert finals()[-1].segment == 0  # (the new life's own first final)
    # ... on a clock that goes on after the old life's (it started at 0 again: a saved file
    # ran back in time, with a cue of no length where the lives met)
    ends = [(f.start, f.end) for f in finals()]
    assert all(b[0] >= a[1] - 0.01 for a, b in zip(ends, ends[1:])), ends


def test_captions_puts_a_restarted_servers_channel_where_its_speaker_does(live_server):
    """A speaker back on a restarted server sends the second before its last final again
    (``said``): the new channel's 0 lies that second before where the old one was final to,
    and the speaker's own file puts it there. The viewer's file put it at that end, so every
    cue after a restart ran 1 s late. The server now tells viewers (``channel.said``), also
    one that joined before the speaker said it."""
    import websockets
    from tcp_proxy import CuttableProxy

    engine = live_server.app.state.engine
    seen: list[wire.Message] = []

    async def speak(url: str, audio: np.ndarray, said: float | None = None) -> None:
        async with websockets.connect(f"{url}/v1/listen?session=said-cli") as ws:
            assert json.loads(await ws.recv())["type"] == "ready"
            if said is not None:
                await ws.send(json.dumps({"type": "said", "seconds": said}))
            await ws.send(s16(audio))
            await ws.send(json.dumps({"type": "close"}))
            async for m in ws:
                if json.loads(m)["type"] == "closed":
                    break

    async def until(done) -> None:  # type: ignore[no-untyped-def]
        for _ in range(300):
            if done():
                return
            await asyncio.sleep(0.1)

    def finals() -> list[wire.Final]:
        return [m for m in seen if isinstance(m, wire.Final)]

    with LiveServer(engine=engine) as old, LiveServer(engine=engine) as restarted:
        proxy = CuttableProxy(old.port)

        async def go() -> None:
            stop = asyncio.Event()
            viewer = asyncio.create_task(captions.follow_channel(
                proxy.url, "said-cli", seen.append, stop=stop, waits_s=(0.2,) * 20))
            await speak(old.url, load16k(JFK))
            await until(lambda: any(isinstance(m, wire.Closed) for m in seen))
            proxy.cut()
            proxy.mend(restarted.port)
            await asyncio.sleep(1.0)  # (the viewer is back, waiting for the id to go live)
            await speak(restarted.url, load16k(str(SPEECH / "LJ001-0002.wav")), said=1.0)
            await until(lambda: restarted.app.state.hub.get("said-cli") is not None and len(
                finals()) > len(old.app.state.hub.get("said-cli").finals))
            await asyncio.sleep(0.5)
            stop.set()
            await asyncio.wait_for(viewer, 30)

        try:
            asyncio.run(go())
        finally:
            proxy.close()
        before = old.app.state.hub.get("said-cli").finals
        after = restarted.app.state.hub.get("said-cli").finals
    assert after and after[0].start >= 1.0, after[:1]
    shown = finals()[len(before):]
    assert [f.text for f in shown] == [f.text for f in after]
    # the new life's 0 is 1 s before where the old one was final to
    for f, g in zip(shown, after):
        assert f.start == pytest.approx(g.start + before[-1].end - 1.0, abs=0.002), (f, g)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_captions_follows_until_ctrl_c_and_then_saves(live_server, tmp_path, sig):
    """SIGTERM and SIGHUP (``timeout``, ``docker stop``, systemd, a closed terminal) stop it
    as Ctrl-C does: they killed it at once, and ``--output`` was never written."""
    import signal

    p = wire.ListenParams(session=f"ctrl-c-cli-{sig}")
    res = asyncio.run(stream_chunks(live_server.url, paced(s16(load16k(JFK)), p, 0), p))
    out = tmp_path / "viewer.srt"
    # (started as from a terminal: SIGHUP not ignored, whatever the test run inherited, as
    # under ``nohup``, which keeps the command running through a hangup by design)
    viewer = subprocess.Popen(
        [sys.executable, "-m", "whisperwire.server", "captions", p.session, "--url",
         live_server.url, "--output", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    channel = live_server.app.state.hub.get(p.session)
    deadline = time.monotonic() + 60
    while not channel.viewers and time.monotonic() < deadline:  # it is connected and following
        time.sleep(0.05)
    time.sleep(0.5)
    assert viewer.poll() is None, "still following after the speaker stopped"
    viewer.send_signal(getattr(signal, sig))
    stdout, stderr = viewer.communicate(timeout=30)
    assert viewer.returncode == 0 and "Traceback" not in stderr, stderr
    assert stdout.split() == res.text.split()
    assert "saved" in stderr and "-->" in out.read_text()


def test_captions_in_a_terminal_that_closes_still_saves_and_nohup_keeps_it_running(
        live_server, tmp_path):
    """A closed terminal: SIGHUP, then every write to it fails (EIO), and the first one ended
    the command with "cannot reach the server: Input/output error" and no file. Under
    ``nohup`` (SIGHUP ignored) a hangup must not stop it at all."""
    import pty
    import select
    import signal

    p = wire.ListenParams(session="hup-cli")
    res = asyncio.run(stream_chunks(live_server.url, paced(s16(load16k(JFK)), p, 0), p))
    out = tmp_path / "hup.srt"
    pid, fd = pty.fork()
    if pid == 0:  # the command, on the terminal's side (stderr to a file, read below)
        err = os.open(tmp_path / "err.txt", os.O_WRONLY | os.O_CREAT)
        os.dup2(err, 2)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # (a terminal's, whatever ran the tests)
        os.execv(sys.executable, [sys.executable, "-m", "whisperwire.server", "captions",
                                  "hup-cli", "--url", live_server.url, "--output", str(out)])
    shown, deadline = b"", time.monotonic() + 60
    while b"country" not in shown and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            shown += os.read(fd, 4096)
    assert b"country" in shown, shown
    os.close(fd)  # the terminal window closes
    deadline = time.monotonic() + 30
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    err = (tmp_path / "err.txt").read_text()
    assert done[0] and os.WIFEXITED(done[1]) and os.WEXITSTATUS(done[1]) == 0, err
    assert "saved" in err and "-->" in out.read_text(), err
    assert normalize(" ".join(line for line in out.read_text().splitlines()
                              if line and "-->" not in line and not line.isdigit())) \
        == normalize(res.text)
    # nohup: SIGHUP was ignored when it started, and stays so
    viewer = subprocess.Popen(
        [sys.executable, "-m", "whisperwire.server", "captions", "hup-cli", "--url",
         live_server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    time.sleep(3.0)
    viewer.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    assert viewer.poll() is None, "a hangup under nohup stopped it"
    viewer.send_signal(signal.SIGINT)
    viewer.communicate(timeout=30)


class DroppingViewerServer:
    """A server that plays a viewer's channel and drops connections, as a Ray replica that is
    scaled down or lost does while the session goes on elsewhere: ``plays[i]`` is what the
    i-th connection gets (finals by segment, "closed"), then the socket drops; once they run
    out it stops listening. (The server is the stand-in here; the CLI is what is tested.)"""

    def __init__(self, plays):
        self.plays, self.connections = list(plays), 0

    async def handler(self, ws):
        self.connections += 1
        play = self.plays.pop(0) if self.plays else []
        for item in play:
            if item == "closed":
                await ws.send(wire.encode(wire.Closed("client_close", 3.0)))
            else:
                w = wire.Word(f" w{item}", item, item + 0.5, 0.9)
                await ws.send(wire.encode(wire.Final(item, f"w{item}", item, item + 0.5, (w,))))
        ws.transport.abort()  # no close frame: the connection is lost
        if not self.plays:
            self.server.close()

    async def __aenter__(self):
        import websockets

        self.server = await websockets.serve(self.handler, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()


@pytest.mark.timeout(60)
def test_captions_reconnects_when_the_connection_drops_and_prints_each_final_once():
    """A viewer whose replica went away exited 0 without a word while the session went on
    elsewhere (Ray scale-down, a lost replica). It now opens the channel again and skips the
    finals the server replays to a joining viewer."""
    async def go():
        async with DroppingViewerServer([[0, 1], [0, 1, 2, "closed"]]) as srv:
            seen = []
            await captions.follow_channel(srv.url, "s", seen.append, follow=False,
                                          waits_s=(0.05, 0.05))
            return srv.connections, seen

    connections, seen = asyncio.run(go())
    assert connections == 2
    assert [m.segment for m in seen if isinstance(m, wire.Final)] == [0, 1, 2]
    assert isinstance(seen[-1], wire.Closed)


@pytest.mark.timeout(60)
def test_captions_says_so_and_fails_when_the_server_does_not_come_back(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setattr(captions, "RETRIES_S", (0.05, 0.05))
    out = tmp_path / "t.txt"

    async def serve_then_main():
        async with DroppingViewerServer([[0, 1]]) as srv:
            args = Namespace(url=srv.url, session="s", token=None, output=str(out),
                                      once=False, lines=False)
            return await asyncio.to_thread(captions.main, args)

    assert asyncio.run(serve_then_main()) == 1
    err = capsys.readouterr().err
    assert "could not reach it again" in err or "kept dropping" in err, err
    assert out.read_text().split() == ["w0", "w1"]  # what came before the loss is saved


@pytest.mark.timeout(120)
def test_a_second_speakers_final_delays_count_on_the_channels_clock(live_server):
    """``stream --session NAME`` on a channel an earlier speaker used: its finals count on the
    channel's clock, from the first speaker's end, and the summary compared their ends with
    the file's own times (a Mandarin streamer's second speaker: "final delay ... median
    -5.34s")."""
    import re

    from conftest import SPEECH

    path = str(SPEECH / "jfk.wav")
    for speed in ("0", "2"):
        r = cli("stream", path, "--url", live_server.url, "--session", "delays", "--speed", speed)
        assert r.returncode == 0, r.stderr
    m = re.search(r"final delay after audio sent: median (-?[0-9.]+)s", r.stderr)
    assert m and 0.0 < float(m.group(1)) < 5.0, r.stderr
