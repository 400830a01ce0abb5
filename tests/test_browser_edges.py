"""The page and the OBS overlay at the edges, in Debian's headless Chromium: refusals shown in
sentences and never retried, drops and speaker restarts survived, and links that carry a view
token, never the speak token."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from browser_support import COUNT_SOCKETS, launch, sockets, wait_for, write_mic_wav
from conftest import SPEECH, LiveServer, references
from whisperwire.server.wer import normalize

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SECOND = "LJ001-0009.wav"  # "Printing, then, for our purpose, ... the art of making books ..."


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with launch(write_mic_wav(tmp_path_factory.mktemp("mic") / "mic.wav")) as b:
        yield b


def stream(url: str, name: str, session: str, token: str | None = None):  # type: ignore[no-untyped-def]
    """Stream a file flat out as ``session``, on another thread: Playwright's sync API owns this
    thread's event loop."""
    from whisperwire.client.stream import stream_file

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(stream_file, url, str(SPEECH / name), speed=0, session=session,
                           token=token).result()


def message(page) -> str:  # type: ignore[no-untyped-def]
    return page.inner_text("#message")


def status(page) -> str:  # type: ignore[no-untyped-def]
    return page.inner_text("[data-testid=status]")


def assert_no_retry(page, seconds: float = 3.0) -> None:  # type: ignore[no-untyped-def]
    """One connection, and none after it for ``seconds`` (a retrying page opens its second
    within a second)."""
    time.sleep(seconds)
    assert len(sockets(page)) == 1, sockets(page)
    assert status(page) not in ("connecting", "reconnecting")


@pytest.mark.parametrize("name, said", [
    ("NotAllowedError", "blocked for this page"),  # the user (or a policy) said no
    ("NotFoundError", "No microphone found"),
    ("NotReadableError", "another program"),
    (None, "not secure"),  # a page on http://LAN-ADDRESS: no navigator.mediaDevices at all
])
def test_a_microphone_the_page_cannot_have_is_said_in_a_sentence(live_server, browser, name, said):
    """The browser's own words ("Permission denied", "Requested device not found") told the
    user nothing they could do."""
    page = browser.new_page()
    page.add_init_script(COUNT_SOCKETS)
    if name is None:
        page.add_init_script("Object.defineProperty(navigator, 'mediaDevices', {value: undefined})")
    else:
        page.add_init_script(
            "navigator.mediaDevices.getUserMedia = () => Promise.reject("
            f"new DOMException('the browser says', '{name}'))")
    page.goto(live_server.http + "/")
    page.click("[data-testid=start]")
    wait_for(lambda: status(page) == "no microphone", 20, "the page to give up on the mic")
    assert said in message(page) and "the browser says" not in message(page), message(page)
    assert "Start" in message(page), "what to do next"
    assert not page.is_disabled("[data-testid=start]") and sockets(page) == []
    page.close()


def test_a_page_that_goes_on_in_a_channel_shows_what_it_holds_so_far(live_server, browser):
    """A page reloaded mid-session (or opened on a channel that already has finals) goes on in
    the same channel: it showed only what came after, while its Download links held all of it
    (a reloaded page showed one line of the three before)."""
    stream(live_server.url, SECOND, "so-far")
    before = httpx.get(f"{live_server.http}/v1/sessions/so-far/transcript.json").json()["text"]
    assert len(before.split()) > 10, before
    page = browser.new_page()
    page.goto(live_server.http + "/?session=so-far")
    page.click("[data-testid=start]")
    wait_for(lambda: status(page) == "live", 30, "live")
    shown = lambda: page.inner_text("[data-testid=finals]").split()  # noqa: E731
    wait_for(lambda: shown()[: len(before.split())] == before.split(), 20,
             "the channel's finals so far, first")
    page.click("[data-testid=stop]")
    wait_for(lambda: status(page) == "stopped", 60, "stopped")
    # Start again in the same page, on the same channel: what it holds, once
    page.click("[data-testid=start]")
    wait_for(lambda: status(page) == "live", 30, "live again")
    opening = " ".join(before.split()[:6])
    wait_for(lambda: " ".join(shown()).count(opening) == 1 and shown()[:6] == before.split()[:6],
             20, "the channel's finals once")
    page.wait_for_timeout(1000)
    assert " ".join(shown()).count(opening) == 1, shown()
    page.click("[data-testid=stop]")
    wait_for(lambda: status(page) == "stopped", 60, "stopped")
    page.close()


