"""How fast a live stream's socket is read (server/pace.py): at most ``max_stream_speed`` times
real time after a burst, whatever the audio is. Silence costs no decode, so the backlog limit
never held back a client sending it flat out: one such client was read as fast as the event
loop could go (30,000 s of audio in 10 s), and every other session waited behind it."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from conftest import LiveServer
from websockets.sync.client import connect as ws_connect
from whisperwire.server.app import ServerConfig
from whisperwire.server.pace import IngestPace


def test_a_burst_then_the_pace():
    pace = IngestPace(speed=100.0, burst=60.0)
    assert pace.wait(0.0) == 0.0
    pace.took(50.0, 0.0)
    assert pace.wait(0.0) == 0.0  # 10 s of the burst left
    pace.took(30.0, 0.0)  # one message may go past it: 20 s owed
    assert pace.wait(0.0) == pytest.approx(0.2)
    assert pace.wait(0.1) == pytest.approx(0.1)
    assert pace.wait(0.2) == 0.0
    pace.took(2.0, 0.2)
    assert pace.wait(0.2) == pytest.approx(0.02)


def test_a_quiet_while_refills_the_burst_and_no_more():
    pace = IngestPace(speed=100.0, burst=60.0)
    pace.took(60.0, 0.0)
    pace.took(1.0, 3600.0)  # an hour without audio (a reconnect): the burst, not 360,000 s
    pace.took(59.0, 3600.0)
    assert pace.wait(3600.0) == 0.0
    pace.took(1.0, 3600.0)
    assert pace.wait(3600.0) == pytest.approx(0.01)


def _audio_in(srv: LiveServer) -> float:
    text = httpx.get(srv.http + "/metrics").text
    return next(float(ln.split()[-1]) for ln in text.splitlines()
                if ln.startswith("whisperwire_audio_in_seconds_total"))


@pytest.mark.timeout(120)
def test_silence_sent_flat_out_is_read_at_the_stream_pace():
    """Digital silence in 2 s frames as fast as the socket takes them: the server reads no
    more than the burst and the pace allow (before: over 2,000 times real time)."""
    cfg = ServerConfig()
    frame = bytes(64000)  # 2 s of 16 kHz pcm_s16le silence
    with LiveServer(cfg) as srv, ws_connect(f"{srv.url}/v1/listen", compression=None,
                                            close_timeout=60) as ws:
        stop = threading.Event()

        def send() -> None:
            while not stop.is_set():
                ws.send(frame)

        def read() -> None:
            try:
                while True:
                    ws.recv(timeout=60)
            except Exception:  # noqa: BLE001 - closed
                return

        t0 = time.monotonic()
        sender = threading.Thread(target=send, daemon=True)
        reader = threading.Thread(target=read, daemon=True)
        sender.start()
        reader.start()
        time.sleep(4.0)
        taken = _audio_in(srv)
        elapsed = time.monotonic() - t0
        stop.set()
        sender.join(60)
    assert cfg.stream_burst_s <= taken <= cfg.max_stream_speed * elapsed + cfg.stream_burst_s + 2


@pytest.mark.timeout(120)
def test_one_long_append_is_taken_a_second_at_a_time_at_the_stream_pace():
    """One OpenAI realtime ``append`` of 230 s of silence (14 MiB of base64, under OpenAI's 15
    MiB per event; our own binary frames stop at 1 MiB). The server resampled it and ran the
    VAD over it in one go: every other session (and ``/metrics`` here) waited 0.4 s, and it
    went past the stream's pace. Now it goes in a second at a time, other requests served
    between, at the pace after the burst."""
    import base64
    import json

    cfg = ServerConfig()
    seconds = 230
    event = json.dumps({"type": "input_audio_buffer.append",
                        "audio": base64.b64encode(bytes(seconds * 48000)).decode()})
    with LiveServer(cfg) as srv, ws_connect(f"{srv.url}/v1/realtime?intent=transcription",
                                            additional_headers={"Authorization": "Bearer x"},
                                            compression=None, max_size=None) as ws:
        ws.recv(timeout=60)  # transcription_session.created
        t0 = time.monotonic()
        ws.send(event)
        seen = []
        while time.monotonic() - t0 < 60:
            seen.append((time.monotonic() - t0, _audio_in(srv)))
            if seen[-1][1] >= seconds:
                break
            time.sleep(0.05)
    between = [taken for _, taken in seen if 1.0 < taken < seconds - 1.0]
    assert len(between) >= 5, seen[:3] + seen[-3:]
    assert seen[-1][1] == pytest.approx(seconds)
    # the burst at once, the rest at the pace (a poll's lateness aside)
    assert seen[-1][0] >= (seconds - cfg.stream_burst_s) / cfg.max_stream_speed * 0.8, seen[-3:]


@pytest.mark.timeout(60)
def test_permessage_deflate_is_declined_unless_asked_for():
    """uvicorn inflates every message one socket read holds, whether the app reads them yet or
    not: deflated 14 MiB appends of silence (14 KB each on the wire) came ~18 to a read, 0.55 s
    of the event loop every session shares, for a session paced to one append in 2.3 s
    (bench.flood). So uvicorn under ``serve`` (not Ray Serve's proxy) declines the extension
    that websockets clients, the Deepgram SDK and browsers offer, unless ``ws_deflate`` asks
    for it."""
    offered = {}
    for deflate in (False, True):
        with LiveServer(ServerConfig(ws_deflate=deflate)) as srv, \
                ws_connect(f"{srv.url}/v1/listen", compression="deflate") as ws:
            offered[deflate] = ws.response.headers.get("Sec-WebSocket-Extensions")
            ws.recv(timeout=60)  # ready: the session works either way
    assert offered[False] is None
    assert "permessage-deflate" in (offered[True] or "")
