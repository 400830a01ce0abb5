"""The OBS overlay starts a line where an utterance ends, as the page does: after a final with
``eou`` and at ``utterance_end``. It filled lines by width only, so utterances without a full
stop ran together ("Wi-Fi門鈴也住推了土" / "地市場的火爆他稱他製"). Against a scripted server
(tests/test_follow_js.py's): each message is exact."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from browser_support import launch, wait_for
from conftest import load16k, s16
from test_follow_js import open_page, partial

pytestmark = pytest.mark.timeout(120)
OVERLAY = "[data-testid=overlay]"
FIRST = "他稱他製作了一個Wi-Fi門鈴"  # 25 columns
SECOND = "也住推了土地市場的火爆"  # 22 columns: the two do not fit one line of 42


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


def final(seg: int, text: str, eou: bool = False) -> str:
    return json.dumps({"type": "final", "segment": seg, "text": text, "start": seg,
                       "end": seg + 1, "words": [], "eou": eou})


def utterance_end(end: float) -> str:
    return json.dumps({"type": "utterance_end", "end": end})


def lines(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.inner_text(OVERLAY).split("\n")


def test_an_utterances_last_final_and_utterance_end_each_start_a_line(browser):
    """The case seen: two Chinese utterances without "。", at the default width of 42."""
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=4&partial=0", [
        [final(0, "他稱他製作了"), final(1, "一個Wi-Fi門鈴", eou=True), final(2, SECOND),
         utterance_end(3.0), final(3, "他稱他製")]])
    wait_for(lambda: page.inner_text(OVERLAY).endswith("他稱他製"), 10, "the third final",
             page=page)
    assert lines(page) == [FIRST, SECOND, "他稱他製"]
    page.close()


def test_the_partial_after_an_utterance_end_is_on_a_line_of_its_own(browser):
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=2", [
        [final(0, "one two", eou=True), partial(1, "three")]])
    wait_for(lambda: "three" in page.inner_text(OVERLAY), 10, "the partial", page=page)
    assert lines(page) == ["one two", "three"]
    server.send(final(1, "three four"))
    server.send(utterance_end(2.0))
    server.send(partial(2, "five"))
    # the lines limit holds: the oldest utterance went off the top
    wait_for(lambda: lines(page) == ["three four", "five"], 5, "the next partial below",
             page=page)
    page.close()


def test_a_replayed_final_closing_its_utterance_ends_the_line(browser):
    """The utterance ended while the overlay was away (a drop): the replay carries the end on
    its last final (the channel keeps ``eou`` there), which the overlay had shown without it."""
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=4&width=200&partial=0", [
        [final(0, "one")], [final(0, "one", eou=True), final(1, "two")]])
    wait_for(lambda: page.inner_text(OVERLAY) == "one", 10, "the first final", page=page)
    server.close(1001)
    wait_for(lambda: "two" in page.inner_text(OVERLAY), 15, "the replay and the next final",
             page=page)
    assert lines(page) == ["one", "two"]
    page.close()


def test_an_utterance_end_does_not_hold_off_the_fade(browser):
    """An utterance end is no speech: the lines fade ``fade`` seconds after the last final."""
    page, server = open_page(browser, "/overlay?session=s&fade=1&lines=2", [[final(0, "one")]],
                             clock=True)
    wait_for(lambda: page.inner_text(OVERLAY) == "one", 10, "the final", page=page)
    page.clock.run_for(600)
    server.send(utterance_end(1.0))
    page.wait_for_timeout(100)  # (delivered)
    # past the fade (checked every 250 ms) and the 700 ms the fade-out takes, counted from the
    # final; counted from the utterance end they would still show
    page.clock.run_for(1450)
    assert page.inner_text(OVERLAY) == ""
    page.close()


def test_no_line_starts_with_a_closing_mark_after_an_utterance_end(browser):
    """Chinese finals open with the comma that ends the clause before them: after an
    utterance's end, "，然后..." started a line (a review of this stop's commits); the marks
    go on the closed line."""
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=4&partial=0", [
        [final(0, "我觉得这个东西很好", eou=True), final(1, "，然后我们就一起去了", eou=True),
         final(2, "」他说完就走了")]])
    wait_for(lambda: page.inner_text(OVERLAY).endswith("走了"), 10, "the third final",
             page=page)
    assert lines(page) == ["我觉得这个东西很好，", "然后我们就一起去了」", "他说完就走了"]
    page.close()


def test_an_utterance_end_keeps_fading_lines_faded(browser):
    """An utterance end redraws the lines: a line already fading came back whole, then went
    (a review of this stop's commits)."""
    page, server = open_page(browser, "/overlay?session=s&fade=1&lines=2", [[final(0, "one")]],
                             clock=True)
    wait_for(lambda: page.inner_text(OVERLAY) == "one", 10, "the final", page=page)
    page.clock.run_for(1300)  # (past the fade: the line fades out over 700 ms)
    server.send(utterance_end(1.0))
    page.wait_for_timeout(100)
    faded = page.eval_on_selector_all(f"{OVERLAY} .line", "els => els.map(e => "
                                      "e.classList.contains('faded'))")
    assert faded and all(faded), faded
    page.close()


def _stream(url: str, audio: np.ndarray, session: str):  # type: ignore[no-untyped-def]
    """Stream flat out as ``session``, on another thread: Playwright's sync API owns this
    thread's event loop."""
    import asyncio

    from whisperwire.client.stream import stream_pcm
    from whisperwire.server import wire

    params = wire.ListenParams(session=session)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, stream_pcm(url, s16(audio), params, speed=0)).result()


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_the_overlay_breaks_where_the_viewer_page_does_on_real_speech(live_server, browser):
    """Two utterances (jfk, 2 s of silence, LJ001-0009) through the real server and model:
    the overlay, wide enough never to wrap, shows the page's lines, one per utterance."""
    sid = "overlay-breaks"
    audio = np.concatenate([load16k("jfk.wav"), np.zeros(32000, np.float32),
                            load16k("LJ001-0009.wav")])
    res = _stream(live_server.url, audio, sid)
    assert "books" in res.text.lower(), res.text
    overlay = browser.new_page()
    overlay.goto(f"{live_server.http}/overlay?session={sid}&fade=0&lines=20&width=1000&partial=0")
    viewer = browser.new_page()
    viewer.goto(f"{live_server.http}/?view={sid}")
    page_lines = lambda: [x for x in viewer.inner_text("[data-testid=finals]").split("\n") if x]
    wait_for(lambda: "books" in " ".join(page_lines()).lower(), 30, "the viewer page's finals")
    try:
        wait_for(lambda: lines(overlay) == page_lines(), 30, "the overlay's lines")
    except AssertionError:  # (say how they differ)
        assert lines(overlay) == page_lines()
    assert len(page_lines()) >= 2, page_lines()
    overlay.close()
    viewer.close()


