"""Fan-out to viewers, transcripts over HTTP, and the mic/captions CLIs — real server, model,
speech."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import numpy as np
import pytest
from conftest import SPEECH, load16k, references, run, s16
from subtitle_check import check_cues
from viewing import view
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e



def test_viewers_get_the_same_finals_and_a_slow_one_holds_nobody_up(live_server):
    import websockets

    audio = np.concatenate([load16k("jfk.wav"), load16k("LJ001-0001.wav")])
    sid = "fanout"

    async def go():
        params = wire.ListenParams(session=sid)
        # the speaker starts; viewers join once it is live
        speaker = asyncio.create_task(
            stream_chunks(live_server.url, paced(s16(audio), params, speed=4.0), params))
        t = None
        for _ in range(200):
            t = live_server.app.state.hub.get(sid)
            if t is not None:
                break
            await asyncio.sleep(0.05)
        assert t is not None
        viewers = [asyncio.create_task(view(live_server.url, sid)) for _ in range(4)]
        # a viewer that connects and never reads a byte
        stuck = await websockets.connect(f"{live_server.url}/v1/sessions/{sid}/events",
                                         max_queue=1)
        res = await speaker
        seen = await asyncio.gather(*viewers)
        await stuck.close()
        return res, seen

    res, seen = run(go())
    speaker_finals = [(f.segment, f.text) for f in res.finals]
    assert wer(references()["jfk.wav"] + " " + references()["LJ001-0001.wav"], res.text) < 0.1
    for msgs, code in seen:
        assert code is None, "a viewer stays subscribed after the speaker ends"
        finals = [(m.segment, m.text) for m in msgs if isinstance(m, wire.Final)]
        assert finals == speaker_finals  # every final, in order, none lost
        assert isinstance(msgs[-1], wire.Closed)


def test_late_viewer_gets_the_transcript_then_closed(live_server):
    params = wire.ListenParams(session="late")
    res = run(stream_chunks(live_server.url, paced(s16(load16k("jfk.wav")), params, 0), params))
    msgs, _ = run(view(live_server.url, "late"))
    assert [m.text for m in msgs if isinstance(m, wire.Final)] == [f.text for f in res.finals]
    assert isinstance(msgs[-1], wire.Closed)


def test_unknown_session_viewer_gets_error(live_server):
    def counted(code: str) -> float:
        page = httpx.get(f"{live_server.http}/metrics").text
        return sum(float(line.split()[-1]) for line in page.splitlines()
                   if line.startswith(f'whisperwire_errors_total{{code="{code}"'))

    before = counted("unknown_session"), counted("bad_session")
    msgs, code = run(view(live_server.url, "nobody-here"))
    assert isinstance(msgs[0], wire.Error) and msgs[0].code == "unknown_session"
    assert code == 1008
    msgs, code = run(view(live_server.url, "x" * 65))
    assert isinstance(msgs[0], wire.Error) and msgs[0].code == "bad_session"
    # a viewer's refusal is counted, as a speaker's is; but not a session that has not
    # started, which a waiting page or overlay asks for every 3 s
    assert (counted("unknown_session"), counted("bad_session")) == (before[0], before[1] + 1)


def test_transcript_endpoints_on_real_speech(live_server):
    files = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav"]
    audio = np.concatenate([load16k(f) for f in files])
    params = wire.ListenParams(session="tr")
    res = run(stream_chunks(live_server.url, paced(s16(audio), params, 0), params))
    base = f"{live_server.http}/v1/sessions/tr/transcript"
    srt = httpx.get(base + ".srt")
    assert srt.status_code == 200
    cues = check_cues(srt.text, vtt=False)
    assert " ".join(" ".join(c[2]) for c in cues).split() == res.text.split()
    vtt = httpx.get(base + ".vtt")
    assert vtt.headers["content-type"].startswith("text/vtt")
    check_cues(vtt.text, vtt=True)
    assert httpx.get(base + ".txt").text.split() == res.text.split()
    d = httpx.get(base + ".json").json()
    assert d["text"] == res.text and not d["live"]
    assert httpx.get(f"{live_server.http}/v1/sessions/none/transcript.srt").status_code == 404
    assert httpx.get(base + ".doc").status_code == 404


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "whisperwire.server", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_mic_cli_with_file_backed_source_and_captions_cli(live_server, tmp_path):
    """The mic command through its real capture path, the microphone replaced by a file source
    with sounddevice's interface (this machine has no sound card); a captions viewer alongside."""
    out = tmp_path / "mic.srt"
    viewer_out = tmp_path / "viewer.txt"
    viewer = subprocess.Popen(
        [sys.executable, "-m", "whisperwire.server", "captions", "mic-cli", "--url", live_server.url,
         "--output", str(viewer_out), "--once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mic = _cli("mic", "--url", live_server.url, "--session", "mic-cli",
               "--input-file", str(SPEECH / "jfk.wav"), "--output", str(out))
    assert mic.returncode == 0, mic.stderr
    assert wer(references()["jfk.wav"], mic.stdout) <= 0.15
    check_cues(out.read_text(), vtt=False)
    vout, verr = viewer.communicate(timeout=60)
    assert viewer.returncode == 0, verr
    assert vout.split() == mic.stdout.split()
    assert viewer_out.read_text().split() == mic.stdout.split()


def test_stream_cli_output_and_unreachable_server(live_server, tmp_path):
    out = tmp_path / "jfk.vtt"
    r = _cli("stream", str(SPEECH / "jfk.wav"), "--url", live_server.url, "--speed", "0",
             "--output", str(out))
    assert r.returncode == 0, r.stderr
    check_cues(out.read_text(), vtt=True)
    bad = _cli("stream", str(SPEECH / "jfk.wav"), "--url", "ws://127.0.0.1:9", "--speed", "0")
    assert bad.returncode == 2 and "cannot reach the server" in bad.stderr
    bad = _cli("captions", "x", "--url", "ws://127.0.0.1:9")
    assert bad.returncode == 2 and "cannot reach the server" in bad.stderr


def test_mic_cli_says_what_is_missing():
    r = _cli("mic", "--device", "no-such-device-xyz", "--url", "ws://127.0.0.1:9")
    assert r.returncode == 2
    assert "PortAudio" in r.stderr or "no input device" in r.stderr


@pytest.mark.timeout(60)
def test_a_frozen_viewer_is_dropped_and_frees_its_slot(engine):
    """A viewer whose connection silently died (a laptop asleep, an OBS box unplugged, a
    frozen process) never reads and never answers a ping. It was kept until the channel
    expired (an hour after the speaker), holding one of ``max_viewers``; now a pong that
    ``viewer_pong_timeout_s`` late drops it. (Speakers keep no such deadline: under
    backpressure their pongs wait behind their own audio, see serving.py.)"""
    import base64
    import os
    import socket
    import time

    from conftest import LiveServer
    from websockets.sync.client import connect as ws_connect
    from whisperwire.server.app import ServerConfig

    def admitted(url: str) -> bool:
        with ws_connect(f"{url}/v1/sessions/frozen/events", open_timeout=10) as v:
            try:
                first = wire.decode(v.recv(timeout=2))
            except TimeoutError:
                return True  # admitted, and the channel is quiet
            return not (first.type == "error" and first.code == "too_many_viewers")

    cfg = ServerConfig(max_viewers=1, viewer_pong_timeout_s=1.0)
    with LiveServer(cfg, engine, ws_ping_interval=1.0) as srv:
        with ws_connect(f"{srv.url}/v1/listen?session=frozen", open_timeout=10) as speaker:
            assert wire.decode(speaker.recv(timeout=10)).type == "ready"
            frozen = socket.create_connection(("127.0.0.1", srv.port))
            key = base64.b64encode(os.urandom(16)).decode()
            frozen.sendall((f"GET /v1/sessions/frozen/events HTTP/1.1\r\nHost: x\r\n"
                            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
                            f"{key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            assert frozen.recv(4096).startswith(b"HTTP/1.1 101")  # then it never reads again
            assert not admitted(srv.url), "the frozen viewer holds the one slot"
            deadline = time.monotonic() + 15  # a ping interval and the pong deadline, and more
            while not admitted(srv.url):
                assert time.monotonic() < deadline, "the frozen viewer was never dropped"
                time.sleep(0.5)
            frozen.close()
