"""The overlay's and the viewer page's reconnect rules, against a scripted server: Playwright
stands in for the WebSocket server so each case (a refusal, a drop, a replay, a new speaker) is
exact and fast. The same rules against the real server: tests/test_browser_edges.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser_support import launch, wait_for

pytestmark = pytest.mark.timeout(120)

WEB = Path(__file__).resolve().parent.parent / "web"
ORIGIN = "http://follow.test"


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


def final(seg: int, text: str) -> str:
    return json.dumps({"type": "final", "segment": seg, "text": text, "start": seg, "end": seg + 1,
                       "words": [], "eou": True})


def partial(seg: int, text: str) -> str:
    return json.dumps({"type": "partial", "segment": seg, "text": text, "start": seg,
                       "end": seg + 1})


def error(code: str) -> str:
    return json.dumps({"type": "error", "code": code, "message": f"{code} message"})


CLOSED = json.dumps({"type": "closed", "reason": "client_close", "audio_seconds": 1.0})


def channel(instance: str, session: str = "s") -> str:
    return json.dumps({"type": "channel", "session": session, "instance": instance})


class Scripted:
    """The server side of each viewer connection, in order: ``scripts[i]`` is a list of text
    messages for connection i, then ("close", code) to close it, else it stays open."""

    def __init__(self, page, scripts: list[list]) -> None:  # type: ignore[no-untyped-def]
        self.scripts, self.routes = scripts, []
        page.route_web_socket(re.compile(r".*/events.*"), self._handle)

    def _handle(self, ws) -> None:  # type: ignore[no-untyped-def]
        i = len(self.routes)
        self.routes.append(ws)
        for step in self.scripts[i] if i < len(self.scripts) else []:
            if isinstance(step, tuple):
                ws.close(code=step[1], reason="scripted")
            else:
                ws.send(step)

    def send(self, msg: str) -> None:
        self.routes[-1].send(msg)

    def close(self, code: int) -> None:
        self.routes[-1].close(code=code, reason="scripted")


def open_page(browser, path: str, scripts: list[list], clock: bool = False):  # type: ignore[no-untyped-def]
    """``clock``: the page's timers run on Playwright's clock (``page.clock.run_for``), so a
    backoff of seconds passes at once."""
    page = browser.new_page()
    if clock:
        page.clock.install()

    def serve(route):  # type: ignore[no-untyped-def]
        url = route.request.url.removeprefix(ORIGIN)
        name = url.split("?")[0].lstrip("/") or "index.html"
        name = {"overlay": "overlay.html"}.get(name, name)
        kind = "text/html" if name.endswith(".html") else (
            "text/css" if name.endswith(".css") else "text/javascript")
        route.fulfill(path=str(WEB / name), content_type=kind)

    page.route(ORIGIN + "/**", serve)
    server = Scripted(page, scripts)
    page.goto(ORIGIN + path)
    return page, server


def test_overlay_waits_for_the_session_and_follows_it(browser):
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=5&width=200", [
        [error("unknown_session"), ("close", 1008)],  # set up before the stream starts
        [final(0, "one."), final(1, "two."), CLOSED],  # a speaker came and went
    ])
    text = lambda: page.inner_text("[data-testid=overlay]")
    assert text() == "", "nothing shows while it waits (it is on a stream)"
    # (each final closes its utterance, ``eou``: a line each, as on the page)
    wait_for(lambda: text() == "one.\ntwo.", 15, "the first speaker's finals", page=page)
    # the socket stays open after `closed`: the next speaker continues the numbering
    server.send(partial(2, "three"))
    wait_for(lambda: text() == "one.\ntwo.\nthree", 5, "the next speaker's partial, on a line "
             "of its own", page=page)
    server.send(final(2, "three."))
    # a drop, even a clean 1000: it reconnects; the replay shows nothing twice
    server.scripts.append([final(0, "one."), final(1, "two."), final(2, "three.")])
    server.close(1000)
    wait_for(lambda: len(server.routes) == 3, 10, "a reconnect after 1000", page=page)
    page.wait_for_timeout(300)
    assert text() == "one.\ntwo.\nthree."
    server.send(final(3, "four."))
    wait_for(lambda: text() == "one.\ntwo.\nthree.\nfour.", 5, "live finals after it", page=page)
    page.close()


def test_overlay_starts_over_when_the_numbering_does(browser):
    """A server restart loses the channel; a speaker who comes back starts from segment 0."""
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=5&width=200", [
        [final(0, "old."), final(1, "old two.")],
    ])
    text = lambda: page.inner_text("[data-testid=overlay]")
    wait_for(lambda: text() == "old.\nold two.", 10, "the first finals", page=page)
    server.scripts.append([partial(0, "new")])
    server.close(1001)
    wait_for(lambda: len(server.routes) == 2, 10, "a reconnect", page=page)
    server.send(final(0, "new."))
    wait_for(lambda: text().endswith("new."), 5, "the new speaker's first final", page=page)
    page.close()


@pytest.mark.parametrize("path, shown", [
    ("/overlay?session=s&fade=0&lines=8&width=200", "[data-testid=overlay]"),
    ("/?view=s", "[data-testid=finals]"),
])
def test_a_new_life_of_the_channel_is_shown_from_its_first_final(browser, path, shown):
    """A server killed and started again: the channel's new life numbers its finals from 0, and
    the first thing a viewer gets is their replay (no partial first to tell). Before, the
    viewer page, the overlay and ``whisperwire captions`` took them for replays of the old
    life and showed nothing until the count passed the old one."""
    page, server = open_page(browser, path, [
        [channel("a"), final(0, "one."), final(1, "two."), final(2, "three.")],
    ])
    text = lambda: " ".join(page.inner_text(shown).split())
    wait_for(lambda: text() == "one. two. three.", 10, "the first life", page=page)
    server.scripts.append([channel("b"), final(0, "four."), final(1, "five.")])
    server.close(1006)
    wait_for(lambda: len(server.routes) == 2, 10, "a reconnect", page=page)
    wait_for(lambda: text() == "one. two. three. four. five.", 5, "the new life's finals",
             page=page)
    # and the same life's replay after a drop is still not shown twice
    server.scripts.append([channel("b"), final(0, "four."), final(1, "five."), final(2, "six.")])
    server.close(1006)
    wait_for(lambda: len(server.routes) == 3, 10, "a reconnect", page=page)
    wait_for(lambda: text() == "one. two. three. four. five. six.", 5, "one new final",
             page=page)
    page.close()


def test_viewer_page_back_after_a_drop_stops_saying_it_is_reconnecting(browser):
    page, server = open_page(browser, "/?view=s", [[channel("a"), final(0, "one.")]])
    message = lambda: page.inner_text("[data-testid=message]")
    wait_for(lambda: "one." in page.inner_text("[data-testid=finals]"), 10, "a final", page=page)
    server.scripts.append([channel("a"), final(0, "one.")])
    server.close(1006)
    wait_for(lambda: len(server.routes) == 2, 10, "a reconnect", page=page)
    wait_for(lambda: "reconnecting" not in message(), 5, "the drop's message gone", page=page)
    assert page.inner_text("[data-testid=status]") == "watching"
    page.close()


@pytest.mark.parametrize("code", ["unauthorized", "bad_session"])
def test_overlay_stops_on_a_wrong_token_or_id(browser, code):
    page, server = open_page(browser, "/overlay?session=s", [[error(code), ("close", 1008)]])
    wait_for(lambda: len(server.routes) == 1, 10, "the first connection", page=page)
    page.wait_for_timeout(4000)  # it would retry within 1 s, an unknown session within 3 s
    assert len(server.routes) == 1
    page.close()


def test_viewer_page_says_the_speaker_stopped_and_shows_the_next(browser):
    page, server = open_page(browser, "/?view=s", [[final(0, "one."), CLOSED]])
    finals = lambda: page.inner_text("[data-testid=finals]")
    wait_for(lambda: "speaker stopped" == page.inner_text("[data-testid=status]"), 10,
             "the page to say the speaker stopped", page=page)
    assert finals().split() == ["one."]
    server.send(final(1, "two."))
    wait_for(lambda: finals().split() == ["one.", "two."], 5, "the next speaker", page=page)
    assert page.inner_text("[data-testid=status]") == "watching"
    server.scripts.append([final(0, "one."), final(1, "two.")])
    server.close(1000)
    wait_for(lambda: len(server.routes) == 2, 10, "a reconnect after 1000", page=page)
    server.send(final(2, "three."))
    wait_for(lambda: finals().split() == ["one.", "two.", "three."], 5,
             "new finals, and the replay not repeated", page=page)
    page.close()


def test_viewer_page_gives_up_after_bounded_drops(browser):
    page, server = open_page(browser, "/?view=s", [[final(0, "one.")]] + [[("close", 1001)]] * 20,
                             clock=True)
    wait_for(lambda: len(server.routes) == 1, 10, "the first connection", page=page)
    server.close(1001)

    def gave_up() -> bool:  # the backoff (0.5 s doubling to 10 s, twelve tries, as a speaker's
        page.clock.run_for(1000)  # page makes to come back) on the page's clock
        return page.inner_text("[data-testid=status]") == "disconnected"

    wait_for(gave_up, 60, "the page to give up", every=0.05, page=page)
    assert len(server.routes) == 1 + 12, "twelve tries after the drop, then it says so"
    assert "Reload" in page.inner_text("[data-testid=message]")
    page.close()


def test_viewer_page_starts_a_new_line_for_the_next_speaker(browser):
    """The last speaker's last final may have gone out without ``eou`` (made final before it
    closed): the ``closed`` between two speakers ends the line all the same."""
    open_final = json.dumps({"type": "final", "segment": 0, "text": "and the others", "start": 0,
                             "end": 1, "words": [], "eou": False})
    page, server = open_page(browser, "/?view=s", [[open_final, CLOSED]])
    finals = lambda: page.inner_text("[data-testid=finals]")
    wait_for(lambda: "speaker stopped" == page.inner_text("[data-testid=status]"), 10,
             "the page to say the speaker stopped", page=page)
    server.send(final(1, "in being comparatively modern."))
    wait_for(lambda: "modern" in finals(), 5, "the next speaker", page=page)
    assert finals().splitlines()[:2] == ["and the others", "in being comparatively modern."]
    page.close()


def test_overlay_lines_never_move_once_full_and_a_speaker_end_breaks_the_line(browser):
    """A full line stays as it is until it scrolls off the top (it rewrapped the last 20
    finals at every update, so once the oldest dropped off every break moved and the shown
    line changed with no new speech); a speaker's end starts a new line (the page and the CLI
    do). Options that are not numbers fall back to their defaults."""
    words = ("most if not from all the arts and crafts represented in the exhibition printing "
             "may be considered as the art of arts and the one that has never been surpassed "
             "by later work since the earliest book printed with movable types").split()
    finals = [final(i, " ".join(words[i % 40 : i % 40 + 1 + i % 3]) + ("." if i % 4 == 3 else ""))
              for i in range(36)]
    page, server = open_page(browser, "/overlay?session=s&fade=0&lines=6&width=30&partial=0", [
        finals[:1]])
    shown = lambda: page.inner_text("[data-testid=overlay]").split("\n")
    wait_for(lambda: shown() != [""], 10, "the first final", page=page)
    before = shown()
    for f in finals[1:]:
        server.send(f)
        page.wait_for_timeout(40)
        now = shown()
        # the full lines before, less those that scrolled off the top, are shown unchanged,
        # then the line that was being filled (it may have grown)
        full = before[:-1]
        gone = next(k for k in range(len(full) + 1) if now[: len(full) - k] == full[k:])
        assert now[len(full) - gone].startswith(before[-1]), (before, now)
        assert all(len(line) <= 30 for line in now)
        before = now
    server.send(CLOSED)
    server.send(final(36, "next."))
    wait_for(lambda: shown()[-1] == "next.", 5, "the next speaker on a line of its own",
             page=page)
    page.close()
    page, server = open_page(browser, "/overlay?session=s&lines=x&width=0&size=big&color=ffff00",
                             [[final(0, "one two three four five six seven eight nine ten.")]])
    wait_for(lambda: page.inner_text("[data-testid=overlay]") != "", 10, "the final", page=page)
    assert len(shown()) == 2 and len(shown()[0]) > 30, shown()  # lines 2, width 42
    assert page.eval_on_selector("[data-testid=overlay]", "e => e.style.color") == \
        "rgb(255, 255, 0)"
    page.close()


def test_a_speaker_page_with_a_token_the_server_refused_says_so(browser):
    """It said "The server needs a token" for a wrong or view-only one too."""
    page, _ = open_page(browser, "/overlay?session=s", [])
    said = lambda ctx: page.evaluate(  # noqa: E731
        "(ctx) => import('/explain.js').then((m) => m.explainError({code: 'unauthorized'}, ctx))",
        ctx)
    assert "needs a token" in said({})
    assert "did not accept this page's token" in said({"token": True})
    assert "viewer link" in said({"viewer": True, "token": True})
    page.close()


def test_overlay_words_it_does_not_know_fall_back_to_their_defaults(browser):
    """``align=bogus`` left the text left-aligned (the browser's own default for an invalid
    value), where a bad number falls back to the overlay's default (centred)."""
    for query, align, top in (("align=bogus&position=nowhere", "center", False),
                              ("align=right&position=top", "right", True)):
        page, _ = open_page(browser, f"/overlay?session=s&{query}", [[final(0, "one.")]])
        box = "document.getElementById('box')"
        assert page.evaluate(f"getComputedStyle({box}).textAlign") == align, query
        assert (page.evaluate(f"{box}.style.top") == "2%") is top, query
        page.close()
