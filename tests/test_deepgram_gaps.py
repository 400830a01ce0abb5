"""Deepgram's silences after an utterance (speech_final, UtteranceEnd), driven with numbers."""

from __future__ import annotations

from whisperwire.server.dialects.deepgram_gaps import Gaps


def utterance(g: Gaps, start: float, end: float) -> None:
    """Speech from ``start``, its words final up to ``end``, and the VAD's end after it."""
    g.speech(start)
    g.words(start + 0.05, end)
    g.silence()
    g.ended()


def test_speech_final_and_utterance_end_wait_for_their_silence():
    g = Gaps(endpointing=1.0, utterance_end=2.0)
    utterance(g, 0.0, 3.0)
    assert g.due(3.5) == (False, False) and not g.ripe(3.9)
    assert g.ripe(4.0) and g.due(4.0) == (True, False)
    assert g.due(4.5) == (False, False), "each is said once"
    assert g.due(5.0) == (False, True)
    assert g.due(9.0) == (False, False)


def test_speech_that_resumes_sooner_makes_the_pause_no_end():
    g = Gaps(endpointing=1.5, utterance_end=2.0)
    utterance(g, 0.0, 3.0)
    g.speech(4.2)  # 1.2 s later: before either; the words tell it was speech
    assert g.due(9.0) == (False, False), "a start holds them until the words say"
    g.words(4.3, 6.0)
    g.silence()
    g.ended()  # the next end: UtteranceEnd covers both utterances' words
    assert g.due(8.0) == (True, True)


def test_a_cough_is_no_speech_and_the_silence_goes_on():
    """A VAD blip with no words (a cough at 2.6-2.9 s after words ending at 2.0) neither
    cancels UtteranceEnd nor says speech_final again (it did both)."""
    g = Gaps(endpointing=0.3, utterance_end=1.0)
    utterance(g, 0.0, 2.0)
    assert g.due(2.4) == (True, False)
    g.speech(2.6)
    assert g.due(2.9) == (False, False)  # (the gap stops at the start, for now)
    g.silence()
    g.ended()  # the cough's end: no words
    assert g.due(3.0) == (False, True), "the silence since 2.0 reached 1 s"
    g.ended()  # a Finalize answered with nothing left: no second speech_final
    assert g.due(5.0) == (False, False)


def test_defaults_say_the_end_at_once_but_never_inside_speech():
    g = Gaps(endpointing=0.0, utterance_end=None)  # no endpointing asked: at the VAD's end
    utterance(g, 0.0, 1.0)
    assert g.due(1.0) == (True, False)
    g.speech(2.0)
    g.words(2.1, 2.5)
    g.ended(goes_on=True)  # a finalize while the speaker goes on
    assert g.due(2.6) == (False, False)
    g.silence()  # ... until they stop, and what they said after it is decoded
    assert g.due(2.7) == (False, False)
    g.ended()  # (no more words: the utterance's end says so)
    assert g.due(2.8) == (True, False)
    g = Gaps(endpointing=None, utterance_end=1.0)  # endpointing=false: no speech_final
    g.speech(0.0)
    g.silence()
    g.ended()  # noise: no words, so no UtteranceEnd
    assert g.due(5.0) == (False, False)


def test_speech_heard_before_the_last_words_came_ends_the_silence_there():
    """Audio sent faster than real time: the VAD heard the next speech (3.5-4.4 s) before the
    decoder gave the words before it; it still ends their silence. Those words' final cleared
    it, and the silence ran on over that speech to the audio received (4.7 s)."""
    g = Gaps(endpointing=0.3, utterance_end=None)
    g.speech(0.3)
    g.silence()
    g.speech(3.5)  # the next speech, heard ahead of the decoder
    g.silence()
    g.words(0.35, 2.04)  # the first utterance's words, final now
    g.ended()
    assert g.starts == [3.5]
    assert g.due(4.7) == (True, False)  # the 1.46 s pause before it was long enough
    g.words(3.54, 4.4)  # and its words then start no new silence before them
    assert g.starts == []


