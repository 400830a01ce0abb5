"""Cue limits where finals meet: a closing mark that is the next final's first word, and a word
Whisper wrote in pieces over many finals (server/subtitles.py, table-driven, no server)."""

from __future__ import annotations

from whisperwire.server.subtitles import CueOptions, cues
from whisperwire.server.text import closes, display_width
from whisperwire.server.wire import Final, Word

OPT = CueOptions()
A = "一二三四五六七八九十一二三四五六七八九十一"  # 21 characters: a line of 42 columns


def fin(seg: int, text: str, start: float, per: float = 0.1, eou: bool = False) -> Final:
    """A Chinese final as Whisper sends it: a word per character, "，" one of its own."""
    ws = [Word(ch, start + i * per, start + (i + 1) * per, 0.9) for i, ch in enumerate(text)]
    return Final(segment=seg, text=text, start=start, end=ws[-1].end, words=ws, eou=eou)


def within_limits(finals: list[Final], opt: CueOptions = OPT) -> list[tuple[str, ...]]:
    """The cues' lines, after checking every limit of a cue and that no cue or line starts
    with a closing mark."""
    out = cues(finals, opt)
    for c in out:
        assert 1 <= len(c.lines) <= opt.max_lines, c
        assert all(display_width(x) <= opt.max_chars for x in c.lines), c
        assert not any(closes(x[:1]) for x in c.lines), c
    return [c.lines for c in out]


def test_a_comma_after_a_full_cue_takes_the_character_before_it_along():
    lines = within_limits([fin(0, A + A[::-1], 0.0), fin(1, "，然後我們走了。", 4.2, eou=True)])
    assert "".join(lines[1]).startswith("一，然後"), lines


def test_a_comma_after_seven_seconds_stays_with_its_cue():
    first = fin(0, "我們今天要講的主題是關於", 0.0, 0.58)  # (ends at 6.96 s)
    rest = fin(1, "，台灣的夜市文化。", 7.05, 0.2, eou=True)
    for comma in (Word("，", 7.05, 7.05, 0.9),  # (zero-length, as Whisper times it)
                  Word("，", 6.96, 7.16, 0.9)):  # (the reporter's)
        finals = [first, Final(1, rest.text, comma.start, rest.end, [comma, *rest.words[1:]],
                               eou=True)]
        lines = within_limits(finals)
        assert lines == [("我們今天要講的主題是關於，",), ("台灣的夜市文化。",)], comma


def test_a_closing_quote_after_a_sentence_end_stays_with_it():
    finals = [fin(0, "他說：「" + A + "。", 0.0), fin(1, "」然後走了。", 2.7, eou=True)]
    lines = within_limits(finals)
    assert "".join(lines[0]).endswith("。」"), lines


def test_a_comma_after_an_utterance_end_stays_with_it():
    lines = within_limits([fin(0, "好吧", 0.0, eou=True), fin(1, "，我們走吧。", 1.0, eou=True)])
    assert lines == [("好吧，",), ("我們走吧。",)]


def test_a_number_written_in_pieces_over_many_finals_keeps_the_limits():
    """One cue once ran 00:00:00,000 --> 00:00:10,000 with a line of 80 columns."""
    finals, t = [], 0.0
    for seg in range(8):
        ws = []
        for p in (" 0912" if seg == 0 else "-4", "-9", "-2", "-1", "-3"):
            ws.append(Word(p, t, t + 0.25, 0.9))
            t += 0.25
        finals.append(Final(segment=seg, text="".join(w.word for w in ws).strip(),
                            start=ws[0].start, end=t, words=ws))
    out = cues(finals)
    within_limits(finals)
    assert all(c.end - c.start <= OPT.max_seconds for c in out), out
    assert "".join(x for c in out for x in c.lines) == "".join(f.text for f in finals)


def test_a_word_in_two_pieces_is_still_one_word():
    finals = [Final(0, "I use", 0.0, 1.0, [Word(" I", 0, 0.5, 1), Word(" use Wi", 0.5, 1, 1)]),
              Final(1, "-Fi daily.", 1.0, 2.0, [Word("-Fi", 1, 1.5, 1), Word(" daily.", 1.5, 2, 1)],
                    eou=True)]
    assert within_limits(finals, CueOptions(max_chars=10)) == [("I use", "Wi-Fi"), ("daily.",)]


def test_a_closing_mark_after_a_pause_does_not_hold_the_cue_up():
    """"他说" (0-0.8 s, its utterance's end) and, 12 s later, "，然后": the mark stays with
    "他说", and the cue ended at 12.05 s against its 7 s limit (a review of this stop's
    commits)."""
    said = Final(0, "他说", 0.0, 0.8, (Word("他", 0.0, 0.4, 0.9), Word("说", 0.4, 0.8, 0.9)),
                 eou=True)
    later = Final(1, "，然后", 12.0, 12.6, (Word("，", 12.0, 12.05, 0.9),
                                          Word("然", 12.05, 12.3, 0.9), Word("后", 12.3, 12.6, 0.9)))
    out = cues([said, later])
    assert out[0].lines == ("他说，",) and out[0].end - out[0].start <= 7.0, out
    assert out[1].lines == ("然后",) and out[1].start >= 12.0, out