def test_the_viewer_page_puts_closing_marks_on_the_line_an_utterance_ended(browser):
    """The page breaks lines at utterance ends too: "，然后..." started a line there."""
    page, server = open_page(browser, "/?view=s", [
        [final(0, "我觉得这个东西很好", eou=True), final(1, "，然后我们就走了。", eou=True)]])
    text = lambda: page.inner_text("[data-testid=finals]")
    wait_for(lambda: "走了" in text(), 10, "the second final", page=page)
    assert text().strip().split("\n") == ["我觉得这个东西很好，", "然后我们就走了。"]
    page.close()


def test_the_page_takes_marks_after_an_utterance_end_without_an_indent_or_a_blank_line(browser):
    """English ", then ..." after a closed line began the next with a space (an indent in
    pre-wrap), and a final of marks only with ``eou`` left a blank line (a review)."""
    page, server = open_page(browser, "/?view=s", [
        [final(0, "So we left", eou=True), final(1, ", then we came back", eou=True),
         final(2, "他说", eou=True), final(3, "。", eou=True), final(4, "好", eou=True)]])
    text = lambda: page.inner_text("[data-testid=finals]")
    wait_for(lambda: "好" in text(), 10, "the last final", page=page)
    assert text().strip("\n").split("\n") == ["So we left,", "then we came back", "他说。", "好"]
    page.close()
