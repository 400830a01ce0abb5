"""Deepgram v1 through the official deepgram-sdk, unchanged but for its base URLs: live at 2x
real time (interim results, Finalize, speech_final, CloseStream then Metadata, a viewer on the
session), pre-recorded files, and errors at connect. Real server, model and speech."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest
from conftest import SPEECH, LiveServer, load16k, references, s16
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from deepgram.listen.v1.types import ListenV1Configure
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import connect as ws_connect
from whisperwire.server.app import ServerConfig
from whisperwire.server.auth import AuthConfig
from whisperwire.server.wer import normalize, wer

pytestmark = pytest.mark.e2e

CLIPS = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav"]


def client(srv, key: str = "any") -> DeepgramClient:
    env = DeepgramClientEnvironment(base=f"{srv.http}/deepgram", production=f"{srv.url}/deepgram",
                                    agent=f"{srv.url}/agent", agent_rest=f"{srv.http}/agent")
    return DeepgramClient(api_key=key, environment=env)


def status(exc: Exception) -> int:
    """The HTTP status of a refused connect. deepgram-sdk 7.16 turns it into ApiError only
    under websockets < 14 (its compat shim catches the legacy InvalidStatusCode); with
    websockets 14+ the handshake's InvalidStatus reaches the caller as it is."""
    return exc.status_code if isinstance(exc, ApiError) else exc.response.status_code


def speech(names: list[str], gap_s: float = 0.8) -> tuple[np.ndarray, str]:
    gap = np.zeros(int(gap_s * 16000), np.float32)
    refs = references()
    return (np.concatenate([p for n in names for p in (load16k(n), gap)]),
            " ".join(refs[n] for n in names))


def watch(http_url: str, sid: str, seen: list) -> threading.Thread:
    """A viewer of channel ``sid`` (our protocol), until the speaker's ``closed``."""
    def run() -> None:
        with ws_connect(f"{http_url.replace('http', 'ws')}/v1/sessions/{sid}/events",
                        open_timeout=10) as ws:
            while True:
                msg = json.loads(ws.recv(timeout=60))
                seen.append(msg)
                if msg["type"] == "closed":
                    return
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.timeout(180)
def test_live_at_twice_real_time(live_server):
    audio, ref = speech(CLIPS)
    pcm = s16(audio)
    chunk = 3200  # 100 ms of 16 kHz linear16, sent every 50 ms
    finalize_at = (len(pcm) // 3) // chunk * chunk
    msgs: list = []
    seen: list = []
    viewer = None
    with client(live_server).listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000, channels=1, language="en-US",
            interim_results="true", punctuate="true", smart_format="true", vad_events="true",
            utterance_end_ms="1000", endpointing="300", keyterm="Gutenberg") as conn:
        reader = threading.Thread(target=lambda: msgs.extend(conn), daemon=True)
        reader.start()
        for i in range(0, len(pcm), chunk):
            conn.send_media(pcm[i : i + chunk])
            if i == finalize_at:
                conn.send_finalize()
                conn.send_keep_alive()
            if viewer is None and any(getattr(m, "type", "") == "Results" for m in msgs):
                sid = next(m for m in msgs if m.type == "Results").metadata.request_id
                viewer = watch(live_server.http, sid, seen)
            time.sleep(0.05)
        conn.send_close_stream()
        reader.join(60)
    kinds = [m.type for m in msgs]
    results = [m for m in msgs if m.type == "Results"]
    finals = [m for m in results if m.is_final]
    assert any(not m.is_final and m.channel.alternatives[0].transcript for m in results)
    assert any(m.from_finalize for m in finals), "Finalize flushes: a result from_finalize"
    assert any(m.speech_final for m in finals), "the pauses between sentences end utterances"
    assert "SpeechStarted" in kinds and "UtteranceEnd" in kinds
    assert kinds[-1] == "Metadata", "CloseStream: the last results, then Metadata"
    meta = msgs[-1]
    assert abs(meta.duration - len(audio) / 16000) < 0.1 and meta.channels == 1
    assert meta.request_id == finals[0].metadata.request_id
    text = " ".join(m.channel.alternatives[0].transcript for m in finals)
    assert wer(ref, text) <= 0.25, text
    for m in finals:
        words = m.channel.alternatives[0].words
        assert all(w.start <= w.end and 0 <= w.confidence <= 1 and w.punctuated_word for w in words)
        assert all(m.start - 0.01 <= w.start and w.end <= m.start + m.duration + 0.01
                   for w in words)
    # the stream was an ordinary session: its viewer saw the same finals, then closed
    assert viewer is not None
    viewer.join(30)
    assert seen and seen[-1]["type"] == "closed"
    assert normalize(" ".join(m["text"] for m in seen if m["type"] == "final")) == normalize(text)
    tr = httpx.get(f"{live_server.http}/v1/sessions/{meta.request_id}/transcript.json").json()
    assert normalize(tr["text"]) == normalize(text)


