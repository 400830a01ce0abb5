"""Viewers learn the captions' language. The page and the OBS overlay mark caption text with
it (Chinese in a box marked "en" is drawn with Japanese glyph shapes in a Japanese locale), and
a stable overlay URL (``/?session=NAME``) carries no ``lang``. The hub dropped the speaker's
``language`` event, so a viewer of a Mandarin speaker on ``language=auto`` never knew it. The
real hub and cluster directory here, and the real server with tiny.en below (the Mandarin
cases with base are in ``test_lang_e2e.py``)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import load16k, run, s16
from viewing import speak, view
from whisperwire.server import wire
from whisperwire.server.cluster_hub import Directory
from whisperwire.server.hub import Hub
from whisperwire.server.wire import Final, Language, Word


def final(segment: int, text: str, start: float) -> Final:
    return Final(segment, text, start, start + 1.0, (Word(text, start, start + 1.0, 0.9),))


def drain(v) -> list:  # type: ignore[no-untyped-def]
    v.finish()

    async def go() -> list:
        out = []
        while (m := await v.next()) is not None:
            out.append(m)
        return out

    return asyncio.run(go())


def test_a_viewer_gets_the_detected_language_on_the_channels_clock():
    hub = Hub()
    t = hub.open("chan")
    hub.publish(t, final(0, "Ask not.", 0.0))
    hub.end(t, 5.0)
    t = hub.open("chan")  # a second speaker: its stream's 0 is 5 s into the channel
    live = hub.watch("chan")
    hub.publish(t, Language("zh", 0.93, 1.5, "traditional"))
    hub.publish(t, final(1, "我們", 1.5))
    got = drain(live)
    assert [m.type for m in got] == ["channel", "final", "language", "final"], got
    assert got[2] == Language("zh", 0.93, 6.5, "traditional")


def test_a_late_viewer_gets_each_language_before_the_finals_in_it():
    """A channel's speakers may speak different languages: a viewer that joins later sees each
    final marked with the language it was said in."""
    hub = Hub()
    t = hub.open("chan")
    hub.publish(t, Language("en", 1.0, 0.0))
    hub.publish(t, final(0, "Ask not.", 0.0))
    hub.end(t, 5.0)
    t = hub.open("chan")
    hub.publish(t, Language("zh", 0.93, 1.5, "simplified"))
    hub.publish(t, final(1, "我们", 1.5))
    got = drain(hub.watch("chan"))
    assert [(m.type, getattr(m, "language", None)) for m in got] == [
        ("channel", None), ("language", "en"), ("final", None), ("language", "zh"),
        ("final", None)], got


def test_the_cluster_directory_keeps_the_language_for_viewers_on_every_replica():
    async def go() -> tuple[dict, dict]:
        d = Directory()
        c = await d.claim("chan", "replica-a")
        events = [wire.encode(Language("zh", 0.9, 1.0, "traditional")),
                  wire.encode(final(0, "我們", 1.0))]
        await d.publish("chan", c["claim"], 0, events)
        snap = await d.snapshot("chan")
        news = await d.since("chan", 0, 0.1)
        assert snap is not None and news is not None
        return snap, news

    snap, news = asyncio.run(go())
    assert [wire.decode(e).type for e in news["events"]] == ["language", "final"]
    assert [(i, wire.decode(x)) for i, x in snap["languages"]] == [
        (0, Language("zh", 0.9, 1.0, "traditional"))]


def test_language_says_the_chinese_script_and_round_trips():
    msg = Language("zh", 0.9, 1.0, "traditional_hk")
    assert wire.decode(wire.encode(msg)) == msg
    assert "script" not in wire.encode(Language("en", 0.9, 1.0))


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_viewer_of_a_server_with_one_language_is_told_it(live_server):
    """tiny.en: every speaker's captions are English, said to viewers when the speaker starts;
    the speaker itself gets no ``language`` (it asked for none, as before)."""
    audio = s16(load16k("jfk.wav")[: 16000 * 4])

    async def go() -> tuple[list, list]:
        said, _ = await speak(live_server.url, audio, session="lang-en")
        seen, _ = await view(live_server.url, "lang-en", timeout=30)
        return said, seen

    said, seen = run(go())
    assert not [m for m in said if isinstance(m, Language)], said
    langs = [m for m in seen if isinstance(m, Language)]
    assert [(x.language, x.start) for x in langs] == [("en", 0.0)], seen
    assert seen.index(langs[0]) < next(i for i, m in enumerate(seen) if isinstance(m, Final))


def test_the_same_language_again_is_not_kept_nor_sent():
    """A realtime client may send ``session.update`` with its language at every turn, and a
    detection after a pause finds the language again: neither grows the channel's record."""
    hub = Hub()
    t = hub.open("chan")
    live = hub.watch("chan")
    for _ in range(1000):
        hub.publish(t, Language("zh", 1.0, 0.0, "traditional"))
    hub.publish(t, Language("zh", 1.0, 0.0, "simplified"))
    assert [m.type for m in drain(live)] == ["channel", "language", "language"]
    assert [x.script for _, x in t.languages] == ["simplified"]  # (no final said in the first)


def test_a_language_changed_back_and_forth_keeps_one_per_final_and_late_viewers_stay():
    """A review's finding: a client's ``session.update`` alternating en/fr (or a bilingual
    speaker detected again after each pause) grew the record without bound, and a viewer that
    joined later was primed past its outbox and dropped at once, on every try."""
    hub = Hub()
    t = hub.open("room")
    for i in range(10):
        hub.publish(t, final(i, f"w{i}", float(i)))
    for i in range(2000):
        hub.publish(t, Language("en" if i % 2 else "fr", 1.0, 0.0))
    assert len(t.languages) == 1 and t.languages[-1][1].language == "en"
    got = drain(hub.watch("room"))
    assert [m.type for m in got] == ["channel"] + ["final"] * 10 + ["language"], got

    async def go() -> dict:
        d = Directory()
        c = await d.claim("chan", "replica-a")
        events = [wire.encode(Language("en" if i % 2 else "fr", 1.0, 0.0)) for i in range(50)]
        await d.publish("chan", c["claim"], 0, events)
        snap = await d.snapshot("chan")
        assert snap is not None
        return snap

    assert len(asyncio.run(go())["languages"]) == 1