def test_a_page_that_goes_on_in_a_channel_puts_each_speakers_turn_on_its_own_line(
        live_server, browser):
    """The channel's earlier speakers, each of whose last final went out without ``eou`` (made
    final before the speaker stopped): the page joined their words and its own on one line
    ("... can do for you. And so my fellow Americans."), where the viewer page and
    transcript.txt break at every speaker's turn."""
    from whisperwire.server.wire import Final

    hub = live_server.app.state.hub
    t = hub.open("turns-page")
    hub.publish(t, Final(0, "Ask not what your country can do for you.", 0.5, 2.5, (), False))
    hub.end(t, 3.0)
    t = hub.open("turns-page")
    hub.publish(t, Final(1, "And so my fellow Americans.", 0.2, 1.5, (), False))
    hub.end(t, 2.0)
    txt = httpx.get(f"{live_server.http}/v1/sessions/turns-page/transcript.txt").text
    assert txt.split("\n")[:2] == ["Ask not what your country can do for you.",
                                    "And so my fellow Americans."], txt
    page = browser.new_page()
    page.goto(live_server.http + "/?session=turns-page")
    page.click("[data-testid=start]")
    lines = lambda: page.inner_text("[data-testid=finals]").split("\n")  # noqa: E731
    wait_for(lambda: len(" ".join(lines()).split()) > 14, 60, "the page's own finals too")
    page.click("[data-testid=stop]")
    wait_for(lambda: status(page) == "stopped", 60, "stopped")
    assert lines()[:2] == txt.split("\n")[:2], lines()
    assert len(lines()) >= 3 and lines()[2].strip(), lines()
    page.close()


def test_a_viewer_page_breaks_the_line_where_an_utterance_end_came(live_server, browser):
    """Every word of "... for your country." was final before the speaker stopped, so its end
    came as ``utterance_end``, which viewers never got: "And so my fellow Americans.", said
    4 s later, ran on in the same line. The events go into the server's hub on its own loop,
    as a speaker's connection publishes them."""
    from whisperwire.server.wire import Final, UtteranceEnd

    hub = live_server.app.state.hub
    loop = live_server.server.servers[0].get_loop()
    t = hub.open("ue-page")
    hub.publish(t, Final(0, "Ask what you can do for your country.", 0.5, 2.5, (), False))
    page = browser.new_page()
    page.goto(live_server.http + "/?view=ue-page")
    lines = lambda: page.inner_text("[data-testid=finals]").split("\n")  # noqa: E731
    wait_for(lambda: "country." in lines()[0], 30, "the first final")
    for m in (UtteranceEnd(2.5), Final(1, "And so my fellow Americans.", 6.5, 8.0, (), False)):
        loop.call_soon_threadsafe(hub.publish, t, m)
    wait_for(lambda: "Americans." in " ".join(lines()), 30, "the second final")
    assert lines()[:2] == ["Ask what you can do for your country.",
                           "And so my fellow Americans."], lines()
    page.close()
    loop.call_soon_threadsafe(hub.end, t, 9.0)


def test_a_language_the_model_refuses_is_said_and_not_retried(live_server, browser):
    page = browser.new_page()
    page.add_init_script(COUNT_SOCKETS)
    page.goto(live_server.http + "/")
    # the menu holds what the model knows (tiny.en: English), so a refusal needs a stale page,
    # e.g. one loaded before the server restarted with another model
    wait_for(lambda: page.eval_on_selector_all("#language option", "os => os.length") > 1, 20,
             "the model's languages in the menu")
    offered = page.eval_on_selector_all("#language option", "os => os.map(o => o.value)")
    assert offered == ["", "en"], offered
    page.eval_on_selector("#language", "s => s.append(new Option('Deutsch', 'de'))")
    page.select_option("#language", "de")
    page.click("[data-testid=start]")
    wait_for(lambda: "Deutsch" in message(page), 20, "a sentence about the language")
    assert "language" in message(page).lower()
    assert_no_retry(page)
    assert status(page) == "error"
    assert not page.is_disabled("[data-testid=start]"), "the user can pick another and restart"
    page.close()


