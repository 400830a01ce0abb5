"""Final words' times kept out of the silences between utterances, driven with numbers."""

from __future__ import annotations

from whisperwire.server.speech_spans import MAX_WORD_S, SpeechSpans
from whisperwire.server.wire import Word

SR = 16000


def spans(*pairs: tuple[float, float | None]) -> SpeechSpans:
    s = SpeechSpans()
    for a, b in pairs:
        s.start(int(a * SR))
        if b is not None:
            s.end(int(b * SR))
    return s


def w(text: str, a: float, b: float) -> Word:
    return Word(" " + text, a, b, 0.9)


def times(words: list[Word]) -> list[tuple[float, float]]:
    return [(round(x.start, 2), round(x.end, 2)) for x in words]


def test_words_spread_over_a_pause_move_to_the_speech_beside_it():
    """jfk flat out: "Americans" 1.78-2.28 and "ask" 2.28-3.86 over the pause 2.13-3.06."""
    s = spans((0.0, 2.13), (3.06, 4.32), (5.19, None))
    got = s.clamp([w("fellow", 1.4, 1.78), w("Americans", 1.78, 2.28), w("ask", 2.28, 3.86),
                   w("not", 3.86, 4.62), w("what", 4.62, 5.7)])
    assert times(got) == [(1.4, 1.78), (1.78, 2.13), (3.06, 3.86), (3.86, 4.32), (5.19, 5.7)]
    assert [x.word for x in got] == [" fellow", " Americans", " ask", " not", " what"]


def test_edges_near_the_speech_and_words_inside_a_silence_stay():
    s = spans((0.0, 2.0), (3.0, None))
    # within the aligner's slack of either side: as they were
    assert times(s.clamp([w("a", 1.5, 2.08), w("b", 2.93, 3.5)])) == [(1.5, 2.08), (2.93, 3.5)]
    # a word wholly in the silence is not moved out of it (nor made from nothing)
    assert times(s.clamp([w("c", 2.3, 2.6)])) == [(2.3, 2.6)]
    # before the first utterance and in the open one: no silence known
    assert times(spans((1.0, None)).clamp([w("d", 0.2, 1.5)])) == [(0.2, 1.5)]


def test_spans_already_final_are_forgotten():
    s = spans((0.0, 1.0), (2.0, 3.0), (4.0, None))
    s.forget_before(2.5)
    assert s.spans == [[2.0, 3.0], [4.0, None]]
    s.forget_before(99.0)
    assert s.spans == [[4.0, None]]  # (the open one stays)


def test_no_word_is_longer_than_two_seconds():
    """A stream decoded as Chinese that heard English for 11 s wrote nothing of it, and the
    aligner stretched the next character over it: "现" at 9.81-22.83 s, a subtitle cue of 13 s.
    A sentence's last word keeps its start (the decode stopped there: "am." stretched from
    3.30 to 6.86 s over words it never wrote), any other word its end."""
    spans = SpeechSpans()
    spans.start(int(9.5 * 16000))  # (one utterance, English and Chinese: no silence in it)
    w = spans.clamp([Word("现", 9.81, 22.83, 0.5), Word("场", 22.83, 23.1, 0.9)])
    assert [(x.start, x.end) for x in w] == [(22.83 - MAX_WORD_S, 22.83), (22.83, 23.1)]
    w = spans.clamp([Word(" I", 2.66, 3.3, 0.9), Word(" am.", 3.3, 6.86, 0.7)])
    assert [(x.start, x.end) for x in w] == [(2.66, 3.3), (3.3, 3.3 + MAX_WORD_S)]
    w = spans.clamp([Word(' am."', 3.3, 6.86, 0.7)])  # (a sentence ends inside its quotes)
    assert (w[0].start, w[0].end) == (3.3, 3.3 + MAX_WORD_S)
    ok = [Word(" so", 1.0, 2.9, 0.9)]
    assert spans.clamp(ok) == ok


def test_a_sentences_last_word_stretched_over_a_pause_stays_before_it():
    """en-07's first clips flat out: "am." said at 2.95-3.1 s, aligned 3.14-4.12 over the pause
    2.91-4.02; moved to the next utterance it split "than I" / "am. And you know" in
    Deepgram's utterances. A word that goes on the next sentence moves after the pause."""
    s = spans((0.0, 2.91), (4.02, None))
    got = s.clamp([w("I", 2.66, 3.14), w("am.", 3.14, 4.12), w("And", 4.36, 4.68)])
    assert times(got) == [(2.66, 2.91), (3.14, 3.24), (4.36, 4.68)]
    assert times(s.clamp([w("ask", 3.14, 4.12)])) == [(4.02, 4.12)]


# -- a session's spans stay bounded (a review's finding: one span kept per utterance) -------
def _session(**kw):  # type: ignore[no-untyped-def]
    from whisperwire.server.session import StreamOptions, StreamSession
    from whisperwire.server.vad import VadOptions, VadSegmenter

    return StreamSession(StreamOptions(**kw), VadSegmenter(VadOptions(), lambda f: True))


def _bursts(s, n: int, result) -> None:  # type: ignore[no-untyped-def]
    """``n`` half-second bursts 3 s apart, each decoded to ``result``."""
    import numpy as np

    noise = (0.3 * np.random.default_rng(0).standard_normal(SR // 2)).astype(np.float32)
    for _ in range(n):
        s.feed_audio(noise)
        s.feed_audio(np.zeros(int(2.5 * SR), np.float32))
        while (req := s.next_decode()) is not None:
            s.decoded(req.id, result(req))
        s.events()


def _no_words(req):  # type: ignore[no-untyped-def]
    from whisperwire.server.decoding import DecodeResult

    return DecodeResult((), "", 0.9, -1.5, 1.0)  # Whisper: no speech (a cough, a door)


def _one_word(req):  # type: ignore[no-untyped-def]
    from whisperwire.server.decoding import DecodeResult

    return DecodeResult((w("hi", 0.35, 0.6),), " hi", 0.01, -0.2, 1.0)


def test_noise_that_never_becomes_words_keeps_no_spans():
    """Clicks, coughs and doors for 15 minutes: each was an utterance the VAD heard, and its
    span was kept for ever, as only a final with words forgot them."""
    import numpy as np

    s = _session()
    s.feed_audio(np.zeros(SR, np.float32))
    _bursts(s, 300, _no_words)
    assert s.flushed and len(s._spans.spans) <= 10, len(s._spans.spans)  # noqa: SLF001


def test_spans_are_forgotten_with_word_times_in_speech_off_and_after_abandon():
    import numpy as np

    s = _session(word_times_in_speech=False)
    s.feed_audio(np.zeros(SR, np.float32))
    _bursts(s, 300, _one_word)
    assert len(s._spans.spans) <= 10, len(s._spans.spans)  # noqa: SLF001
    s = _session()
    s.feed_audio(np.zeros(SR, np.float32))
    s.feed_audio((0.3 * np.random.default_rng(1).standard_normal(SR // 2)).astype(np.float32))
    s.abandon()  # (mid-utterance: its span never ended, and nothing before it was forgotten)
    s.feed_audio(np.zeros(int(2.5 * SR), np.float32))
    _bursts(s, 300, _one_word)
    assert len(s._spans.spans) <= 10, s._spans.spans[:3]  # noqa: SLF001
