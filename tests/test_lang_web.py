"""web/text.js against server/text.py, string by string (Chromium runs the module), and the
page's language menu from the loaded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_support import launch

from whisperwire.server.text import display_width, join_texts, split_units, wrap_units

pytestmark = pytest.mark.timeout(120)
WEB = Path(__file__).resolve().parent.parent / "web"
ORIGIN = "http://text.test"
CASES = ["他称他制作了一个wifi门铃", "Hello there, how are you?", "日本 coaster 小巴车。好",
         "现场活动包括打猎，钓鱼，摄影", "I use Google Docs 写东西", "こんにちは 世界", ""]
PAIRS = [("你好", "世界"), ("Hello.", "How are you?"), ("一个", "wifi"), ("works", ", mostly"),
         ("", "好"), ("门铃。", "Next"), ("said,", "\"We"), ("the", "'60s."), ("Rock", "¿Qué?"),
         ("a", "#1"), ("x", "& y"), ("at", "@home"), ("Closed\"", ".")]


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


def js(page, expr: str, arg):  # type: ignore[no-untyped-def]
    return page.evaluate(f"async (a) => {{ const t = await import('{ORIGIN}/text.js'); "
                         f"return {expr}; }}", arg)


def test_join_units_and_widths_match_python(page):
    for left, right in PAIRS:
        assert js(page, "t.joinText(a[0], a[1])", [left, right]) == join_texts([left, right])
    for text in CASES:
        assert js(page, "t.units(a)", text) == [u.strip() for u in split_units(text)], text
        assert js(page, "t.displayWidth(a)", text) == display_width(text), text


def test_wrap_matches_python_within_the_width(page):
    for text in CASES:
        for width in (10, 20, 42):
            got = js(page, f"t.wrap(a, {width})", text)
            assert "".join(got).replace(" ", "") == text.replace(" ", ""), json.dumps(got)
            assert all(display_width(x) <= width for x in got if len(split_units(x)) > 1)
            # the same lines as the subtitles' wrap, less its preference for punctuation
            if not any(c in text for c in "，。,"):
                assert got == wrap_units(split_units(text), width), (text, width)


MARKED = "爆猫的普适方式是先融入旧圆环境，然后我们不像猎物。他说：“我们走吧。”好，再见！"


def test_no_line_starts_with_a_closing_mark_in_the_overlay_or_the_subtitles(page):
    """Chinese typesetting never starts a line with "，" or "。": the overlay's lines and the
    subtitles' did ("，然后我们不像猎物。" at 30 columns). The character before the mark goes
    down with it."""
    from whisperwire.server.text import closes

    for width in range(6, 44, 2):
        for lines in (js(page, f"t.wrap(a, {width})", MARKED),
                      wrap_units(split_units(MARKED), width)):
            assert "".join(lines) == MARKED, lines
            assert not any(closes(x[:1]) for x in lines), (width, lines)
            assert all(display_width(x) <= width for x in lines), (width, lines)


def test_a_final_that_goes_on_the_last_word_is_glued_as_in_python(page):
    from whisperwire.server.text import append_piece, glued
    from whisperwire.server.wire import Word

    for first in ("as", " as", "-Fi", " Then"):
        m = {"text": first.strip() + "小巴", "words": [{"word": first}]}
        glue = js(page, "t.glued(a)", m)
        assert glue == glued([Word(first, 0, 1, 1)]), first
        for left in ("日本Cost", "Then Wi", "Hello."):
            assert js(page, "t.joinText(a[0], a[1], a[2])", [left, m["text"], glue]) == \
                append_piece(left, m["text"], glue)
    assert js(page, "t.glued(a)", {"text": "x"}) is False  # (no words: the text's rules)
