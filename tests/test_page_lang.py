"""Caption text carries its language (``lang``) on the page and the overlay, against a scripted
server (Playwright stands in for it, as in tests/test_follow_js.py). Both pages declared
``<html lang="en">`` and never changed it, so Chinese captions were drawn with whatever CJK font
the browser's locale picks: with Han unification, Japanese glyph shapes and punctuation placed
as in Japanese ("，" and "。" in the em box). The pages' own words stay "en"."""

from __future__ import annotations

import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browser_support import launch, wait_for, write_mic_wav

pytestmark = pytest.mark.timeout(120)

WEB = Path(__file__).resolve().parent.parent / "web"
MODEL = {"data": [{"id": "base", "languages": ["en", "zh", "ja"],
                   "tasks": ["transcribe", "translate"]}]}
ZH = "他稱他製作了一個wifi門鈴，"
ZH_END = "在網上賣得很好。"


def final(seg: int, text: str, eou: bool = True) -> str:
    return json.dumps({"type": "final", "segment": seg, "text": text, "start": seg,
                       "end": seg + 1, "words": [], "eou": eou})


def partial(seg: int, text: str) -> str:
    return json.dumps({"type": "partial", "segment": seg, "text": text, "start": seg,
                       "end": seg + 1})


def language(code: str, script: str | None = None) -> str:
    m = {"type": "language", "language": code, "probability": 0.97, "start": 0.5}
    return json.dumps(m | ({"script": script} if script else {}))


CHANNEL = json.dumps({"type": "channel", "session": "s", "instance": "a"})
READY = json.dumps({"type": "ready", "session": "s", "model": "base", "device": "cpu",
                    "compute_type": "int8", "sample_rate": 16000})


class Files(SimpleHTTPRequestHandler):
    """The page's files as the server serves them (an AudioWorklet's script is fetched past
    Playwright's routes, so the files come from a real server on 127.0.0.1)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, directory=str(WEB), **kwargs)

    def translate_path(self, path: str) -> str:
        path = path.split("?")[0]
        return super().translate_path({"/overlay": "/overlay.html"}.get(path, path))

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


@pytest.fixture(scope="module")
def origin():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory, origin):
    # (a microphone for the speaker's page; the viewer pages never ask for it)
    with launch(write_mic_wav(tmp_path_factory.mktemp("mic") / "mic.wav")) as b:
        yield b


def api(route) -> None:  # type: ignore[no-untyped-def]
    """The model's languages, and no transcript yet (a new channel)."""
    if route.request.url.split("?")[0].endswith("/v1/models"):
        route.fulfill(body=json.dumps(MODEL), content_type="application/json")
    else:
        route.fulfill(status=404, body="{}", content_type="application/json")


def open_page(browser, origin: str, path: str, socket: str,  # type: ignore[no-untyped-def]
              script: list[str]):
    """``path`` opened, the first socket matching ``socket`` answered with ``script``; the
    page and a function sending more on that socket."""
    page = browser.new_page()
    page.route(re.compile(r".*/v1/(models|sessions/).*"), api)
    sockets = []

    def handle(ws) -> None:  # type: ignore[no-untyped-def]
        sockets.append(ws)
        for m in script:
            ws.send(m)

    page.route_web_socket(re.compile(socket), handle)
    page.goto(origin + path)
    return page, lambda m: sockets[-1].send(m)


# the language an element's text is in: its nearest lang, as the browser picks fonts by
LANG_OF = """(root, text) => {
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode())
    if (n.textContent.includes(text)) return n.parentElement.closest('[lang]').lang;
  return null;
}"""


def lang_of(page, selector: str, text: str) -> str | None:  # type: ignore[no-untyped-def]
    return page.eval_on_selector(selector, LANG_OF, text)


