"""web/wire.js is the browser's copy of server/wire.py, kept by hand: this test loads it in
Chromium and checks it against the dataclasses and the app's routes, so the two cannot drift."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from browser_support import launch
from whisperwire.server import wire

pytestmark = pytest.mark.timeout(120)

WEB = Path(__file__).resolve().parent.parent / "web"
ORIGIN = "http://wire.test"


@pytest.fixture(scope="module")
def js():
    """A page on a made-up origin that serves web/ from disk (no server, no network), and a
    function that evaluates an expression against the imported wire.js module ``w``."""
    with launch() as browser:
        page = browser.new_page()

        def serve(route):  # type: ignore[no-untyped-def]
            name = route.request.url.removeprefix(ORIGIN + "/").split("?")[0] or "blank.html"
            if name == "blank.html":
                return route.fulfill(body="<!doctype html><title>wire</title>",
                                     content_type="text/html")
            return route.fulfill(path=str(WEB / name), content_type="text/javascript")

        page.route(ORIGIN + "/**", serve)
        page.goto(ORIGIN + "/blank.html")

        def run(expr: str, arg=None):  # type: ignore[no-untyped-def]
            return page.evaluate(
                f"async (arg) => {{ const w = await import('/wire.js'); return {expr}; }}", arg)

        yield run


def _fields(cls: type) -> tuple[list[str], list[str]]:
    """(required, optional) field names of a message dataclass."""
    req, opt = [], []
    for f in dataclasses.fields(cls):
        has_default = (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)
        (opt if has_default else req).append(f.name)
    return req, opt


SERVER = {t: c for t, c in wire._BY_TYPE.items() if t not in wire.CLIENT_MESSAGES}


def _sample(cls: type):  # type: ignore[no-untyped-def]
    """An instance with every field filled, from the field's declared type."""
    values = {"int": 3, "float": 1.25, "str": "x", "bool": True}
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name == "words":
            kwargs[f.name] = (wire.Word("hi", 0.0, 0.5, 0.9),)
        else:
            base = str(f.type).split("|")[0].strip()
            kwargs[f.name] = values[base]
    return cls(**kwargs)


def test_server_message_types_and_fields_match(js):
    got = js("w.SERVER_TYPES")
    want = {}
    for t, cls in SERVER.items():
        req, opt = _fields(cls)
        want[t] = req + [f"{n}?" for n in opt]
    assert {t: sorted(f) for t, f in got.items()} == {t: sorted(f) for t, f in want.items()}


def test_client_messages_match(js):
    sent = js("[w.finalize(), w.close(), w.said(1.25)]")
    assert sorted(json.loads(s)["type"] for s in sent) == sorted(wire.CLIENT_MESSAGES)
    for s in sent:  # the server takes what the page sends
        assert wire.decode(s, allowed=wire.CLIENT_MESSAGES).type == json.loads(s)["type"]
    told = js('w.said(1.0, {word: " go.", start: 0.9, end: 1.0, probability: 0.9})')
    assert wire.decode(told, allowed=wire.CLIENT_MESSAGES) == wire.Said(
        1.0, wire.Word(" go.", 0.9, 1.0, 0.9))


def test_decode_reads_what_the_server_writes_and_skips_the_rest(js):
    for t, cls in SERVER.items():
        text = wire.encode(_sample(cls))
        assert js("w.decode(arg)", text) == json.loads(text), t
        req, _ = _fields(cls)
        for name in req:  # a message missing a required field is not taken
            d = json.loads(text)
            del d[name]
            assert js("w.decode(arg)", json.dumps(d)) is None, (t, name)
        for name in _fields(cls)[1]:  # an optional one may be left out
            d = json.loads(text)
            del d[name]
            assert js("w.decode(arg)", json.dumps(d)) is not None, (t, name)
    # the README: clients ignore message types they do not know, and bad JSON
    for text in ('{"type":"hello","x":1}', '{"x":1}', "[1]", "null", "not json"):
        assert js("w.decode(arg)", text) is None, text


def test_paths_match_the_app_routes(js):
    from whisperwire.server.app import ServerConfig, create_app

    routes = {getattr(r, "path", "") for r in create_app(ServerConfig()).routes}
    listen, events, transcript = js(
        '[w.LISTEN_PATH, w.eventsPath("SID"), w.transcriptPath("SID", "FMT")]')
    assert listen in routes
    assert events.replace("SID", "{session}") in routes
    assert transcript.replace("SID", "{session}").replace("FMT", "{fmt}") in routes


@pytest.mark.parametrize("sid", ["abc", "A.b_c-1", "a" * 64, "a" * 65, "", "a/b", "..", ".",
                                 "a b", "é", "x..", "./x", "a\nb"])
def test_session_ids_are_judged_as_the_server_does(js, sid):
    assert js("w.validSession(arg)", sid) is wire.valid_session_id(sid)
