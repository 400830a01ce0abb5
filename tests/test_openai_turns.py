"""OpenAI realtime's conversation items (``dialects.openai_turns.Turns``), driven with stream
times and words: the order OpenAI's clients rely on (committed, deltas, completed, once each),
and each word in the turn it was spoken in."""

from whisperwire.server.dialects.openai_turns import Turns
from whisperwire.server.wire import Word

DELTA = "conversation.item.input_audio_transcription.delta"
DONE = "conversation.item.input_audio_transcription.completed"
COMMITTED = "input_audio_buffer.committed"


def w(text: str, start: float, end: float) -> Word:
    return Word(text, start, end, 0.9)


def kinds(events):
    return [k for k, _ in events]


def test_server_vad_words_final_before_the_turn_is_committed_wait_for_committed():
    t = Turns(vad=True)
    ev = t.speech_started(1.0)
    assert kinds(ev) == ["input_audio_buffer.speech_started"]
    item = ev[0][1]["item_id"]
    assert t.final([w(" Hello", 1.1, 1.4)], eou=False) == []  # no delta before committed
    ev = t.speech_stopped(2.0)
    assert kinds(ev) == ["input_audio_buffer.speech_stopped", COMMITTED, DELTA]
    assert ev[2][1] == {"item_id": item, "content_index": 0, "delta": "Hello"}
    ev = t.final([w(" there.", 1.5, 1.8)], eou=True)
    assert kinds(ev) == [DELTA, DONE]
    assert ev[1][1]["transcript"] == "Hello there."
    assert ev[1][1]["usage"] == {"type": "duration", "seconds": 1.0}
    assert t.final([], eou=True) == [] and t.utterance_end(1.8) == []  # completed once


def test_server_vad_one_final_spanning_two_turns_splits_at_the_pause():
    t = Turns(vad=True)
    a = t.speech_started(0.5)[0][1]["item_id"]
    t.speech_stopped(2.0)
    b = t.speech_started(3.0)[0][1]["item_id"]
    t.speech_stopped(4.0)
    ev = t.final([w(" one", 0.6, 1.0), w(" two", 1.2, 1.9), w(" three", 3.1, 3.6)], eou=True)
    assert [(k, b_.get("item_id"), b_.get("delta") or b_.get("transcript")) for k, b_ in ev] == [
        (DELTA, a, "one two"), (DONE, a, "one two"), (DELTA, b, "three"), (DONE, b, "three")]


def test_an_utterance_end_of_an_earlier_turn_does_not_complete_the_next():
    t = Turns(vad=True)
    t.speech_started(0.5)
    t.commit(1.5)  # the client commits inside the speech
    t.final([w(" Yes.", 0.6, 1.2)], eou=False)
    ev = t.utterance_end(1.2)
    assert kinds(ev) == [DONE]
    t.speech_started(3.0)
    assert t.utterance_end(1.8) == []  # the VAD's end of the committed speech: no turn's


def test_manual_turns_hold_words_until_a_commit_and_complete_when_flushed():
    t = Turns(vad=False)
    assert t.speech_started(0.2) == []  # manual: the VAD opens no turn
    assert t.final([w(" ask", 0.3, 0.6), w(" not", 0.7, 0.9)], eou=False) == []
    ev = t.commit(1.0)
    assert kinds(ev) == [COMMITTED, DELTA] and ev[1][1]["delta"] == "ask not"
    # a word whose middle lies past the commit is the next turn's, even if it began before
    ev = t.final([w(" what", 0.95, 1.25)], eou=True)
    assert kinds(ev) == [DONE] and ev[0][1]["transcript"] == "ask not"
    assert t.settle(flushed=True) == []
    ev = t.commit(2.0)
    assert kinds(ev) == [COMMITTED, DELTA] and ev[1][1]["delta"] == "what"
    assert t.settle(flushed=False) == []
    assert kinds(t.settle(flushed=True)) == [DONE]


def test_clear_drops_only_the_uncommitted_audios_words_and_its_open_turn():
    t = Turns(vad=True)
    t.speech_started(0.5)
    t.speech_stopped(1.5)
    t.speech_started(2.0)
    assert kinds(t.clear(2.5)) == ["input_audio_buffer.cleared"]
    ev = t.final([w(" kept", 0.6, 1.0), w(" dropped", 2.1, 2.4), w(" later", 3.0, 3.3)],
                 eou=False)
    texts = [b.get("delta") for k, b in ev if k == DELTA]
    assert texts[0] == "kept" and "dropped" not in " ".join(texts)
    # "later": speech past the clear that no VAD start opened is a committed turn at once
    # (committed first, then the turn before it completes, since "later" lies past it)
    assert kinds(ev) == [DELTA, COMMITTED, DONE, DELTA] and texts[-1] == "later"


def test_switching_to_manual_commits_the_open_turn_once():
    """In the connection's order: the switch, then the finals its finalize makes (manual
    rules by then), then the flush that says nothing heard is left."""
    t = Turns(vad=True)
    t.speech_started(0.5)
    ev, ended = t.to_manual(1.0)
    assert ended and kinds(ev) == [COMMITTED] and not t.vad
    ev, ended = t.to_manual(1.2)
    assert not ended and ev == []
    ev = t.final([w(" hi", 0.6, 0.9)], eou=True)
    assert kinds(ev) == [DELTA] and ev[0][1]["delta"] == "hi"  # the committed turn's word
    done = t.settle(flushed=True)
    assert kinds(done) == [DONE] and done[0][1]["transcript"] == "hi"
    assert t.settle(flushed=True) == []  # completed once
