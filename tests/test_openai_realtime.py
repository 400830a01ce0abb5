"""OpenAI realtime transcription through the official openai SDK, unchanged but for its base
URL: server-VAD turns at 2x real time (append-only deltas that join to each item's completed
transcript, a viewer on the session id), manual commits with G.711 audio, and errors in
OpenAI's shape. Real server, model and speech."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import numpy as np
import openai
import pytest
from conftest import load16k, references, s16
from whisperwire.server.audio import Resampler
from whisperwire.server.wer import normalize, wer

pytestmark = pytest.mark.e2e

NAMES = ["LJ001-0008.wav", "LJ001-0009.wav", "LJ001-0011.wav"]
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"


def at(x: np.ndarray, rate: int) -> np.ndarray:
    r = Resampler(16000, rate)
    return np.concatenate([r.process(x), r.flush()])


def mulaw(x: np.ndarray) -> bytes:
    """G.711 mu-law, as a telephone line sends it."""
    v = np.clip(np.abs(x) * 32768, 0, 32635).astype(np.int32) + 0x84
    exp = np.clip(np.floor(np.log2(v)).astype(np.int32) - 7, 0, 7)
    mant = (v >> (exp + 3)) & 0x0F
    sign = (x < 0).astype(np.int32) << 7
    return (~(sign | (exp << 4) | mant) & 0xFF).astype(np.uint8).tobytes()


def client(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{srv.http}/v1", api_key="any", max_retries=0)


def items(events) -> dict[str, tuple[str, str | None]]:
    """Per item: its deltas joined, and its completed transcript."""
    out: dict[str, list] = {}
    for e in events:
        if e.type == DELTA:
            out.setdefault(e.item_id, ["", None])[0] += e.delta
        elif e.type == COMPLETED:
            out.setdefault(e.item_id, ["", None])[1] = e.transcript
    return {k: (v[0], v[1]) for k, v in out.items()}


def server_vad_turns(srv, pcm: bytes, step: int, pause_s: float, turns: int,
                     wait_s: float, silence: float = 500) -> list:
    """Stream 24 kHz pcm16 in ``step``-byte appends (``pause_s`` apart) to a server_vad
    session; every event until ``turns`` turns completed or ``wait_s`` passed."""
    events: list = []
    with client(srv).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": silence}}}})
        reader = threading.Thread(target=lambda: events.extend(conn), daemon=True)
        reader.start()
        for i in range(0, len(pcm), step):
            conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + step]).decode())
            time.sleep(pause_s)
        deadline = time.monotonic() + wait_s
        while sum(e.type == COMPLETED for e in events) < turns and time.monotonic() < deadline:
            time.sleep(0.1)
    return events


@pytest.mark.timeout(120)
def test_server_vad_turns_at_twice_real_time(live_server):
    gap = np.zeros(int(1.2 * 16000), np.float32)
    x = np.concatenate([p for n in NAMES for p in (load16k(n), gap)])
    ref = " ".join(references()[n] for n in NAMES)
    # 100 ms of 24 kHz pcm16 every 50 ms
    events = server_vad_turns(live_server, s16(at(x, 24000)), 4800, 0.05, len(NAMES), 30,
                              silence=500.0)  # (a float: a JavaScript client's number)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["session.created", "session.updated"]
    sid = events[0].session.id
    done = [e for e in events if e.type == COMPLETED]
    assert len(done) >= 2, kinds
    assert kinds.count("input_audio_buffer.speech_started") >= 2
    assert kinds.count("input_audio_buffer.committed") >= 2
    for joined, completed in items(events).values():
        assert completed is not None and joined == completed, "deltas join to the transcript"
    assert_openai_order(events)  # (deltas came before committed: as the words became final)
    text = " ".join(e.transcript for e in done)
    assert wer(ref, text) <= 0.25, text
    tr = httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.json").json()
    assert normalize(tr["text"]) == normalize(text), "the session id leads to its transcript"


@pytest.mark.timeout(90)
def test_manual_commits_mulaw_and_errors(live_server):
    x = load16k("jfk.wav")
    half = len(x) // 2 // 8000 * 8000
    parts = [mulaw(at(x[:half], 8000)), mulaw(at(x[half:], 8000))]
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcmu"}, "turn_detection": None}}})
        up = conn.recv()
        assert up.type == "session.updated" and up.session.audio.input.turn_detection is None
        conn.send({"type": "input_audio_buffer.dance"})  # type: ignore[arg-type]
        assert conn.recv().type == "error"
        conn.send({"type": "input_audio_buffer.append", "audio": "!!not base64!!",
                   "event_id": "evt_mine"})
        e = conn.recv()
        assert e.error.code == "invalid_audio" and e.error.event_id == "evt_mine", e
        conn.input_audio_buffer.commit()
        assert conn.recv().error.code == "input_audio_buffer_commit_empty"
        # a VAD threshold outside OpenAI's 0..1 is refused (it was taken), and the session
        # echoes its language as the client sent it
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "turn_detection": {"type": "server_vad", "threshold": 2}}}})
        assert conn.recv().error.code == "invalid_turn_detection"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "transcription": {"model": "gpt-4o-transcribe", "language": "en-US"}}}})
        assert conn.recv().session.audio.input.transcription.language == "en-US"
        # audio cleared is dropped: none of it reaches a later turn
        conn.input_audio_buffer.append(audio=base64.b64encode(mulaw(
            at(load16k("LJ001-0002.wav"), 8000))).decode())
        conn.input_audio_buffer.clear()
        while conn.recv().type != "input_audio_buffer.cleared":
            pass
        events = []
        for p in parts:
            for i in range(0, len(p), 1600):
                conn.input_audio_buffer.append(audio=base64.b64encode(p[i : i + 1600]).decode())
            conn.input_audio_buffer.commit()
            while (e := conn.recv()).type != COMPLETED:
                events.append(e)
            events.append(e)
    kinds = [e.type for e in events]
    assert kinds.count("input_audio_buffer.committed") == 2 and kinds.count(COMPLETED) == 2
    assert "input_audio_buffer.speech_started" not in kinds, "no VAD turns when they are off"
    for joined, completed in items(events).values():
        assert joined == completed
    text = " ".join(e.transcript for e in events if e.type == COMPLETED)
    assert wer(references()["jfk.wav"], text) <= 0.3, text
    assert "modern" not in text.lower(), "the cleared audio was dropped"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt, rate, encode", [
    ({"type": "audio/pcm", "rate": 24000}, 24000, s16),
    ({"type": "audio/pcmu"}, 8000, mulaw),
])
def test_a_commit_of_a_little_more_than_100_ms_is_taken(live_server, fmt, rate, encode):
    """OpenAI's rule is 100 ms appended. Counted after the resampler, which holds input back,
    120 ms of 24 kHz audio were 92 ms and 110 ms of G.711 none: refused as too small."""
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": fmt, "turn_detection": None}}})
        for ms in (120, 110):
            x = at(load16k("jfk.wav")[16000 : 16000 + ms * 16], rate)[: rate * ms // 1000]
            conn.input_audio_buffer.append(audio=base64.b64encode(encode(x)).decode())
            conn.input_audio_buffer.commit()
            while (e := conn.recv()).type not in ("input_audio_buffer.committed", "error"):
                pass
            assert e.type == "input_audio_buffer.committed", (ms, e)
        conn.input_audio_buffer.append(audio=base64.b64encode(encode(x[: rate // 20])).decode())
        conn.input_audio_buffer.commit()  # 50 ms: refused
        while (e := conn.recv()).type not in ("input_audio_buffer.committed", "error"):
            pass
        assert e.type == "error" and e.error.code == "input_audio_buffer_commit_empty", e


@pytest.mark.timeout(120)
def test_server_vad_turns_sent_flat_out_each_complete_with_their_own_words(live_server):
    """Under backlog the session makes several ended utterances final in one window (one
    ``eou``): each VAD turn must still complete, with the words spoken in it; and a last turn
    that was only noise completes empty (no final ever comes for it)."""
    gap = np.zeros(int(1.2 * 16000), np.float32)
    noise = (0.05 * np.random.default_rng(3).standard_normal(16000)).astype(np.float32)
    x = np.concatenate([p for n in NAMES for p in (load16k(n), gap)] + [noise, gap])
    events = server_vad_turns(live_server, s16(at(x, 24000)), 48000, 0, len(NAMES) + 1, 40)
    kinds = [e.type for e in events]
    done = [e for e in events if e.type == COMPLETED]
    assert kinds.count("input_audio_buffer.committed") == len(NAMES) + 1
    assert len(done) == len(NAMES) + 1, [e.transcript for e in done]
    for joined, completed in items(events).values():
        assert completed is not None and joined == completed, "deltas join to the transcript"
    for name, e in zip(NAMES, done):
        assert wer(references()[name], e.transcript) <= 0.25, (name, e.transcript)
    assert done[-1].transcript == ""
    assert_openai_order(events)


@pytest.mark.timeout(90)
def test_a_manual_commit_inside_a_pause_completes_its_turn_with_every_word(live_server):
    """A client commits 0.3 s after its last word, past the VAD's pause (240 ms), where the
    end decode starts early, and before its hangover: the commit ends the utterance and makes
    that decode's words final at once. The turn completes with them, and none arrive later
    as a delta of another item."""
    from whisperwire.server.vad import SpeechEnd, VadOptions, VadSegmenter, webrtc_classifier

    x = load16k("LJ001-0002.wav")
    o = VadOptions()
    vad = VadSegmenter(o, webrtc_classifier(o.aggressiveness))
    ends = [e for e in vad.feed(np.concatenate([x, np.zeros(16000, np.float32)]))
            if isinstance(e, SpeechEnd)]
    x = x[: min(len(x), ends[-1].spoken_to + int(0.3 * 16000))]
    x = np.concatenate([x, np.zeros(max(0, ends[-1].spoken_to + 4800 - len(x)), np.float32)])
    pcm = s16(at(x, 24000))
    events: list = []
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}}})
        assert conn.recv().type == "session.updated"
        for i in range(0, len(pcm), 4800):  # 100 ms every 100 ms
            conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
            time.sleep(0.1)
        time.sleep(1.5)  # the early end decode is back and held
        conn.input_audio_buffer.commit()
        while (e := conn.recv()).type != COMPLETED:
            events.append(e)
        events.append(e)
        time.sleep(1.0)
        conn.send({"type": "input_audio_buffer.clear"})
        while (e := conn.recv()).type != "input_audio_buffer.cleared":
            events.append(e)
    per_item = items(events)
    assert len(per_item) == 1, per_item  # one turn, and no words after it on another
    (joined, completed), = per_item.values()
    assert completed is not None and joined == completed
    assert wer(references()["LJ001-0002.wav"], completed) <= 0.2, completed


@pytest.mark.timeout(120)
def test_clear_and_commit_while_a_decode_is_out_leave_the_session_working(live_server):
    """A clear, then a commit, sent while a decode was with the engine: the deferred clear ran
    inside the commit and dropped the decode in flight, whose result then raised in the
    session's decode loop: every later turn was committed and never transcribed, with no
    error. Now the cleared buffer is empty at once (the commit gets commit_empty), the
    decode's result is dropped, and the next turn completes with its own words."""
    a, b = at(load16k("LJ001-0002.wav"), 24000), at(load16k("LJ001-0004.wav"), 24000)
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}}})
        assert conn.recv().type == "session.updated"
        pcm = s16(a)[: 2 * 48000]
        for i in range(0, len(pcm), 4800):  # 2 s in 100 ms appends, at once: decodes start
            conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        time.sleep(0.3)
        conn.input_audio_buffer.clear()
        conn.input_audio_buffer.commit()
        events = []
        while (e := conn.recv()).type != "input_audio_buffer.cleared":
            events.append(e)
        e = conn.recv()
        assert e.type == "error" and e.error.code == "input_audio_buffer_commit_empty", e
        assert COMPLETED not in [x.type for x in events], "no turn of the cleared audio"
        conn.input_audio_buffer.append(audio=base64.b64encode(s16(b)).decode())
        conn.input_audio_buffer.commit()
        while (e := conn.recv()).type != COMPLETED:
            pass
    assert wer(references()["LJ001-0004.wav"], e.transcript) <= 0.3, e.transcript