def test_caption_lang_tags(browser, origin):
    """The tag for each language and Chinese script the server writes (server/wire.py's
    language_tag and ZH_SCRIPTS): simplified unless asked, "zh-TW" Taiwan's forms,
    "zh-HK" Hong Kong's; unknown ("auto") is no tag at all."""
    page, _ = open_page(browser, origin, "/overlay", "never", [])
    cases = [(["zh"], "zh-CN"), (["zh-TW"], "zh-TW"), (["zh-Hant-TW"], "zh-TW"),
             (["zh_TW"], "zh-TW"), (["zh-HK"], "zh-HK"), (["zh-Hant-HK"], "zh-HK"),
             (["cmn-Hans-CN"], "zh-CN"), (["zh", "traditional"], "zh-TW"),
             (["zh", "traditional_hk"], "zh-HK"), (["zh-TW", "simplified"], "zh-CN"),
             (["zh", "as_is"], "zh"), (["en"], "en"), (["en-US"], "en"), (["ja"], "ja"),
             (["yue"], "yue"), (["auto"], None), ([""], None), ([None], None)]
    got = page.evaluate("(cases) => import('/text.js').then((t) => "
                        "cases.map(([args]) => t.captionLang(...args)))", cases)
    assert got == [want for _, want in cases]
    detected = [(["zh-TW", "zh"], "zh-TW"), (["en", "zh"], "zh-CN"), ([None, "en"], "en"),
                (["zh-HK", "ja"], "ja"), (["zh-TW", "??"], "zh-TW"),
                # the server names the script (its language event to viewers): that wins
                (["zh-TW", "zh", "traditional_hk"], "zh-HK"), ([None, "zh", "traditional"], "zh-TW"),
                (["zh-HK", "zh", "simplified"], "zh-CN")]
    got = page.evaluate("(cases) => import('/text.js').then((t) => "
                        "cases.map(([args]) => t.detectedLang(...args)))", detected)
    assert got == [want for _, want in detected]
    page.close()


@pytest.mark.parametrize("query, script, want", [
    ("", [language("zh")], "zh-CN"),  # detected (language=auto): simplified, the server's
    ("&lang=zh-TW", [], "zh-TW"),  # the speaker page's overlay link
    ("&lang=zh-TW", [language("zh")], "zh-TW"),  # (the link knows the script)
    ("", [language("zh", "traditional")], "zh-TW"),  # (the server's event names it)
    ("&lang=zh-TW", [language("zh", "traditional_hk")], "zh-HK"),
    ("&lang=zh-Hant-HK", [], "zh-HK"),
    ("&lang=en", [], "en"),
])
def test_overlay_captions_carry_the_sessions_language(browser, origin, query, script, want):
    page, send = open_page(browser, origin, f"/overlay?session=s&fade=0&lines=4{query}", r".*/events.*",
                           [CHANNEL, *script])
    then = ZH_END if want.startswith("zh") else "ask not"
    send(final(0, ZH if want.startswith("zh") else "And so, my fellow Americans,", eou=False))
    send(partial(1, then))
    box = "[data-testid=overlay]"
    wait_for(lambda: page.inner_text(box).endswith(then), 10, "the captions", page=page)
    for line in page.inner_text(box).split("\n"):
        assert lang_of(page, box, line) == want, line
    assert page.evaluate("document.documentElement.lang") == "en"
    page.close()


def test_overlay_lines_keep_their_language_when_the_next_speaker_speaks_another(browser, origin):
    """A Mandarin streamer's overlay (a stable URL, no ``lang``): the box took each
    ``language`` event's tag, and the Chinese lines still on screen became "en" when the next
    speaker spoke English (a Mandarin streamer's finding). Each line keeps its own."""
    page, send = open_page(browser, origin, "/overlay?session=s&fade=0&lines=4", r".*/events.*",
                           [CHANNEL, language("zh"), final(0, ZH)])
    box = "[data-testid=overlay]"
    wait_for(lambda: "wifi" in page.inner_text(box), 10, "the Chinese captions", page=page)
    send(language("en"))
    send(final(1, "And so, my fellow Americans,", eou=False))
    wait_for(lambda: "Americans" in page.inner_text(box), 10, "the English captions", page=page)
    assert lang_of(page, box, "wifi") == "zh-CN"
    assert lang_of(page, box, "Americans") == "en"
    assert not any("Americans" in x and "wifi" in x for x in page.inner_text(box).split("\n"))
    page.close()