def test_a_session_live_elsewhere_is_said_and_not_retried(live_server, browser):
    first = browser.new_page()
    first.goto(live_server.http + "/?session=meeting")
    first.click("[data-testid=start]")
    wait_for(lambda: status(first) == "live", 30, "the first tab to go live")
    second = browser.new_page()
    second.add_init_script(COUNT_SOCKETS)
    second.goto(live_server.http + "/?session=meeting")
    second.click("[data-testid=start]")
    wait_for(lambda: "already live" in message(second), 20, "a sentence saying it is taken")
    assert "meeting" in message(second)
    assert_no_retry(second)
    assert status(first) == "live"
    first.click("[data-testid=stop]")
    wait_for(lambda: status(first) == "stopped", 30, "the first tab to stop")
    first.close()
    second.close()


def test_a_viewer_page_opened_before_the_speaker_starts_waits_for_them(live_server, browser):
    """A meeting's viewer link opened early said "does not exist" and stayed so (the overlay
    waited): now it says the session has not started (or the link is wrong) and shows the
    speaker once they start."""
    page = browser.new_page()
    page.add_init_script(COUNT_SOCKETS)
    page.goto(live_server.http + "/?view=early")
    wait_for(lambda: "not started" in message(page), 20, "a sentence saying so")
    assert "early" in message(page) and "link" in message(page)
    wait_for(lambda: len(sockets(page)) >= 2, 10, "a second try")
    first = stream(live_server.url, "jfk.wav", "early")
    wait_for(lambda: normalize(page.inner_text("[data-testid=finals]"))
             == normalize(first.text), 30, "the speaker's finals on the page")
    page.close()


@pytest.mark.parametrize("view", ["a%2Fb", ".."])
def test_a_viewer_link_no_session_can_have_is_said_and_not_retried(live_server, browser, view):
    """"a/b" and ".." reach no route (the server answers the upgrade with 403), and the page
    read that as a network down: "Cannot reach the server; trying again (4 of 8)", then
    "Connection lost". The page judges the id as the server does, and says so at once."""
    page = browser.new_page()
    page.add_init_script(COUNT_SOCKETS)
    page.goto(f"{live_server.http}/?view={view}")
    wait_for(lambda: "cannot name a session" in message(page), 10, "a sentence saying so")
    assert status(page) == "error" and not sockets(page)
    time.sleep(1.5)
    assert "cannot name a session" in message(page) and not sockets(page)
    page.close()


def test_overlay_follows_the_channel_across_speaker_restarts(live_server, browser):
    """The bar of issue 14: the overlay is set up before the stream starts, a speaker streams
    and ends, a second speaker streams under the same id; the overlay shows the second one's
    words without a reload, and the transcript keeps the first one's."""
    sid = "restart"
    overlay = browser.new_page(viewport={"width": 1920, "height": 200})
    overlay.goto(f"{live_server.http}/overlay?session={sid}&fade=0")
    text = lambda: normalize(overlay.inner_text("[data-testid=overlay]"))
    first = stream(live_server.url, "jfk.wav", sid)
    assert "country" in normalize(first.text)
    wait_for(lambda: "country" in text(), 30, "the first speaker's words on the overlay")
    viewer = browser.new_page()
    viewer.goto(f"{live_server.http}/?view={sid}")
    wait_for(lambda: "country" in normalize(viewer.inner_text("[data-testid=finals]")), 30,
             "the first speaker's words on the viewer page")
    second = stream(live_server.url, SECOND, sid)
    assert "books" in normalize(second.text), second.text
    wait_for(lambda: "books" in text(), 30, "the second speaker's words on the overlay")
    # the channel's transcript holds both speakers, and the viewer page shows it once
    txt = httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.txt").text
    assert "country" in normalize(txt) and "books" in normalize(txt), txt
    wait_for(lambda: viewer.inner_text("[data-testid=finals]").split() == txt.split(), 30,
             "the viewer page to hold the whole transcript once")
    overlay.close()
    viewer.close()


def _drop_on_demand(page):  # type: ignore[no-untyped-def]
    """Route the page's viewer sockets through Playwright so a test can close them (a network
    blip or a proxy timing out); returns the list of routes, one per connection."""
    routes: list = []

    def handler(ws):  # type: ignore[no-untyped-def]
        routes.append((ws, ws.connect_to_server()))

    page.route_web_socket(re.compile(r".*/v1/sessions/.*/events.*"), handler)
    return routes