def assert_openai_order(events) -> None:
    """Per item, OpenAI's order: (speech_started, speech_stopped,) committed once, then the
    user's item added and done once each (``conversation.item.added``, ``.done``: whole once
    committed, its transcript in the transcription events), deltas, completed once; nothing
    for an item never committed."""
    seen: dict[str, list[str]] = {}
    short = {"input_audio_buffer.speech_started": "S", "input_audio_buffer.speech_stopped": "T",
             "input_audio_buffer.committed": "C", "conversation.item.added": "A",
             "conversation.item.done": "D", DELTA: "d", COMPLETED: "X"}
    previous: dict[str, str | None] = {}
    for e in events:
        if e.type not in short:
            continue
        item_id = e.item.id if e.type.startswith("conversation.item.") and hasattr(e, "item") \
            else e.item_id
        seen.setdefault(item_id, []).append(short[e.type])
        if e.type in ("conversation.item.added", "conversation.item.done"):
            assert e.item.role == "user" and e.item.status == "completed", e
            assert e.item.content[0].type == "input_audio", e
            assert e.previous_item_id == previous[item_id], e  # as committed said
        if e.type == "input_audio_buffer.committed":
            previous[item_id] = e.previous_item_id
    for item, marks in seen.items():
        m = "".join(marks).replace("S", "", 1).replace("T", "", 1)
        assert m.startswith("CAD") and [m.count(c) for c in "CAD"] == [1, 1, 1], (item, marks)
        assert m.count("X") <= 1 and ("X" not in m or m.endswith("X")), (item, marks)


