"""LocalAgreement over units, driven by scripted hypotheses (English and Chinese)."""

from __future__ import annotations

from whisperwire.server.agreement import HypothesisBuffer, join_words, split_units, unit_key
from whisperwire.server.wire import Word


def words(text: str, t0: float = 0.0, dur: float = 0.3) -> list[Word]:
    return [Word(" " + w, t0 + i * dur, t0 + (i + 1) * dur, 0.9) for i, w in enumerate(text.split())]


def test_commits_only_what_two_hypotheses_share():
    b = HypothesisBuffer()
    b.insert(words("and so my"))
    assert b.commit_agreed() == []
    assert join_words(b.pending) == "and so my"
    b.insert(words("And so, my fellow"))
    got = b.commit_agreed()
    assert join_words(got) == "And so, my"  # case/punctuation folded; newer form committed
    assert join_words(b.pending) == "fellow"
    # the next hypothesis continues after the committed text (forced prefix)
    b.insert(words("fellow Americans", t0=0.9))
    assert join_words(b.commit_agreed()) == "fellow"
    b.insert(words("Americans ask", t0=1.2))
    assert join_words(b.commit_agreed()) == "Americans"
    assert join_words(b.commit_all()) == "ask"
    assert b.pending == []


def test_disagreement_commits_nothing():
    b = HypothesisBuffer()
    b.insert(words("so am I"))
    b.commit_agreed()
    b.insert(words("so my fellow"))
    assert join_words(b.commit_agreed()) == "so"
    b.insert(words("am I"))
    b.commit_agreed()
    b.insert(words("my fellow"))
    assert b.commit_agreed() == []


def test_where_two_hypotheses_disagree_is_reported_once_it_has_waited():
    b = HypothesisBuffer()
    b.insert(words("so am I here"))
    b.commit_agreed()
    b.insert(words("so my eye here"))
    assert join_words(b.commit_agreed(stuck_until=0.5)) == "so"
    assert b.undecided_end is None  # "my" ends at 0.6: not waited long enough
    b.insert(words("am I here now", t0=0.3))
    assert b.commit_agreed(stuck_until=0.7) == []
    assert b.undecided_end == 0.6  # where the newer hypothesis's first differing unit ends


def test_committed_words_never_overlap_or_go_back():
    b = HypothesisBuffer(committed_end=1.0)
    b.insert([Word(" a", 0.8, 1.2, 1), Word(" b", 1.1, 1.0, 1)])
    out = b.commit_all()
    assert out[0].start == 1.0
    for prev, cur in zip(out, out[1:]):
        assert cur.start >= prev.end and cur.end >= cur.start


def test_commit_until_time():
    b = HypothesisBuffer()
    b.insert(words("one two three four"))
    assert join_words(b.commit_until(0.65)) == "one two"
    assert join_words(b.pending) == "three four"


def test_chinese_units_agree_character_by_character():
    # Whisper gives unspaced text as a few long "words"; agreement must still grow per character
    hyps = ["我们", "我们今天", "我们今天讨论", "我们今天讨论天气"]
    b = HypothesisBuffer()
    committed = ""
    for i, h in enumerate(hyps):
        already = len(committed)
        rest = h[already:]
        b.insert([Word(rest, 0.1 * already, 0.1 * len(h), 0.9)])
        committed += join_words(b.commit_agreed())
    assert committed == "我们今天讨论"
    assert join_words(b.pending) == "天气"
    assert join_words(b.commit_all()) == "天气"


def test_chinese_revision_stops_at_first_differing_character():
    b = HypothesisBuffer()
    b.insert([Word("天气很好", 0.0, 0.8, 0.9)])
    b.commit_agreed()
    b.insert([Word("天器很好吗", 0.0, 1.0, 0.9)])
    assert join_words(b.commit_agreed()) == "天"


def test_split_units():
    u = split_units([Word(" 你好", 1.0, 2.0, 0.5), Word(" hello", 2.0, 2.5, 0.9)])
    assert [w.word for w in u] == [" 你", "好", " hello"]
    assert u[0].start == 1.0 and u[0].end == u[1].start == 1.5 and u[1].end == 2.0
    assert [w.word for w in split_units([Word("こんにちは", 0, 1, 1)])] == list("こんにちは")


def test_unit_key():
    assert unit_key(" Hello,") == unit_key("hello") == "hello"
    assert unit_key("。") == "。"


def test_a_number_at_the_edge_of_agreement_waits_for_the_word_after_it():
    """Whisper writes a spoken number as digits only once it has heard all of it: LJ's
    "fourteen fifty-five" was "14" in two steps whose windows ended inside it, and the step
    after, forced past a committed "14", said "1455" from the same start ("of about 14 1455",
    in every real-time run over the WebSocket). A number is final with the word after it."""
    b = HypothesisBuffer()
    b.insert(words("Bible of about 14"))
    b.commit_agreed()
    b.insert(words("Bible of about 14"))
    assert join_words(b.commit_agreed()) == "Bible of about"
    b.insert(words("1455 has", t0=0.9))
    assert b.commit_agreed() == []
    b.insert(words("1455 has never", t0=0.9))
    assert join_words(b.commit_agreed()) == "1455 has"
    assert join_words(b.commit_all()) == "never"


