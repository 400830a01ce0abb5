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