@pytest.mark.timeout(120)
def test_quick_commits_and_a_clear_keep_each_turn_to_its_own_audio(live_server):
    """Push-to-talk without waiting: two commits back to back made one item of both turns'
    words (committed twice) and a completed for an item never committed; speech cleared
    before a commit was delivered and completed as a turn; a commit in server_vad mode
    committed the first turn again. Now every commit is an item of its own audio, cleared
    speech is no turn, and every item goes committed -> deltas -> completed."""
    a = s16(at(load16k("LJ001-0002.wav"), 24000))
    b = s16(at(load16k("LJ001-0004.wav"), 24000))
    c = s16(at(load16k("LJ001-0008.wav"), 24000))
    refs = references()
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}}})
        for pcm in (a, b):
            conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
            conn.input_audio_buffer.commit()
        for i in range(0, len(c), 4800):  # spoken at 3x real time, then cancelled
            conn.input_audio_buffer.append(audio=base64.b64encode(c[i : i + 4800]).decode())
            time.sleep(0.1 / 3)
        conn.input_audio_buffer.clear()
        conn.input_audio_buffer.append(audio=base64.b64encode(a).decode())
        conn.input_audio_buffer.commit()
        events = []
        while sum(e.type == COMPLETED for e in events) < 3:
            events.append(conn.recv())
    assert_openai_order(events)
    done = [e for e in events if e.type == COMPLETED]
    committed = [e.item_id for e in events if e.type == "input_audio_buffer.committed"]
    assert [e.item_id for e in done] == committed, "one turn per commit, in order"
    for e, name in zip(done, ["LJ001-0002.wav", "LJ001-0004.wav", "LJ001-0002.wav"]):
        assert wer(refs[name], e.transcript) <= 0.3, (name, e.transcript)
    assert "surpassed" not in " ".join(e.transcript for e in done).lower(), "cleared speech"


