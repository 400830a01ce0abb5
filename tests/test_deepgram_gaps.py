"""Deepgram's silences after an utterance (speech_final, UtteranceEnd), driven with numbers."""

from __future__ import annotations

from whisperwire.server.dialects.deepgram_gaps import Gaps


def test_speech_final_and_utterance_end_wait_for_their_silence():
    g = Gaps(endpointing=1.0, utterance_end=2.0)
    g.speech(0.0)
    g.words()
    g.silence()
    g.ended(3.0)  # the VAD ended the utterance; its last word ends at 3.0 s
    assert g.due(3.5) == (False, False) and not g.ripe(3.9)
    assert g.ripe(4.0) and g.due(4.0) == (True, False)
    assert g.due(4.5) == (False, False), "each is said once"
    assert g.due(5.0) == (False, True)
    assert g.due(9.0) == (False, False)


def test_speech_that_resumes_sooner_makes_the_pause_no_end():
    g = Gaps(endpointing=1.5, utterance_end=2.0)
    g.speech(0.0)
    g.words()
    g.silence()
    g.ended(3.0)
    g.speech(4.2)  # 1.2 s later: before either
    assert g.due(9.0) == (False, False)
    g.words()
    g.silence()
    g.ended(6.0)  # the next end: UtteranceEnd covers both utterances' words
    assert g.due(8.0) == (True, True)
    # a resumption known only after the end (flat out: the decode came late) counts as well
    g.speech(6.4)
    g.ended(6.3)
    assert g.due(20.0) == (False, False)


def test_defaults_say_the_end_at_once_but_never_inside_speech_nor_twice_without_words():
    g = Gaps(endpointing=0.0, utterance_end=None)  # no endpointing asked: at the VAD's end
    g.speech(0.0)
    g.words()
    g.silence()
    g.ended(1.0)
    assert g.due(1.0) == (True, False)
    g.speech(2.0)
    g.ended(2.5)  # a finalize while the speaker goes on
    assert g.due(2.6) == (False, False)
    g = Gaps(endpointing=None, utterance_end=1.0)  # endpointing=false: no speech_final
    g.silence()
    g.ended(0.0)  # noise: no words, so no UtteranceEnd
    assert g.due(5.0) == (False, False)
