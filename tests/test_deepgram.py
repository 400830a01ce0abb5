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
from conftest import SPEECH, LiveServer, load16k, references, s16, wav_bytes
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from deepgram.listen.v1.types import ListenV1Configure
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidStatus
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
    # 1.2 s between clips: with 0.8 s the audio held no second without speech (LJ001-0001 ends
    # 0.13 s after its last sound), and ``utterance_end_ms=1000`` came only where the aligner
    # ended a word early; CI once got no ``UtteranceEnd``
    audio, ref = speech(CLIPS, gap_s=1.2)
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
    data = wav_bytes(audio)
    dg = client(live_server)
    r = dg.listen.v1.media.transcribe_file(request=data, model="nova-3",
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
    # jfk's pauses in a file are pauses: its words were spread over them (one utterance,
    # "ask" from 2.26 s where it is said at 3.62 s)
    jfk = dg.listen.v1.media.transcribe_file(request=(SPEECH / "jfk.wav").read_bytes(),
                                             model="nova-3", utterances=True)
    ask = next(w for w in jfk.results.channels[0].alternatives[0].words if w.word == "ask")
    assert ask.start > 2.9 and len(jfk.results.utterances) >= 3
    # without punctuate, Deepgram's transcript is lower case and bare
    plain = dg.listen.v1.media.transcribe_file(request=data, model="nova-3")
    t = plain.results.channels[0].alternatives[0].transcript
    assert t == " ".join(normalize(t)) and wer(ref, t) <= 0.25


@pytest.mark.timeout(180)
@pytest.mark.parametrize("api", ["deepgram", "openai"])
def test_a_file_whose_client_hangs_up_stops_being_decoded(live_server, api):
    """A long file POSTed by a client that gave up (its timeout) went on decoding for minutes,
    holding a session and the decoder, and a shutdown waited for it."""
    names = sorted(p.name for p in SPEECH.glob("LJ*.wav"))
    audio = np.concatenate([load16k(n) for n in names * 2])  # about 7 minutes
    pcm = s16(audio)
    with LiveServer(engine=live_server.app.state.engine) as srv:
        def sessions() -> float:
            text = httpx.get(srv.http + "/metrics").text
            return float(next(ln.split()[1] for ln in text.splitlines()
                              if ln.startswith("whisperwire_sessions ")))

        with pytest.raises(httpx.TimeoutException):
            if api == "deepgram":
                httpx.post(f"{srv.http}/deepgram/v1/listen?encoding=linear16&sample_rate=16000",
                           content=pcm, timeout=3)
            else:
                httpx.post(f"{srv.http}/v1/audio/transcriptions", timeout=3,
                           files={"file": ("long.wav", wav_bytes(audio), "audio/wav")},
                           data={"model": "whisper-1"})
        deadline = time.monotonic() + 15
        while sessions() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sessions() == 0, "the file is still being decoded"


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pace", [0.02, 0.0])
def test_final_results_never_reach_back_over_each_other(live_server, pace):
    """Audio sent faster than real time (a client catching up after a blip): the empty
    ``speech_final`` Results after "And so my fellow Americans," reached to the audio received
    so far (2.04-4.80 s), over "ask not" (3.64-4.50 s) that came after it; a voice agent reads
    an end of turn over words still to come."""
    pcm = s16(load16k("jfk.wav"))
    finals = []
    with ws_connect(f"{live_server.url}/deepgram/v1/listen?encoding=linear16&sample_rate=16000"
                    "&endpointing=300&interim_results=true&punctuate=true") as ws:
        for i in range(0, len(pcm), 3200):
            ws.send(pcm[i : i + 3200])
            time.sleep(pace)
        ws.send(json.dumps({"type": "CloseStream"}))
        for raw in ws:
            m = json.loads(raw)
            if m["type"] == "Results" and m["is_final"]:
                finals.append((m["start"], m["start"] + m["duration"],
                               m["channel"]["alternatives"][0]["transcript"]))
    assert any(text for _, _, text in finals)
    for (s0, e0, t0), (s1, e1, t1) in zip(finals, finals[1:]):
        assert s1 >= e0 - 0.01, f"{t1!r} at {s1:.2f} starts before {t0!r} ends at {e0:.2f}"


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
def test_linear16_is_a_byte_stream_frames_need_not_hold_whole_samples(live_server):
    """Deepgram reads raw audio as a byte stream: a client piping ffmpeg's output sends frames
    of any length. An odd frame was refused (bad_audio) and shifted every later sample by a
    byte: all of it heard as noise, then too_many_errors."""
    data = s16(load16k("jfk.wav"))
    with client(live_server).listen.v1.connect(model="nova-3", encoding="linear16",
                                               sample_rate=16000) as conn:
        for i in range(0, len(data), 3201):
            conn.send_media(data[i : i + 3201])
        conn.send_close_stream()
        msgs = list(conn)
    assert [m.type for m in msgs if m.type == "Error"] == []
    text = " ".join(m.channel.alternatives[0].transcript for m in msgs if m.type == "Results")
    assert wer(references()["jfk.wav"], text) <= 0.2, text
    # an empty binary frame is Deepgram's first (deprecated, still sent) way to close
    with ws_connect(f"{live_server.url}/deepgram/v1/listen?encoding=linear16&sample_rate="
                    "16000", open_timeout=10) as ws:
        ws.send(data)
        ws.send(b"")
        got = []
        with pytest.raises(ConnectionClosedOK):
            while True:
                got.append(json.loads(ws.recv(timeout=60)))
    assert got[-1]["type"] == "Metadata"
    text = " ".join(m["channel"]["alternatives"][0]["transcript"] for m in got
                    if m["type"] == "Results")
    assert wer(references()["jfk.wav"], text) <= 0.2, text


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
            assert "NET-0001" in closed.value.rcvd.reason  # as Deepgram's close frame says
            assert msgs[0].type == "Error" and msgs[0].variant == "NET-0001"
            assert msgs[-1].type == "Metadata"


def _stream_real_time(srv, x: np.ndarray, query: str, finalize_at: tuple[float, ...] = (),
                      frame: int = 640) -> list[dict]:
    """Stream 16 kHz audio in 20 ms frames (``frame`` bytes) at real-time pace, sending
    ``Finalize`` once the audio sent passes each of ``finalize_at`` (s), then 2 s more of
    silence and CloseStream; every message until the server closes."""
    got: list[dict] = []
    pcm = s16(np.concatenate([x, np.zeros(32000, np.float32)]))
    with ws_connect(f"{srv.url}/deepgram/v1/listen?{query}", open_timeout=10) as ws:
        def read() -> None:
            try:
                while True:
                    got.append(json.loads(ws.recv(timeout=60)))
            except Exception:  # noqa: BLE001 - closed
                return
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        todo = list(finalize_at)
        t0 = time.monotonic()
        for i in range(0, len(pcm), frame):
            ws.send(pcm[i : i + frame])
            if todo and (i + frame) / 32000 >= todo[0]:
                todo.pop(0)
                ws.send(json.dumps({"type": "Finalize"}))
            time.sleep(max(0.0, t0 + (i + frame) / 32000 - time.monotonic()))
        ws.send(json.dumps({"type": "CloseStream"}))
        reader.join(60)
    return got


@pytest.mark.timeout(120)
def test_every_finalize_is_answered_once_with_from_finalize(live_server):
    """Pipecat sends ``Finalize`` when its own VAD says the user stopped (here 0.8 s after
    each of jfk's four utterances) and waits for the ``from_finalize`` result to close the
    turn. When agreement had made the utterance's words final already, none came (a 2 s
    timeout in Pipecat), and a later utterance's final carried the stale answer."""
    ends = (2.06, 4.52, 7.74, 10.41)  # where jfk's utterances end (s)
    got = _stream_real_time(live_server, load16k("jfk.wav"), "encoding=linear16&sample_rate="
                            "16000&interim_results=true&punctuate=true&language=en",
                            tuple(e + 0.8 for e in ends))
    finals = [m for m in got if m["type"] == "Results" and m["is_final"]]
    answers = [m for m in finals if m["from_finalize"]]
    assert len(answers) == len(ends), [(m["start"], m["channel"]["alternatives"][0]
                                        ["transcript"], m["from_finalize"]) for m in finals]
    for m, e in zip(answers, ends):  # each answers its own Finalize, not a later utterance
        assert m["start"] < e + 0.8 + 0.5, m
    text = " ".join(m["channel"]["alternatives"][0]["transcript"] for m in finals)
    assert wer(references()["jfk.wav"], text) <= 0.2, text


@pytest.mark.timeout(120)
def test_every_pause_gets_speech_final_and_utterance_end(live_server):
    """LiveKit ends the user's speech on ``speech_final`` (or ``UtteranceEnd``). Read
    sentences with pauses between them: each pause must end the utterance before it, also
    when agreement made all its words final before the VAD ended it (before, "... others
    wounded." and "... Christmas spirit." were followed by neither).

    The recording's own pauses (about 1 s of room tone) are each played twice, so that every
    one is clearly longer than ``utterance_end_ms``: as recorded, where Whisper placed the
    words around them decided whether a pause was one (CI once saw 1.18 s between words)."""
    with __import__("wave").open(str(SPEECH / "real" / "en-05.wav")) as w:
        w.setpos(12 * 16000)
        x = np.frombuffer(w.readframes(13 * 16000), np.int16).astype(np.float32) / 32768
    pauses_in_audio = ((1.33, 2.27), (4.79, 5.68), (9.22, 10.23))  # quiet 35 dB under the peak
    cut = [0] + [int(t * 16000) for a, b in pauses_in_audio for t in (a, b)] + [len(x)]
    x = np.concatenate([x[p:q] if k % 2 == 0 else np.tile(x[p:q], 2)
                        for k, (p, q) in enumerate(zip(cut, cut[1:]))])
    got = _stream_real_time(live_server, x, "encoding=linear16&sample_rate=16000&interim_"
                            "results=true&punctuate=true&vad_events=true&utterance_end_ms=1000"
                            "&language=en")
    events = [m for m in got if m["type"] in ("Results", "UtteranceEnd")
              and (m["type"] == "UtteranceEnd" or m["is_final"])]
    words = [(w["start"], w["end"], k) for k, m in enumerate(events) if m["type"] == "Results"
             for w in m["channel"]["alternatives"][0]["words"]]
    pauses = [(a, b) for a, b in zip(words, words[1:]) if b[0] - a[1] >= 1.3]
    assert len(pauses) >= len(pauses_in_audio), words
    for a, b in pauses:
        between = events[a[2] : b[2]]
        assert any(m["type"] == "Results" and m["speech_final"] for m in between), (a, b)
        assert any(m["type"] == "UtteranceEnd" for m in between), (a, b)
    assert events[-1]["type"] == "UtteranceEnd" or events[-1]["speech_final"]


@pytest.mark.timeout(120)
def test_endpointing_and_utterance_end_ms_wait_for_that_much_silence(live_server):
    """endpointing=2000 and utterance_end_ms=2000 ask for 2 s of silence after the last word
    before speech_final and UtteranceEnd: jfk's pauses (0.6-1.4 s) are none, its 2.6 s tail
    is. Before, UtteranceEnd came after every 0.5 s pause whatever the value, and endpointing
    stretched the VAD's hangover instead: seconds of silence inside windows, where Whisper
    stretched words over the pauses ("asked not" from 2.26 to 4.68 s) and invented one."""
    got = _stream_real_time(live_server, load16k("jfk.wav"), "encoding=linear16&sample_rate="
                            "16000&interim_results=true&punctuate=true&language=en&endpointing="
                            "2000&utterance_end_ms=2000")
    finals = [m for m in got if m["type"] == "Results" and m["is_final"]]
    ends = [m for m in got if m["type"] == "UtteranceEnd"]
    assert [m["speech_final"] for m in finals].count(True) == 1 and len(ends) == 1, [
        (m["start"], m["channel"]["alternatives"][0]["transcript"], m["speech_final"])
        for m in finals]
    last = max(w["end"] for m in finals for w in m["channel"]["alternatives"][0]["words"])
    assert abs(ends[0]["last_word_end"] - last) < 0.01
    words = [w for m in finals for w in m["channel"]["alternatives"][0]["words"]]
    assert all(w["end"] - w["start"] <= 1.2 for w in words), words
    text = " ".join(m["channel"]["alternatives"][0]["transcript"] for m in finals)
    assert wer(references()["jfk.wav"], text) <= 0.2, text
    # utterance_end_ms alone: speech_final at each of the VAD's ends, UtteranceEnd once
    got = _stream_real_time(live_server, load16k("jfk.wav"), "encoding=linear16&sample_rate="
                            "16000&interim_results=true&punctuate=true&language=en&utterance_end"
                            "_ms=2000")
    finals = [m for m in got if m["type"] == "Results" and m["is_final"]]
    assert [m["speech_final"] for m in finals].count(True) >= 3
    assert [m["type"] for m in got].count("UtteranceEnd") == 1


def _mp3(x: np.ndarray, id3: bool = True) -> bytes:
    import io

    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp3", options={} if id3 else {"write_id3v2": "0"}) as out:
        st = out.add_stream("mp3", rate=16000, layout="mono")
        f = av.AudioFrame.from_ndarray(x[None, :].astype(np.float32), format="flt", layout="mono")
        f.sample_rate = 16000
        for pkt in [*st.encode(f), *st.encode(None)]:
            out.mux(pkt)
    return buf.getvalue()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["wav", "mp3", "mp3 without a tag"])