def _blip(routes: list, code: int) -> None:
    page_side, server_side = routes[-1]
    server_side.close()
    page_side.close(code=code, reason="blip")


@pytest.mark.parametrize("code", [1000, 1001])
def test_overlay_and_viewer_page_come_back_after_a_drop(live_server, browser, code):
    sid = f"blip{code}"
    stream(live_server.url, "jfk.wav", sid)
    overlay = browser.new_page(viewport={"width": 1920, "height": 400})
    o_routes = _drop_on_demand(overlay)
    overlay.goto(f"{live_server.http}/overlay?session={sid}&fade=0&lines=8&width=200&partial=0")
    viewer = browser.new_page()
    v_routes = _drop_on_demand(viewer)
    viewer.goto(f"{live_server.http}/?view={sid}")
    o_text = lambda: overlay.inner_text("[data-testid=overlay]")
    v_text = lambda: viewer.inner_text("[data-testid=finals]")
    wait_for(lambda: "country" in normalize(o_text()), 30, "captions on the overlay")
    wait_for(lambda: "country" in normalize(v_text()), 30, "captions on the viewer page")
    before_o, before_v = o_text(), v_text()
    _blip(o_routes, code)
    _blip(v_routes, code)
    wait_for(lambda: len(o_routes) >= 2, 20, "the overlay to reconnect", page=overlay)
    wait_for(lambda: len(v_routes) >= 2, 20, "the viewer page to reconnect", page=viewer)
    overlay.wait_for_timeout(1000)  # the replayed finals arrive; none may show twice
    assert o_text() == before_o
    assert v_text().split() == before_v.split()
    stream(live_server.url, SECOND, sid)
    wait_for(lambda: "books" in normalize(o_text()), 30, "new captions on the overlay")
    wait_for(lambda: "books" in normalize(v_text()), 30, "new captions on the viewer page")
    assert normalize(v_text()).count("country") == normalize(references()["jfk.wav"]).count(
        "country")
    overlay.close()
    viewer.close()


@pytest.fixture(scope="module")
def auth_server(live_server):
    """A second server on the same loaded model, with a speak token."""
    from whisperwire.server.app import ServerConfig
    from whisperwire.server.auth import AuthConfig

    config = ServerConfig(auth=AuthConfig(speak_tokens=("speak-s3cret",)))
    with LiveServer(config, engine=live_server.app.state.engine) as s:
        yield s


def test_links_carry_a_view_token_never_the_speak_token(auth_server, browser):
    page = browser.new_page()
    page.goto(auth_server.http + "/?token=speak-s3cret")
    page.click("[data-testid=start]")
    href = lambda sel: page.get_attribute(sel, "href") or ""
    wait_for(lambda: href("[data-testid=share-link]"), 30, "the viewer link")
    links = {sel: href(sel) for sel in ("[data-testid=share-link]", "#overlay-link",
                                        "[data-testid=dl-srt]", "[data-testid=dl-vtt]",
                                        "[data-testid=dl-txt]")}
    for sel, link in links.items():
        assert "speak-s3cret" not in link, (sel, link)
        assert "token=" in link, (sel, link)  # auth is on: a link without a token cannot work
    wait_for(lambda: "country" in normalize(page.inner_text("[data-testid=finals]")), 60,
             "the speaker's captions")
    viewer = browser.new_page()
    viewer.goto(links["[data-testid=share-link]"])
    wait_for(lambda: "country" in normalize(viewer.inner_text("[data-testid=finals]")), 30,
             "the viewer link to work with auth on")
    overlay = browser.new_page()
    overlay.goto(links["#overlay-link"] + "&fade=0")
    wait_for(lambda: overlay.inner_text("[data-testid=overlay]").strip(), 30,
             "the overlay link to work with auth on")
    page.click("[data-testid=stop]")
    wait_for(lambda: status(page) == "stopped", 30, "the speaker to stop")
    r = httpx.get(auth_server.http + links["[data-testid=dl-txt]"])
    assert r.status_code == 200 and "country" in normalize(r.text), r.text
    for p in (page, viewer, overlay):
        p.close()
