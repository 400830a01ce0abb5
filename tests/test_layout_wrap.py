"""Line breaks after punctuation (server/text.py's wrap_units, and web/text.js's wrap, which
Chromium runs and which must give the same lines)."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import launch

from whisperwire.server.subtitles import cues
from whisperwire.server.text import display_width, split_units, wrap_units
from whisperwire.server.wire import Final, Word

pytestmark = pytest.mark.timeout(120)
WEB = Path(__file__).resolve().parent.parent / "web"
ORIGIN = "http://layout.test"
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


@pytest.fixture(scope="module")
def page():
    with launch() as b:
        p = b.new_page()
        p.route(ORIGIN + "/**", lambda r: r.fulfill(
            path=str(WEB / r.request.url.removeprefix(ORIGIN + "/")), content_type="text/javascript")
            if r.request.url.endswith(".js") else r.fulfill(body="<html></html>",
                                                            content_type="text/html"))
        p.goto(ORIGIN + "/")
        yield p


def test_the_page_breaks_lines_where_the_subtitles_do(page):
    texts = [*REPORTED, "他说：“我们走吧。”好，再见！现场活动包括打猎，钓鱼，摄影。"]
    for text in texts:
        for width in range(10, 44, 4):
            got = page.evaluate(f"async (a) => (await import('{ORIGIN}/text.js')).wrap(a[0], a[1])",
                                [text, width])
            assert got == wrap_units(split_units(text), width), (text, width)
            assert all(display_width(x) <= width for x in got if len(split_units(x)) > 1)