def test_a_number_the_next_word_agrees_after_is_final_with_it():
    b = HypothesisBuffer()
    b.insert(words("in 2019 we grew"))
    b.commit_agreed()
    b.insert(words("in 2019 we grow"))
    assert join_words(b.commit_agreed()) == "in 2019 we"


def test_a_number_in_unspaced_text_waits_whole():
    """Full-width digits are units of their own (the CJK split): all of the number waits, not
    only its last digit ("２０" final and then "１９年" would be "２０１９年" read in two)."""
    b = HypothesisBuffer()
    for _ in range(2):
        b.insert([Word("我们在２０", 0.0, 1.0, 0.9)])
        got = b.commit_agreed()
    assert join_words(got) == "我们在"


def test_words_well_before_the_window_end_need_no_second_hypothesis_when_alone_until_says():
    """Under load (steps far apart) one hypothesis makes final the words that end by
    ``alone_until``, far enough from the window's end that more audio rarely changes them;
    doubted words and a number at the edge still wait, and later words still need agreement."""
    b = HypothesisBuffer()
    b.insert(words("so my fellow Americans ask"))  # ends 0.3, 0.6, 0.9, 1.2, 1.5
    assert join_words(b.commit_agreed(alone_until=0.95)) == "so my fellow"
    b.insert(words("Americans, do not", t0=0.9))  # agrees on "Americans": the rest waits
    assert join_words(b.commit_agreed(alone_until=0.95)) == "Americans,"
    # a doubted word stops it, as it stops agreement
    b = HypothesisBuffer()
    doubted = words("so my fellow")
    doubted[1] = Word(" my", 0.3, 0.6, 0.1)
    b.insert(doubted)
    assert join_words(b.commit_agreed(min_probability=0.3, alone_until=1.0)) == "so"
    # a number at its edge waits for the word after it
    b = HypothesisBuffer()
    b.insert(words("of about 14 fifty"))
    assert join_words(b.commit_agreed(alone_until=0.95)) == "of about"
    # with no ``alone_until`` nothing changes: one hypothesis commits nothing
    b = HypothesisBuffer()
    b.insert(words("so my fellow Americans ask"))
    assert b.commit_agreed() == []


def _w(word: str, start: float, end: float) -> Word:
    return Word(word, start, end, 0.9)


def test_a_final_never_ends_inside_a_written_word():
    """Whisper writes "$3.5" as the words " $3" and ".5", "COVID-19" as " COVID" and "-19".
    A careful decode that decided the doubted "$3" made it final alone (its end was the time
    to commit by), and ".5 billion" came as the next final (espeak, real time, two start
    offsets of three). Our own clients glue such a piece back on (``text.glued``), but a
    Deepgram client got "$3" and ".5" as the words of two results, and "$3 .5" where it joins
    their transcripts with a space, as clients do."""
    b = HypothesisBuffer()
    b.insert([_w(" We", 0.0, 0.4), _w(" expect", 0.4, 0.86), _w(" $3", 0.88, 1.2),
              _w(".5", 1.2, 1.84), _w(" billion.", 1.84, 2.12)])
    assert join_words(b.commit_until(1.5)) == "We expect"  # the word waits whole
    assert join_words(b.pending) == "$3.5 billion."
    assert join_words(b.commit_until(2.0)) == "$3.5"
    # a piece the aligner stretched over seconds the decoder wrote nothing for stays pending
    b = HypothesisBuffer()
    b.insert([_w(" The", 10.0, 10.3), _w(" COVID", 10.3, 10.8), _w("-19", 10.8, 14.9)])
    assert join_words(b.commit_until(12.0)) == "The"
    assert b.committed_end == 10.3
    # a written word cut off with nothing before it waits too, unless the window must move on
    b = HypothesisBuffer()
    b.insert([_w(" $3", 0.0, 0.4), _w(".5", 0.4, 0.9)])
    assert b.commit_until(0.5) == []
    assert join_words(b.commit_until(0.5, move_on=True)) == "$3"
    # agreement ending at a word whose rest the two hypotheses disagree on commits neither
    b = HypothesisBuffer()
    b.insert([_w(" The", 0.0, 0.3), _w(" COVID", 0.3, 0.8), _w("-18", 0.8, 1.1)])
    b.commit_agreed()
    b.insert([_w(" The", 0.0, 0.3), _w(" COVID", 0.3, 0.8), _w("-19", 0.8, 1.1),
              _w(" pull", 1.1, 1.4)])
    assert join_words(b.commit_agreed()) == "The"
    # ... and a number before it waits too, not only the word
    b = HypothesisBuffer()
    b.insert([_w(" about", 0.0, 0.3), _w(" 14", 0.3, 0.6), _w(" COVID", 0.6, 0.9),
              _w("-18", 0.9, 1.2)])
    b.commit_agreed()
    b.insert([_w(" about", 0.0, 0.3), _w(" 14", 0.3, 0.6), _w(" COVID", 0.6, 0.9),
              _w("-19", 0.9, 1.2), _w(" cases", 1.2, 1.5)])
    assert join_words(b.commit_agreed()) == "about"
    # (unspaced scripts have no spaces to tell words by: their units agree one by one)
    b = HypothesisBuffer()
    b.insert([_w("我们", 0.0, 0.4), _w("知道", 0.4, 0.8)])
    assert join_words(b.commit_until(0.5)) == "我们"