def test_a_container_file_is_read_as_one_whatever_encoding_says(live_server, kind):
    """Deepgram's own curl example posts an MP3 with ``encoding=linear16&sample_rate=8000``:
    Deepgram reads the container. Here the bytes were taken for raw PCM: 200 OK with an empty
    transcript and 2.09 s for jfk's 11 s (an MP3), or invented text over 22 s (a 44.1 kHz
    stereo WAV posted as 44100 Hz linear16; here a 16 kHz WAV posted as 8000 Hz)."""
    x = load16k("jfk.wav")
    data = wav_bytes(x) if kind == "wav" else _mp3(x, id3=kind == "mp3")
    assert data[:3] == (b"ID3" if kind == "mp3" else data[:3]) and data[:1] != b"\xff" or (
        kind == "mp3 without a tag")  # (the second MP3 starts with a frame header)
    r = httpx.post(f"{live_server.http}/deepgram/v1/listen?encoding=linear16&sample_rate=8000"
                   "&punctuate=true", content=data, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["metadata"]["duration"] == pytest.approx(len(x) / 16000, abs=0.2)
    text = body["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert wer(references()["jfk.wav"], text) <= 0.15, text


@pytest.mark.timeout(180)
def test_raw_audio_that_starts_like_an_mp3_frame_is_still_raw(live_server):
    """The other side of the rule above: linear16 whose first bytes happen to read as an MPEG
    frame header (FF FB 90 00: samples -1025, 144) is what ``encoding`` says it is."""
    x = load16k("jfk.wav")
    data = b"\xff\xfb\x90\x00" + s16(x)
    r = httpx.post(f"{live_server.http}/deepgram/v1/listen?encoding=linear16&sample_rate=16000",
                   content=data, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["duration"] == pytest.approx(len(x) / 16000, abs=0.05)
    text = r.json()["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert wer(references()["jfk.wav"], text) <= 0.15, text
    # a file that says it is a WAV and holds no audio is refused, not read as raw PCM
    bad = httpx.post(f"{live_server.http}/deepgram/v1/listen?encoding=linear16&sample_rate="
                     "16000", content=b"RIFF\x00\x00\x00\x00WAVE" + bytes(range(256)) * 40,
                     timeout=60)
    assert bad.status_code == 400, bad.text


def _lj_in_real_time_then(live_server, then) -> list[tuple[float, dict]]:  # type: ignore[no-untyped-def]
    """LJ001-0002 to the Deepgram endpoint in 100 ms frames in real time, then ``then(ws)``,
    then ``CloseStream``: every message with the time it came."""
    import asyncio

    from websockets.asyncio.client import connect

    pcm = s16(load16k("LJ001-0002.wav"))
    got: list[tuple[float, dict]] = []

    async def go() -> None:
        url = (f"{live_server.url}/deepgram/v1/listen?encoding=linear16&sample_rate=16000"
               "&interim_results=true")
        async with connect(url) as ws:
            async def rx() -> None:
                async for m in ws:
                    got.append((time.monotonic(), json.loads(m)))
            reader = asyncio.create_task(rx())
            for i in range(0, len(pcm), 3200):
                await ws.send(pcm[i : i + 3200])
                await asyncio.sleep(0.1)
            await then(ws)
            await ws.send(json.dumps({"type": "CloseStream"}))
            await asyncio.wait_for(reader, 30)

    asyncio.run(go())
    return got


@pytest.mark.timeout(120)
def test_a_finalize_after_the_last_audio_is_answered_without_more_audio(live_server):
    """Push-to-talk, a muted microphone, a file's end: the client sends ``Finalize`` and then
    no audio, only ``KeepAlive``. The answer waited for a second of audio past the committed
    point (``min_final_ms``) that never came: "in being comparatively" was final, and
    "modern" came only with ``CloseStream``, 6 s later."""
    import asyncio

    sent = 0.0

    async def then(ws) -> None:  # type: ignore[no-untyped-def]
        nonlocal sent
        sent = time.monotonic()
        await ws.send(json.dumps({"type": "Finalize"}))
        for _ in range(2):
            await asyncio.sleep(2)
            await ws.send(json.dumps({"type": "KeepAlive"}))

    # (LJ001-0002's last word ends 0.2 s before the audio does)
    got = _lj_in_real_time_then(live_server, then)
    answers = [t - sent for t, m in got if m.get("type") == "Results" and m.get("from_finalize")]
    text = " ".join(m["channel"]["alternatives"][0]["transcript"] for _, m in got
                    if m.get("type") == "Results" and m["is_final"])
    assert answers and answers[0] < 2.0, (answers, text)
    assert normalize(text)[-2:] == ["comparatively", "modern"], text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("gap", [0.0, 1.0])
def test_a_finalize_said_twice_gets_two_answers_in_order(live_server, gap):
    """A client that sends ``Finalize`` twice (a retry, two buttons, a framework and the app
    both flushing): each gets its ``from_finalize`` answer, and the empty ones follow the
    audio in order. The second answer (1.90-1.90 s) was followed at the end by an empty
    ``speech_final`` Results back at 1.70-1.90 s; with a pause between the two, the second
    answer and that result both covered 1.70-1.90 s."""
    import asyncio

    async def then(ws) -> None:  # type: ignore[no-untyped-def]
        await ws.send(json.dumps({"type": "Finalize"}))
        await asyncio.sleep(gap)
        await ws.send(json.dumps({"type": "Finalize"}))
        await asyncio.sleep(2)

    got = [m for _, m in _lj_in_real_time_then(live_server, then)]
    finals = [(m["start"], round(m["start"] + m["duration"], 3),
               m["channel"]["alternatives"][0]["transcript"], m["from_finalize"])
              for m in got if m.get("type") == "Results" and m["is_final"]]
    assert sum(f[3] for f in finals) == 2, finals
    for a, b in zip(finals, finals[1:]):
        assert b[0] >= a[1] - 0.01, finals
    assert normalize(" ".join(f[2] for f in finals))[-2:] == ["comparatively", "modern"]


def _trimmed(x: np.ndarray, floor: float = 0.02) -> np.ndarray:
    """``x`` without its leading and trailing quiet (10 ms frames under ``floor`` peak)."""
    loud = [i for i in range(0, len(x) - 160, 160) if np.abs(x[i : i + 160]).max() >= floor]
    return x[loud[0] : loud[-1] + 160]


@pytest.mark.timeout(120)
def test_speech_started_is_where_the_speech_began_not_its_pre_roll(live_server):
    """Two sentences 0.45 s apart: ``SpeechStarted`` for the second is where it begins, and
    the silence before it (for ``endpointing``'s ``speech_final``) ends there. The VAD's start
    with its 300 ms of pre-roll stood in: 0.15 s early here, and on real/en-01 a 0.33 s pause
    after "me." read as 0.03 s, so LiveKit (``endpointing=25``, raised to 300) got no end of
    turn between two speakers."""
    a, b = _trimmed(load16k("LJ001-0001.wav")), _trimmed(load16k("LJ001-0002.wav"))
    gap = 0.45
    pcm = s16(np.concatenate([a, np.zeros(int(gap * 16000), np.float32), b,
                              np.zeros(16000, np.float32)]))
    with ws_connect(f"{live_server.url}/deepgram/v1/listen?encoding=linear16&sample_rate=16000"
                    "&endpointing=300&vad_events=true") as ws:
        for i in range(0, len(pcm), 3200):
            ws.send(pcm[i : i + 3200])
        ws.send(json.dumps({"type": "CloseStream"}))
        events = [json.loads(raw) for raw in ws]
    starts = [m["timestamp"] for m in events if m["type"] == "SpeechStarted"]
    second = len(a) / 16000 + gap
    assert any(abs(t - second) <= 0.07 for t in starts), (second, starts)
    assert not any(second - 0.35 < t < second - 0.07 for t in starts), (second, starts)


@pytest.mark.timeout(120)
def test_a_finalize_after_a_file_sent_flat_out_is_answered_by_its_last_words(live_server):
    """A client ahead of the decoder (a file, a slow CPU) sends all of jfk and then
    ``Finalize``: the ``from_finalize`` result is the one that makes its last words final, and
    every word comes before it. It was the first utterance's final ("And so, my fellow
    Americans..."), the VAD having ended it before the ``Finalize``; Pipecat closed the turn
    there, and "Ask what you can do for your country." came after."""
    pcm = s16(load16k("jfk.wav"))
    got: list[dict] = []
    with ws_connect(f"{live_server.url}/deepgram/v1/listen?encoding=linear16&sample_rate=16000"
                    "&interim_results=true&punctuate=true", open_timeout=10) as ws:
        for i in range(0, len(pcm), 6400):
            ws.send(pcm[i : i + 6400])
        ws.send(json.dumps({"type": "Finalize"}))
        while not (got and got[-1].get("from_finalize")):
            got.append(json.loads(ws.recv(timeout=60)))
        ws.send(json.dumps({"type": "CloseStream"}))
    finals = [m for m in got if m.get("type") == "Results" and m["is_final"]]
    answer = finals[-1]
    assert answer["start"] + answer["duration"] > 10.0, [
        (m["start"], m["channel"]["alternatives"][0]["transcript"]) for m in finals]
    text = " ".join(m["channel"]["alternatives"][0]["transcript"] for m in finals)
    assert "country" in text.lower() and wer(references()["jfk.wav"], text) <= 0.2, text


def _with_comment(wav: bytes, comment: bytes) -> bytes:
    """``wav`` with a LIST/INFO chunk holding ``comment`` before its data chunk (as tools
    that tag files write it)."""
    import struct
    at = wav.index(b"data", 12)  # (this file's own header has no such letters before it)
    text = comment + b"\x00" * (2 - len(comment) % 2)
    info = b"INFO" + b"ICMT" + struct.pack("<I", len(text)) + text
    body = wav[12:at] + b"LIST" + struct.pack("<I", len(info)) + info + wav[at:]
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WAVE" + body


@pytest.mark.timeout(60)
def test_a_streamed_wav_whose_comment_says_data_is_heard(live_server):
    """The header is walked chunk by chunk: a search for b"data" found it in a LIST chunk's
    comment ("xmetadata") and took the header's rest for audio, a byte out of step (no words,
    no error)."""
    data = _with_comment((SPEECH / "LJ001-0002.wav").read_bytes(), b"xmetadata")
    with client(live_server).listen.v1.connect(model="nova-3") as conn:
        for i in range(0, len(data), 8192):
            conn.send_media(data[i : i + 8192])
        conn.send_close_stream()
        msgs = list(conn)
    text = " ".join(m.channel.alternatives[0].transcript for m in msgs if m.type == "Results")
    assert wer(references()["LJ001-0002.wav"], text) <= 0.25, text


def _punctuated(conn) -> bool:  # type: ignore[no-untyped-def]
    """Stream LJ001-0002 on ``conn`` and close: whether its final words carry marks."""
    conn.send_media(s16(load16k("LJ001-0002.wav")))
    conn.send_close_stream()
    words = [w for m in conn if m.type == "Results" and m.is_final
             for w in m.channel.alternatives[0].words]
    assert words
    return any(w.punctuated_word not in (None, w.word) for w in words)


@pytest.mark.timeout(60)
def test_configure_features_are_applied_or_refused(live_server):
    """``Configure`` with ``features`` (the SDK's ``{"numerals": true}``): punctuation is turned
    on or off from then on, a feature this server lacks is refused with ``ConfigureFailure``
    and nothing of that message applies. It was answered ``ConfigureSuccess`` and ignored."""
    with client(live_server).listen.v1.connect(model="nova-3", encoding="linear16",
                                               sample_rate=16000) as conn:
        conn.send_configure(ListenV1Configure(features={"diarize": True}, keyterms=["x"]))
        no = conn.recv()
        assert no.type == "ConfigureFailure" and "diarize" in no.description
        conn.send_configure(ListenV1Configure(features={"numerals": True, "diarize": False}))
        assert conn.recv().type == "ConfigureSuccess"
        conn.send_configure(ListenV1Configure(features={"punctuate": True}))
        assert conn.recv().type == "ConfigureSuccess"
        assert _punctuated(conn)
    # (one feature off leaves the others: smart_format off keeps punctuate=true's marks)
    with client(live_server).listen.v1.connect(model="nova-3", encoding="linear16",
                                               sample_rate=16000, punctuate=True) as conn:
        conn.send_configure(ListenV1Configure(features={"smart_format": False}))
        assert conn.recv().type == "ConfigureSuccess"
        assert _punctuated(conn)