@pytest.mark.timeout(120)
def test_push_to_talk_may_pause_and_append_a_whole_file_in_one_event(engine):
    """A push-to-talk client is quiet between turns: the session closed it after the
    speakers' 60 s idle timeout (idle_timeout, 1000), which OpenAI's does not; and one append
    of more than about 22 s of 24 kHz audio was refused (message_too_large) while OpenAI takes
    15 MiB per event (the README's own snippet appends a whole file). Here the speakers'
    timeout is 1 s and the realtime one 30 s."""
    from conftest import LiveServer
    from whisperwire.server.app import ServerConfig

    names = ("LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav")
    x = np.concatenate([load16k(n) for n in names])
    pcm = s16(at(x, 24000))
    assert len(base64.b64encode(pcm)) > 1.5 * (1 << 20)  # (the limit was 1.4 M characters)
    cfg = ServerConfig(idle_timeout_s=1.0, realtime_idle_timeout_s=30.0)
    with LiveServer(cfg, engine) as srv:
        with client(srv).realtime.connect(extra_query={"intent": "transcription"}) as conn:
            conn.session.update(session={"type": "transcription", "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}}})
            for _ in range(2):
                conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
                conn.input_audio_buffer.commit()
                while (e := conn.recv()).type not in (COMPLETED, "error"):
                    pass
                assert e.type == COMPLETED, e
                ref = " ".join(references()[n] for n in names)
                assert wer(ref, e.transcript) <= 0.25, e.transcript
                time.sleep(2.5)  # quiet for longer than a speaker may be


@pytest.mark.timeout(120)
def test_a_commit_after_one_append_of_several_turns_ends_the_last_under_server_vad(live_server):
    """jfk in one append, then a commit: the VAD's own turns ended inside the append, and the
    commit was refused as "buffer too small" (the count of uncommitted audio started again at
    the VAD's commit, after the whole append was counted), so the last turn was never ended
    and its words never came ("... for your country" was lost)."""
    pcm = s16(at(load16k("jfk.wav"), 24000))
    events: list = []
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "whisper-1", "language": "en"},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}})
        conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        conn.input_audio_buffer.commit()
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:  # (until the turn that ends jfk completes)
            events.append(e := conn.recv())
            if e.type == "error" or (e.type == COMPLETED and normalize(e.transcript)[-3:]
                                     == ["for", "your", "country"]):
                break
    errors = [e.error.message for e in events if e.type == "error"]
    assert not errors, errors
    text = " ".join(e.transcript for e in events if e.type == COMPLETED)
    assert normalize(text)[-6:] == "you can do for your country".split(), text
    assert_openai_order(events)