@pytest.mark.timeout(120)
def test_prerecorded_file(live_server):
    names = ["LJ001-0004.wav", "LJ001-0005.wav"]
    audio, ref = speech(names, gap_s=1.0)
    import io
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(s16(audio))
    dg = client(live_server)
    r = dg.listen.v1.media.transcribe_file(request=buf.getvalue(), model="nova-3",
                                           punctuate=True, utterances=True, paragraphs=True)
    alt = r.results.channels[0].alternatives[0]
    assert wer(ref, alt.transcript) <= 0.25, alt.transcript
    assert alt.words and all(w.start <= w.end for w in alt.words)
    assert r.metadata.duration == pytest.approx(len(audio) / 16000, abs=0.05)
    assert len(r.results.utterances) >= 2, "a second of silence ends an utterance"
    assert alt.paragraphs.paragraphs and alt.paragraphs.transcript.strip()
    # the file was a session too: its transcript is there under the request id
    tr = httpx.get(f"{live_server.http}/v1/sessions/{r.metadata.request_id}/transcript.txt")
    assert normalize(tr.text) == normalize(alt.transcript)
    # without punctuate, Deepgram's transcript is lower case and bare
    plain = dg.listen.v1.media.transcribe_file(request=buf.getvalue(), model="nova-3")
    t = plain.results.channels[0].alternatives[0].transcript
    assert t == " ".join(normalize(t)) and wer(ref, t) <= 0.25


@pytest.mark.timeout(60)
def test_bad_parameters_and_files_get_deepgram_errors(live_server):
    dg = client(live_server)
    for kwargs in ({"encoding": "opus"}, {"diarize": "true"}, {"channels": "2"},
                   {"sample_rate": "96000"}, {"language": "xx"}, {"endpointing": "soon"},
                   {"request_options": {"additional_query_parameters": {"made_up": "1"}}},
                   {"request_options": {"additional_query_parameters": {"x\r\ny": "1"}}}):
        with pytest.raises((ApiError, InvalidStatus)) as err:
            with dg.listen.v1.connect(model="nova-3", **kwargs):
                pass
        assert status(err.value) == 400, kwargs
    r = httpx.post(f"{live_server.http}/deepgram/v1/listen?redact=pci", content=b"x")
    assert r.status_code == 400 and "redact" in r.json()["err_msg"]
    r = httpx.post(f"{live_server.http}/deepgram/v1/listen", content=b"not audio at all")
    assert r.status_code == 400 and r.json()["err_code"] and r.json()["request_id"]
    # a bad message mid-stream gets an Error, and the stream goes on
    with dg.listen.v1.connect(model="nova-3", encoding="linear16", sample_rate=16000) as conn:
        conn._websocket.send('{"type":"Dance"}')
        err = conn.recv()
        assert err.type == "Error" and "Dance" in err.description
        conn.send_configure(ListenV1Configure(keyterms=["comparatively"]))
        ok = conn.recv()
        assert ok.type == "ConfigureSuccess" and ok.keyterms == ["comparatively"]
        conn.send_media(s16(load16k("LJ001-0002.wav")))
        conn.send_close_stream()
        rest = list(conn)
        sid = conn._websocket.response.headers["dg-request-id"]
    assert rest[-1].type == "Metadata" and rest[-1].request_id == sid
    assert wer(references()["LJ001-0002.wav"], " ".join(
        m.channel.alternatives[0].transcript for m in rest if m.type == "Results")) <= 0.25


@pytest.mark.timeout(60)
def test_a_wav_file_streamed_as_it_is(live_server):
    """Without ``encoding`` a stream may lead with a WAV header (LJ Speech is 22.05 kHz)."""
    data = (SPEECH / "LJ001-0002.wav").read_bytes()
    with client(live_server).listen.v1.connect(model="nova-3") as conn:
        for i in range(0, len(data), 8192):
            conn.send_media(data[i : i + 8192])
        conn.send_close_stream()
        msgs = list(conn)
    assert msgs[-1].type == "Metadata" and abs(msgs[-1].duration - 1.9) < 0.1
    text = " ".join(m.channel.alternatives[0].transcript for m in msgs if m.type == "Results")
    assert wer(references()["LJ001-0002.wav"], text) <= 0.25, text
    with client(live_server).listen.v1.connect(model="nova-3") as conn:
        conn.send_media(b"OggS" + bytes(400))
        assert conn.recv().variant == "bad_audio"


@pytest.mark.timeout(60)
def test_tokens_and_idle_timeout(live_server):
    cfg = ServerConfig(auth=AuthConfig(("sekret",)), idle_timeout_s=1.0)
    with LiveServer(cfg, live_server.app.state.engine) as srv:
        with pytest.raises((ApiError, InvalidStatus)) as err:
            with client(srv, "wrong").listen.v1.connect(model="nova-3"):
                pass
        assert status(err.value) == 401
        r = httpx.post(f"{srv.http}/deepgram/v1/listen", content=b"x",
                       headers={"Authorization": "Token wrong"})
        assert r.status_code == 401
        # Token and Bearer both carry our speak tokens; a silent stream is closed (NET-0001)
        for auth in ("Token sekret", "Bearer sekret"):
            msgs = []
            with client(srv, "sekret").listen.v1.connect(
                    model="nova-3", authorization=auth) as conn:
                t0 = time.monotonic()
                with pytest.raises(ConnectionClosedError) as closed:
                    while True:
                        msgs.append(conn.recv())
            assert time.monotonic() - t0 < 10 and closed.value.rcvd.code == 1011
            assert msgs[0].type == "Error" and msgs[0].variant == "NET-0001"
            assert msgs[-1].type == "Metadata"