def test_an_overlay_that_reconnects_keeps_its_open_line(browser, origin):
    """A review's finding: the replayed history of a channel where two languages were spoken
    changed the overlay's language back and forth, and each change ended the open line: a
    blip broke the sentence being shown ("Americans," | "ask not")."""
    page = browser.new_page()
    page.route(re.compile(r".*/v1/(models|sessions/).*"), api)
    sockets = []
    history = [CHANNEL, language("zh"), final(0, ZH), language("en"),
               final(1, "And so, my fellow Americans,", eou=False)]

    def handle(ws) -> None:  # type: ignore[no-untyped-def]
        sockets.append(ws)
        for m in history:  # (what the hub primes every new viewer with)
            ws.send(m)

    page.route_web_socket(re.compile(r".*/events.*"), handle)
    page.goto(origin + "/overlay?session=s&fade=0&lines=4")
    box = "[data-testid=overlay]"
    wait_for(lambda: "Americans" in page.inner_text(box), 10, "the captions", page=page)
    sockets[-1].close()
    wait_for(lambda: len(sockets) >= 2, 15, "the reconnect", page=page)
    page.wait_for_timeout(300)
    sockets[-1].send(final(2, "ask not", eou=False))
    wait_for(lambda: "ask not" in page.inner_text(box), 10, "the next final", page=page)
    lines = page.inner_text(box).split("\n")
    assert any("Americans, ask not" in x for x in lines), lines
    assert lang_of(page, box, "Americans") == "en" and lang_of(page, box, "wifi") == "zh-CN"
    page.close()


def test_viewer_page_captions_carry_the_language_and_keep_it_when_it_changes(browser, origin):
    """The viewer link says the language; a ``language`` message (a later speaker, after a
    long pause) changes it for what follows, and what was shown keeps its own."""
    page, send = open_page(browser, origin, "/?view=s&lang=zh-HK", r".*/events.*", [CHANNEL, final(0, ZH)])
    finals = "[data-testid=finals]"
    wait_for(lambda: "wifi" in page.inner_text(finals), 10, "the first final", page=page)
    assert lang_of(page, finals, "wifi") == "zh-HK"
    send(partial(1, "ask not"))
    send(language("en"))
    send(partial(1, "ask not what"))
    wait_for(lambda: "what" in page.inner_text("[data-testid=partial]"), 5, "the partial",
             page=page)
    assert lang_of(page, "[data-testid=partial]", "what") == "en"
    send(final(1, "ask not what your country can do for you."))
    wait_for(lambda: "country" in page.inner_text(finals), 5, "the next final", page=page)
    assert lang_of(page, finals, "country") == "en"
    assert lang_of(page, finals, "wifi") == "zh-HK", "text already shown keeps its language"
    # the page's own words stay English
    assert page.evaluate("document.documentElement.lang") == "en"
    assert lang_of(page, "header", "WhisperWire") == "en"
    page.close()


@pytest.mark.parametrize("menu, task, script, want", [
    ("zh-TW", "transcribe", [], "zh-TW"),  # 中文（繁體）
    ("zh", "transcribe", [], "zh-CN"),
    ("auto", "transcribe", [language("zh")], "zh-CN"),  # detected
    ("zh", "translate", [], "en"),  # a translation is English
    ("en", "transcribe", [], "en"),
])
def test_speaker_page_captions_and_viewer_links_carry_the_language(browser, origin, menu, task, script,
                                                                  want):
    page, send = open_page(browser, origin, "/", r".*/v1/listen.*", [READY, *script])
    wait_for(lambda: page.eval_on_selector_all("#language option", "os => os.length") > 3, 10,
             "the language menu", page=page)
    page.select_option("#language", menu)
    page.select_option("#task", task)
    page.click("[data-testid=start]")
    wait_for(lambda: page.inner_text("[data-testid=status]") == "live", 15, "ready", page=page)
    text = "ask not" if want == "en" else ZH
    send(final(0, text))
    send(partial(1, ZH_END))
    wait_for(lambda: ZH_END in page.inner_text("[data-testid=partial]"), 10, "the captions",
             page=page)
    assert lang_of(page, "[data-testid=finals]", text) == want
    assert lang_of(page, "[data-testid=partial]", ZH_END) == want
    for link in ("overlay-link", "share-link"):
        href = page.get_attribute(f"#{link}", "href")
        assert f"lang={want}" in href, href
    assert page.evaluate("document.documentElement.lang") == "en"
    page.close()