def test_a_cough_heard_ahead_of_the_decoder_keeps_the_speech_after_it():
    """Flat out: words, a cough, more speech, all heard before the cough's end (no words)
    came. The cough's end dropped every start, the next speech's too, and the silence ran on
    over that speech."""
    g = Gaps(endpointing=0.3, utterance_end=None)
    g.speech(0.0)
    g.silence()
    g.speech(2.5)  # the cough
    g.silence()
    g.speech(4.0)  # speech still to be decoded
    g.words(0.05, 2.0)
    g.ended()
    assert g.due(2.4) == (True, False)  # (0.5 s of silence before the cough: said)
    g.ended()  # the cough's end: no words
    assert g.starts == [4.0]


def test_after_a_finalize_inside_speech_the_speech_that_goes_on_holds_the_end():
    """jfk finalized at 6.5 s, inside "... your country can do | for you" (as Pipecat does
    at a short pause): the answer's words end at 6.66; the VAD heard "for you" (7.24-7.74)
    in the same utterance and ended it at 8.0, before its words were final. Then 1.4 s of
    "silence" after 6.66 said speech_final and UtteranceEnd, and "For you." came after."""
    g = Gaps(endpointing=0.0, utterance_end=1.0)
    g.speech(4.9)
    g.words(5.7, 6.66)
    g.ended(goes_on=True)  # its answer, while the VAD still hears speech
    assert g.due(7.0) == (False, False)
    g.silence()  # the VAD ends the utterance at 8.0: its last words are being decoded
    assert g.due(8.05) == (False, False)
    g.words(7.24, 7.74)
    g.ended()  # "For you.", the utterance's end
    assert g.due(8.15) == (True, False) and g.due(8.8) == (False, True)


def test_after_a_finalize_inside_speech_an_utterance_with_no_more_words_ends():
    """The same, when the finalize came in the VAD's hangover: the utterance ends with no
    more words (its end decode says so), and the silence after 6.66 counts as before."""
    g = Gaps(endpointing=0.0, utterance_end=1.0)
    g.speech(4.9)
    g.words(5.7, 6.66)
    g.ended(goes_on=True)
    g.silence()
    assert g.due(7.2) == (False, False)
    g.ended()  # the utterance's end: nothing more
    assert g.due(7.3) == (True, False) and g.due(7.7) == (False, True)


def test_after_a_finalize_inside_speech_a_decoder_behind_the_vad_still_holds_the_end():
    """The same finalize with the decoder behind the VAD (a slower CPU, a busy server, audio
    sent faster than real time): the VAD had ended the utterance at 8.0 when the answer was
    written, and its silence said speech_final and UtteranceEnd before "For you." (the client
    took "can do for you" for a new turn). Whether speech goes on is the session's to say when
    it makes the answer, not the VAD's when the answer is written."""
    g = Gaps(endpointing=0.0, utterance_end=1.0)
    g.speech(4.9)
    g.silence()  # the VAD's end at 8.0, before the answer is written
    g.words(5.7, 6.66)
    g.ended(goes_on=True)  # (the session: "For you." is still to be decoded)
    assert g.due(8.1) == (False, False)
    g.words(7.24, 7.74)
    g.ended()  # "For you.", the utterance's end
    assert g.due(8.2) == (True, False) and g.due(8.8) == (False, True)


def test_a_finalize_in_silence_lets_its_answer_end_the_utterance():
    """Pipecat's Finalize after its own VAD said the user stopped (our VAD ended too): the
    answer's end starts the silence at once, as a VAD's end does."""
    g = Gaps(endpointing=0.0, utterance_end=1.0)
    g.speech(0.2)
    g.silence()
    g.words(0.3, 2.06)
    g.ended(goes_on=False)
    assert g.due(2.9) == (True, False) and g.due(3.1) == (False, True)


def test_a_finalize_answered_by_the_utterances_own_end_decode_ends_it():
    """A Finalize while the VAD heard speech, and the VAD's end before the answer was decoded:
    one end decode of the whole utterance answered both. Judged by the VAD at the Finalize,
    speech "went on", no end came after to say so, and speech_final and UtteranceEnd never
    came (a voice agent waited for the user's turn to end for ever)."""
    g = Gaps(endpointing=0.3, utterance_end=1.0)
    g.speech(4.9)
    g.silence()
    g.words(5.7, 6.9)
    g.ended(goes_on=False)  # (the session: nothing is left to decide)
    assert g.due(7.3) == (True, False) and g.due(8.0) == (False, True)
