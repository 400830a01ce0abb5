"""Line breaks after punctuation in subtitles (server/text.py's wrap_units), and the page's
live lines (web/text.js's wrap, which Chromium runs), which stay where they were."""

from __future__ import annotations

import random

import pytest
from test_lang_web import ORIGIN, page  # noqa: F401, F811 (its page, with text.js loaded)

from whisperwire.server.subtitles import cues
from whisperwire.server.text import display_width, split_units, wrap_units
from whisperwire.server.wire import Final, Word

pytestmark = pytest.mark.timeout(120)
REPORTED = {  # (a Mandarin user's; the lines broke "飄 / 然過世" and "先融入周 / 圍環境")
    "貴陽高原上韓企尚未散進，街頭前女已著羣裝飄然過世。":
        ["貴陽高原上韓企尚未散進，", "街頭前女已著羣裝飄然過世。"],
    "而且行動也很隱密，抱貓的普適方式是先融入周圍環境，然後門鋪向列舞。":
        ["而且行動也很隱密，", "抱貓的普適方式是先融入周圍環境，", "然後門鋪向列舞。"],
    "Well, you know, I think we should go to the store today.":
        ["Well, you know,", "I think we should go to the store today."],
    # a comma that would leave a line of a few columns is no place to break
    "Yes, I think we should go to the store today and buy some milk.":
        ["Yes, I think we should go to the store", "today and buy some milk."],
}


def test_lines_break_after_punctuation_that_leaves_them_full_enough():
    for text, want in REPORTED.items():
        assert wrap_units(split_units(text), 42) == want, text


def test_a_cue_ends_at_the_comma_rather_than_break_a_word():
    text = "而且行動也很隱密，抱貓的普適方式是先融入周圍環境，然後門鋪向列舞。"
    ws = [Word(ch, i * 0.15, (i + 1) * 0.15, 0.9) for i, ch in enumerate(text)]
    out = cues([Final(0, text, 0.0, ws[-1].end, ws, eou=True)])
    assert [c.lines for c in out] == [("而且行動也很隱密，", "抱貓的普適方式是先融入周圍環境，"),
                                      ("然後門鋪向列舞。",)]




def test_a_break_after_punctuation_never_takes_another_line_nor_overflows():
    """A comma break at half a line made a two-line sentence take three, the last a word (a
    two-line cue lost its first clause); a line more is taken only for lines of a third of the
    width or more. And the words left after a cut, with the next one, could overflow ("that
    of do telecommunications" at 24 columns)."""
    two = "Yeah, so the thing is, we never actually got the chance to finish it."
    assert wrap_units(split_units(two), 42) == [
        "Yeah, so the thing is, we never actually", "got the chance to finish it."]
    rng = random.Random(7)
    vocab = ["a", "the", "of", "do", "that", "resting", "extraordinary", "telecommunications",
             "we", "think", "tomorrow.", "so,", "well,", "yes;", "now:", "it", "go", "store"]
    for _ in range(3000):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 30)))
        width = rng.choice([16, 20, 24, 30, 42])
        lines = wrap_units(split_units(text), width)
        filled = _filled(split_units(text), width)
        assert len(lines) <= len(filled) or 3 * min(map(display_width, lines)) >= width, (
            text, width, lines)
        assert all(display_width(x) <= width for x in lines if len(split_units(x)) > 1), (
            text, width, lines)
        assert " ".join(lines) == text


def _filled(units: list[str], width: int) -> list[str]:
    lines: list[list[str]] = []
    for u in units:
        if lines and display_width(" ".join(lines[-1] + [u])) <= width:
            lines[-1].append(u)
        else:
            lines.append([u])
    return [" ".join(x) for x in lines]


def test_the_pages_live_lines_keep_what_they_show(page):  # noqa: F811
    """The overlay wraps its open line again with each partial: a preferred break after
    "Americans," moved words already shown down a line, and back as the partial changed."""
    shown = "And so my fellow Americans, ask not what"
    for partial in ("", " your", " your country"):
        got = page.evaluate(f"async (a) => (await import('{ORIGIN}/text.js')).wrap(a[0], a[1])",
                            [shown + partial, 42])
        assert got[0] == shown, got
