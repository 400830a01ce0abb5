"""The terminal's flowing text never starts a line with a closing mark that came as the next
final's first word (client/printer.py's Flow, pure: text in, characters out)."""

from __future__ import annotations

from whisperwire.client.printer import Flow
from whisperwire.server.text import closes


def flow(width: int, *finals: tuple[str, float, float]) -> list[str]:
    f = Flow(width=width)
    return "".join([*(f.final(*x) for x in finals), f.end()]).splitlines()


def test_a_comma_in_the_next_final_takes_the_character_before_it_along():
    lines = flow(40, ("新華社貴陽二月十八日電貴州高原上寒氣尚", 0, 3), ("未", 3, 3.2),
                 ("，街頭黔女已著裙裝。", 3.2, 5))
    assert lines == ["新華社貴陽二月十八日電貴州高原上寒氣尚", "未，街頭黔女已著裙裝。"]


def test_a_comma_after_a_pause_stays_on_its_line():
    lines = flow(40, ("我們今天要講的", 0, 2), ("，台灣的夜市文化。", 3.5, 5))
    assert lines == ["我們今天要講的，台灣的夜市文化。"]
    assert not any(closes(x[:1]) for x in lines)


def test_english_lines_still_fill_the_width():
    """Whisper writes an English word with its marks ("country,"): no room is kept."""
    lines = flow(20, ("the quick brown fox", 0, 1), ("jumps over", 1, 2))
    assert lines == ["the quick brown fox", "jumps over"]
    assert flow(20, ("aaaa bbbb cccc ddddd", 0, 1), (" eee.", 1, 2)) == ["aaaa bbbb cccc ddddd", "eee."]


def test_a_sentence_ended_inside_a_quotation_ends_its_line_after_the_closing_mark():
    """Whisper ends a final at "。" and opens the next with "」": the line broke at the
    sentence end, and the next line started with the closing mark."""
    lines = flow(40, ("他说：「我们走吧。", 0, 1), ("」然后就走了。", 1.1, 2))
    assert lines == ["他说：「我们走吧。」", "然后就走了。"]
    # a quotation opened on a line the text wrapped from; a lone closing mark as a final
    lines = flow(30, ("她问：“你好吗？我们今天要去哪里呢，我们今天要去哪里呢？", 0, 3), ("”", 3.1, 3.2),
                 ("Fine.", 5, 6))
    assert lines == ["她问：“你好吗？我们今天要去哪", "里呢，我们今天要去哪里呢？”", "Fine."]
    assert not any(closes(x[:1]) for x in lines)
    # a sentence outside any quotation still ends its line at once (a pipe reads it then)
    f = Flow(width=40)
    assert f.final("我们走吧。", 0, 1).endswith("\n")
    # and the line held for the mark ends when the next final has none
    assert flow(40, ("他说：「走吧。", 0, 1), ("然后走了。", 1.1, 2)) == ["他说：「走吧。", "然后走了。"]


def test_a_line_held_for_nested_closing_marks_keeps_room_for_all_of_them():
    """A review's finding: room was kept for one "」", and "』」" made a 30-cell line at 28."""
    from whisperwire.client.printer import cells

    for width in (28, 29):
        lines = flow(width, ("他说：「她说：『我们走吧。", 0, 1), ("』」然后走了。", 1.1, 2))
        assert all(cells(x) <= width for x in lines), (width, lines)
        assert not any(closes(x[:1]) for x in lines), lines