@pytest.mark.timeout(120)
def test_turn_detection_switched_mid_speech_and_a_commit_inside_a_word(live_server):
    """Switching to manual turns while the VAD had a turn open made the next final loop
    forever on the event loop (the whole server hung); a commit under server_vad inside a
    word left the word's turn open for good, and every later turn's words went into it, with
    no delta or completed again. Now the first is the manual buffer, the second a turn of its
    own, and later turns complete as ever."""
    jfk = s16(at(load16k("jfk.wav"), 24000))
    lj = s16(at(load16k("LJ001-0002.wav"), 24000))
    quiet = s16(np.zeros(24000, np.float32))
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "turn_detection": {"type": "server_vad"}}}})
        third = len(jfk) // 3 // 2 * 2
        conn.input_audio_buffer.append(audio=base64.b64encode(jfk[:third]).decode())
        conn.input_audio_buffer.commit()  # inside speech: the VAD's turn is still open
        conn.input_audio_buffer.append(audio=base64.b64encode(jfk[third:]).decode())
        for pcm in (quiet, lj, quiet, quiet):
            conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        events = []
        while not any(e.type == COMPLETED and "modern" in e.transcript.lower()
                      for e in events):
            events.append(conn.recv())
        assert_openai_order(events)
        # speech opens a VAD turn; manual turns from here on
        conn.input_audio_buffer.append(audio=base64.b64encode(jfk[:third]).decode())
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "turn_detection": None}}})
        conn.input_audio_buffer.append(audio=base64.b64encode(jfk[third:] + quiet).decode())
        conn.input_audio_buffer.commit()
        mine, switched = None, False  # the manual turn: the first committed after the switch
        while True:
            events.append(e := conn.recv())
            if e.type == "session.updated":
                switched = True
            elif e.type == "input_audio_buffer.committed" and switched and mine is None:
                mine = e.item_id
            elif e.type == COMPLETED and e.item_id == mine:
                break
        assert_openai_order(events)
    # (its words: from where the VAD's last turn ended, "ask not ...")
    assert wer("ask not what your country can do for you, ask what you can do for your "
               "country.", e.transcript) <= 0.3, e.transcript


@pytest.mark.timeout(90)
def test_a_beta_client_gets_the_beta_item_event(live_server):
    """A client speaking the beta (``transcription_session.update``) is told of each turn's
    item with the beta's ``conversation.item.created``, and never the GA events it does not
    know (``conversation.item.added``, ``.done``)."""
    import json

    import websockets.sync.client as ws_client

    pcm = s16(at(load16k("LJ001-0002.wav"), 24000))
    url = live_server.url + "/v1/realtime?intent=transcription"
    with ws_client.connect(url, additional_headers={"Authorization": "Bearer any"}) as ws:
        ws.send(json.dumps({"type": "transcription_session.update", "session": {
            "input_audio_format": "pcm16", "turn_detection": None}}))
        ws.send(json.dumps({"type": "input_audio_buffer.append",
                            "audio": base64.b64encode(pcm).decode()}))
        ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        kinds = []
        while COMPLETED not in kinds:
            kinds.append(json.loads(ws.recv(timeout=60))["type"])
    i = kinds.index("input_audio_buffer.committed")
    assert kinds[i + 1] == "conversation.item.created", kinds
    assert "conversation.item.added" not in kinds and "conversation.item.done" not in kinds
    # one that says so in its header is greeted the beta's way, and its session reads back in
    # the beta's flat shape (it was the GA shape, whose fields a beta client reads as empty)
    with ws_client.connect(url, additional_headers={"Authorization": "Bearer any",
                                                    "OpenAI-Beta": "realtime=v1"}) as ws:
        hello = json.loads(ws.recv(timeout=30))
        assert hello["type"] == "transcription_session.created", hello
        assert hello["session"]["input_audio_format"] == "pcm16", hello
        ws.send(json.dumps({"type": "transcription_session.update", "session": {
            "input_audio_format": "g711_ulaw", "input_audio_transcription": {
                "model": "gpt-4o-transcribe", "language": "en"}}}))
        up = json.loads(ws.recv(timeout=30))
        assert up["type"] == "transcription_session.updated", up
        assert up["session"]["input_audio_format"] == "g711_ulaw", up
        assert up["session"]["input_audio_transcription"]["language"] == "en", up
