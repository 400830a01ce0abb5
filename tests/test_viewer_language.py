"""Viewers learn the captions' language. The page and the OBS overlay mark caption text with
it (Chinese in a box marked "en" is drawn with Japanese glyph shapes in a Japanese locale), and
a stable overlay URL (``/?session=NAME``) carries no ``lang``. The hub dropped the speaker's
``language`` event, so a viewer of a Mandarin speaker on ``language=auto`` never knew it. The
real hub and cluster directory here, and the real server with tiny.en below (the Mandarin
cases with base are in ``test_lang_e2e.py``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import types
from types import SimpleNamespace

import pytest
from conftest import load16k, run, s16
from viewing import directory_after, drained, speak, view
from whisperwire.server import wire
from whisperwire.server.cluster_hub import ClusterHub, Directory
from whisperwire.server.hub import Hub
from whisperwire.server.listen import ListenConnection
from whisperwire.server.wire import Closed, Final, Language, Word


def final(segment: int, text: str, start: float) -> Final:
    return Final(segment, text, start, start + 1.0, (Word(text, start, start + 1.0, 0.9),))


def test_a_viewer_gets_the_detected_language_on_the_channels_clock():
    hub = Hub()
    t = hub.open("chan")
    hub.publish(t, final(0, "Ask not.", 0.0))
    hub.end(t, 5.0)
    t = hub.open("chan")  # a second speaker: its stream's 0 is 5 s into the channel
    live = hub.watch("chan")
    hub.publish(t, Language("zh", 0.93, 1.5, "traditional"))
    hub.publish(t, final(1, "我們", 1.5))
    got = drained(live)
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
    got = drained(hub.watch("chan"))
    assert [(m.type, getattr(m, "language", None)) for m in got] == [
        ("channel", None), ("language", "en"), ("final", None), ("language", "zh"),
        ("final", None)], got


def test_the_cluster_directory_keeps_the_language_for_viewers_on_every_replica():
    snap, news = directory_after([Language("zh", 0.9, 1.0, "traditional"), final(0, "我們", 1.0)])
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
    assert [m.type for m in drained(live)] == ["channel", "language", "language"]
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
    got = drained(hub.watch("room"))
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


def test_a_language_asked_for_mid_stream_starts_where_it_was_asked():
    """An OpenAI realtime ``session.update`` that changes the language 30 s in: viewers were
    told the captions were French from 0 s (a review's finding)."""
    hub = Hub()
    t = hub.open("chan")
    v = hub.watch("chan")
    session = SimpleNamespace(task="transcribe", language="en", zh_script=None,
                              audio_seconds=0.0)
    conn = SimpleNamespace(session=session, engine=SimpleNamespace(languages=("en", "fr")),
                           hub=hub, transcript=t)
    ListenConnection.tell_viewers_language(conn)  # run(): the session starts in English
    session.audio_seconds = 30.0
    session.language = "fr"  # session.update {"input_audio_transcription": {"language": "fr"}}
    ListenConnection.tell_viewers_language(conn)
    langs = [m for m in v._q if isinstance(m, Language)]  # noqa: SLF001
    assert [x.language for x in langs] == ["en", "fr"]
    assert langs[-1].start >= 30.0, langs[-1]


# -- under Ray: the real Directory and ClusterHub, the actor's calls made in-process (a review's
# finding: a directory restarted empty lost the languages, and each speaker kept one again)
def eager(coro):
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    raise RuntimeError("the call waited")


class Ref:
    def __init__(self, v):
        self.v = v

    def future(self):
        f = concurrent.futures.Future()
        f.set_result(self.v)
        return f


class Actor:
    def __init__(self, d):
        self.d = d

    def __getattr__(self, name):
        fn = getattr(self.d, name)
        return types.SimpleNamespace(remote=lambda *a, **k: Ref(eager(fn(*a, **k))))


def cluster_hub(d, owner="replica-a"):
    hub = ClusterHub(Actor(d), owner)
    hub._call = lambda ref: ref.v  # noqa: SLF001
    return hub


def primed(hub, sid):
    """What a viewer that joins on another replica is sent first."""
    v = hub.watch(sid)
    hub._mirrors[sid].task.cancel()  # noqa: SLF001 (no long poll in this test)
    return list(v._q)  # noqa: SLF001


def test_after_the_directory_restarts_a_late_viewer_still_learns_the_language():
    async def go():
        d1 = Directory()
        hub = cluster_hub(d1)
        t = hub.open("chan")
        hub.publish(t, Language("zh", 0.93, 0.0, "traditional"))
        hub.publish(t, final(0, "我們", 0.5))
        before = [m.type for m in primed(cluster_hub(d1, "replica-b"), "chan")]
        d2 = Directory()  # Ray restarted the directory actor, empty (max_restarts=-1)
        hub.actor = Actor(d2)
        assert await hub._give_back()  # noqa: SLF001 (the live channel given back)
        hub.publish(t, Language("zh", 0.95, 12.0, "traditional"))  # detected again: same
        hub.publish(t, final(1, "走吧", 12.5))
        after = [m.type for m in primed(cluster_hub(d2, "replica-b"), "chan")]
        return before, after

    before, after = asyncio.run(go())
    assert before == ["channel", "language", "final"]
    assert after == ["channel", "language", "final", "final"], after


def test_the_same_language_again_is_not_kept_under_ray_either():
    """The single-process hub keeps (and sends) one ``language`` for two speakers in the same
    language (tests/test_channels.py: "the captions' language once"); the cluster's does not."""
    def speakers(hub):
        for i in range(2):
            t = hub.open("chan")
            hub.publish(t, Language("en", 1.0, 0.0))
            hub.publish(t, final(i, f"w{i}", 0.0))
            hub.publish(t, Closed("client_close", 2.0))
            hub.end(t, 2.0)

    local = Hub()
    speakers(local)
    one = [m.type for m in primed_local(local)]

    async def go():
        d = Directory()
        speakers(cluster_hub(d))
        return [m.type for m in primed(cluster_hub(d, "replica-b"), "chan")]

    ray = asyncio.run(go())
    assert one == ["channel", "language", "final", "final", "closed"]
    assert ray == one, ray


def primed_local(hub):  # type: ignore[no-untyped-def]
    return list(hub.watch("chan")._q)  # noqa: SLF001
