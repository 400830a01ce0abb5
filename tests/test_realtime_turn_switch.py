"""OpenAI realtime turns around a switch from manual turns back to ``server_vad``, and speech
that goes on after a ``commit`` or ``clear`` inside it. The policy (``openai_turns.Turns``)
driven with numbers, then the real server, model and speech through the official openai SDK.

Two losses QA found: words final while turns were manual (``turn_detection: null``) were held
for a commit that a switch to ``server_vad`` never made, so no item ever had them; and speech
after a mid-utterance commit or clear came back as one completed item per word."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import numpy as np
import pytest
from conftest import load16k, references, s16
from test_openai_realtime import COMPLETED, assert_openai_order, at, client, items
from whisperwire.server.dialects.openai_turns import Turns
from whisperwire.server.wer import normalize, wer
from whisperwire.server.wire import Word

DELTA = "conversation.item.input_audio_transcription.delta"
STARTED = "input_audio_buffer.speech_started"
STOPPED = "input_audio_buffer.speech_stopped"
COMMITTED = "input_audio_buffer.committed"
CLEARED = "input_audio_buffer.cleared"


def w(text: str, start: float, end: float) -> Word:
    return Word(text, start, end, 0.9)


def kinds(events) -> list[str]:
    return [k for k, _ in events]


def said(events, kind: str, key: str) -> list[tuple[str, str]]:
    """(item_id, text) of each event of ``kind``."""
    return [(b["item_id"], b[key]) for k, b in events if k == kind]


# -- the policy, with numbers -------------------------------------------------------------------
def test_manual_buffer_becomes_the_vad_turn_under_way_at_the_switch():
    """Manual turns hold final words for a commit; the switch made none, and they were lost."""
    t = Turns(vad=False)
    assert t.speech_started(0.3) == []
    assert t.final([w(" And", 0.4, 0.6), w(" so", 0.6, 0.9)], eou=False) == []
    ev = t.to_vad(8.0)  # speech still going on: that turn is under way, started at the buffer
    assert kinds(ev) == [STARTED] and ev[0][1]["audio_start_ms"] == 300
    item = ev[0][1]["item_id"]
    assert t.final([w(" ask", 7.5, 7.9)], eou=False) == []  # no delta before its committed
    ev = t.speech_stopped(11.5)
    assert kinds(ev) == [STOPPED, COMMITTED, DELTA]
    assert said(ev, DELTA, "delta") == [(item, "And so ask")]
    ev = t.final([w(" not.", 10.5, 11.0)], eou=True)
    assert said(ev, COMPLETED, "transcript") == [(item, "And so ask not.")]


def test_manual_buffer_waits_for_the_next_vad_start_when_quiet_at_the_switch():
    """The buffer (words and all) is the next VAD turn's, opened by the VAD's next start; an
    end at or before the buffer's start (an earlier utterance's) commits nothing."""
    t = Turns(vad=False)
    t.speech_started(0.3)
    t.final([w(" Hello.", 0.4, 0.9)], eou=False)
    ev = t.commit(1.0)
    assert kinds(ev) == [COMMITTED, DELTA]
    assert kinds(t.final([w(" Bye", 1.2, 1.6)], eou=False)) == [COMPLETED]  # past the commit
    assert t.speech_stopped(1.0) == []  # (the manual commit's: the VAD's utterance ends)
    assert t.to_vad(2.0) == []
    assert t.speech_stopped(1.0) == []  # (told again: not the buffer's turn's end)
    ev = t.speech_started(3.0)
    assert kinds(ev) == [STARTED]
    item = ev[0][1]["item_id"]
    t.final([w(" now.", 3.1, 3.5)], eou=False)
    ev = t.speech_stopped(4.0)
    assert kinds(ev) == [STOPPED, COMMITTED, DELTA] and ev[1][1]["item_id"] == item
    assert said(t.settle(flushed=True), COMPLETED, "transcript") == [(item, "Bye now.")]


@pytest.mark.parametrize("cut", ["commit", "clear"])
def test_speech_going_on_after_a_commit_or_clear_is_one_turn(cut):
    """Its turn is committed at its first word and runs to the VAD's end: it ended at that
    word, so each next word opened (and completed) a turn of its own. The eou of the
    finalize that the commit asks for is not its end."""
    t = Turns(vad=True)
    first = t.speech_started(0.3)[0][1]["item_id"]
    t.final([w(" Ask", 0.4, 0.7), w(" not", 0.8, 1.1)], eou=False)
    ev = t.commit(1.2) if cut == "commit" else t.clear(1.2)
    assert kinds(ev) == ([COMMITTED, DELTA] if cut == "commit" else [CLEARED])
    ev = t.final([w(" what", 1.15, 1.5)], eou=True)  # (the finalize's: one word past the cut)
    new = [b["item_id"] for k, b in ev if k == COMMITTED]
    assert len(new) == 1 and said(ev, DELTA, "delta")[-1] == (new[0], "what")
    # the turn the commit ended completes (past it); the eou does not complete the new one
    assert said(ev, COMPLETED, "transcript") == ([(first, "Ask not")] if cut == "commit"
                                                  else [])
    ev = t.final([w(" your", 1.6, 1.8), w(" country", 1.9, 2.4)], eou=False)
    assert kinds(ev) == [DELTA] and ev[0][1] == {"item_id": new[0], "content_index": 0,
                                                 "delta": " your country"}
    assert t.speech_stopped(3.0) == []  # (committed already: no stopped after it)
    ev = t.final([w(" can.", 2.5, 2.8)], eou=True)
    assert kinds(ev) == [DELTA, COMPLETED]
    assert ev[1][1]["transcript"] == "what your country can."
    assert ev[1][1]["usage"] == {"type": "duration", "seconds": 1.85}


def test_speech_going_on_whose_vad_end_came_first_ends_there():
    """Decoding behind: the VAD ended the speech before its first word past the commit was
    final. Its turn ends at that end, and the next VAD turn's words are the next turn's."""
    t = Turns(vad=True)
    t.speech_started(0.3)
    t.commit(1.2)
    assert t.speech_stopped(3.0) == []
    ev = t.final([w(" what", 1.3, 1.6), w(" your", 1.7, 2.0)], eou=False)
    assert kinds(ev) == [COMMITTED, COMPLETED, DELTA] and ev[2][1]["delta"] == "what your"
    t.speech_started(4.0)
    ev = t.final([w(" Ask", 4.1, 4.4)], eou=False)
    assert said(ev, COMPLETED, "transcript") == [(ev[0][1]["item_id"], "what your")]


def test_speech_a_commit_cut_whose_words_come_after_the_next_turn_began_is_its_own_turn():
    """Further behind: the VAD ended the speech a commit cut and started the next turn before
    any of its words was final. They went into that next turn, whose speech_started (5.0 s)
    came after they were said (a review of this stop's commits); now they are a turn of their
    own, before it."""
    t = Turns(vad=True)
    t.speech_started(1.0)
    t.commit(2.0)
    t.final([w(" one", 1.1, 1.5), w(" two", 1.5, 1.9)], eou=True)
    t.speech_stopped(4.0)
    t.speech_started(5.0)
    ev = t.final([w(" three", 2.1, 2.9), w(" four", 3.0, 3.7)], eou=True)
    ev += t.final([w(" five", 5.1, 5.6)], eou=False)
    t.speech_stopped(6.0)
    ev += t.final([w(" six.", 5.6, 5.9)], eou=True)
    done = [text for _, text in said(ev, COMPLETED, "transcript")]
    assert done == ["three four", "five six."], done


def test_a_commit_or_switch_while_that_speech_goes_on_ends_its_turn():
    """Already committed, so no second item of the same speech; a switch to manual turns
    finalizes it (its last words come after the switch), and a commit's finalize's eou
    completes it."""
    t = Turns(vad=True)
    t.speech_started(0.3)
    t.commit(1.2)
    t.final([w(" what", 1.3, 1.6)], eou=True)
    assert t.commit(2.5) == []
    ev = t.final([w(" your", 1.7, 2.0)], eou=True)
    assert kinds(ev) == [DELTA, COMPLETED] and ev[1][1]["transcript"] == "what your"

    t = Turns(vad=True)
    t.speech_started(0.3)
    t.clear(1.2)
    t.final([w(" what", 1.3, 1.6)], eou=False)
    ev, ended = t.to_manual(2.5)
    assert ended and ev == [] and not t.vad
    ev = t.final([w(" your", 1.7, 2.0), w(" later", 2.6, 3.0)], eou=True)
    assert kinds(ev) == [DELTA, COMPLETED] and ev[1][1]["transcript"] == "what your"
    assert kinds(t.commit(3.5)) == [COMMITTED, DELTA]  # ("later": the manual buffer's)


# -- the real server ----------------------------------------------------------------------------
def _append(conn, pcm: bytes, pause_s: float) -> None:
    for i in range(0, len(pcm), 4800):  # 100 ms of 24 kHz pcm16 each
        conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        time.sleep(pause_s)


def _final_text(srv, sid: str, words: int, wait_s: float = 30) -> str:
    """The session's transcript once it holds at least ``words`` final words."""
    deadline = time.monotonic() + wait_s
    while True:
        text = httpx.get(f"{srv.http}/v1/sessions/{sid}/transcript.json").json()["text"]
        if len(normalize(text)) >= words or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


def _until_country(conn, events: list, wait_s: float = 40) -> None:
    """Collect events until a turn ending jfk's "... for your country" completes."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        events.append(e := conn.recv())
        if e.type == COMPLETED and normalize(e.transcript)[-2:] == ["your", "country"]:
            return


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_words_heard_in_manual_turns_reach_a_turn_after_switching_to_server_vad(live_server):
    """QA's manual2vad: jfk's first 8 s with no commit, whose words are final before the
    switch, then server_vad and the rest. Only "you. Ask what you can do for your country."
    ever completed; now every word of the channel's transcript is in a completed turn."""
    jfk = s16(at(load16k("jfk.wav"), 24000))
    events: list = []
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": None}}})
        sid = conn.recv().session.id
        split = 8 * 48000
        _append(conn, jfk[:split], 0.02)
        _final_text(live_server, sid, 5)  # (held for a commit: the words that were lost)
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}})
        _append(conn, jfk[split:] + s16(np.zeros(36000, np.float32)), 0.02)
        _until_country(conn, events)
    assert_openai_order(events)
    done = [e.transcript for e in events if e.type == COMPLETED]
    for joined, completed in items(events).values():
        assert completed is not None and joined == completed
    channel = _final_text(live_server, sid, 0)
    assert normalize(" ".join(done)) == normalize(channel), (done, channel)
    assert wer(references()["jfk.wav"], " ".join(done)) <= 0.25, done


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("cut", ["commit", "clear"])
def test_speech_after_a_commit_or_clear_at_6_s_is_one_turn_not_one_per_word(live_server, cut):
    """QA's commitmid and clearmid under server_vad: the words after the cut came back as
    'country', 'can', 'do', 'for', 'you.', one completed item each."""
    jfk = s16(at(load16k("jfk.wav"), 24000))
    events: list = []
    with client(live_server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}})
        sid = conn.recv().session.id
        reader = threading.Thread(target=lambda: _until_country(conn, events), daemon=True)
        reader.start()
        cut_at, pause = 6 * 48000, int(7.9 * 48000) // 4800 * 4800  # ("for you" ends at 7.8)
        _append(conn, jfk[:cut_at], 0.05)
        conn.send({"type": f"input_audio_buffer.{cut}"})  # type: ignore[misc]
        _append(conn, jfk[cut_at:pause], 0.05)
        # words past the cut final before the VAD starts the next turn (each was a turn)
        _final_text(live_server, sid, 11, wait_s=15)
        _append(conn, jfk[pause:] + s16(np.zeros(36000, np.float32)), 0.05)
        reader.join(60)
    committed = {e.item_id for e in events if e.type == COMMITTED}
    # (the turn under way at a clear is no turn: OpenAI's too, it was only started)
    assert_openai_order([e for e in events if e.type != STARTED or e.item_id in committed])
    done = [normalize(e.transcript) for e in events if e.type == COMPLETED]
    assert done and done[-1][-3:] == ["for", "your", "country"], done
    assert min(len(d) for d in done) >= 2, done  # (jfk has no one-word turn)
    assert len(done) <= 5, done
    text = " ".join(" ".join(d) for d in done)
    assert "can do for you" in text, done  # (the words after the cut, in one turn)
