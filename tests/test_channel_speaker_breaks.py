"""A channel continued by a second speaker: the first speaker's end is an utterance end in the
downloads, even when its last final went out without ``eou`` (made final before the client
closed), and the finals themselves stay as they were sent. The real hub, cluster directory and
subtitle builder, as the transcript download uses them."""

from __future__ import annotations

import asyncio

from subtitle_check import check_cues
from viewing import directory_after, drained
from whisperwire.server import subtitles, wire
from whisperwire.server.cluster_hub import Directory
from whisperwire.server.hub import Hub
from whisperwire.server.wire import Closed, Final, Word

FIRST, SECOND = "Ask what you can do for your country.", "in being comparatively modern."


def speaker_finals(text: str, segment: int, eou: bool, at: float = 0.5) -> list[Final]:
    """One final of ``text``, a word every 0.4 s from stream time ``at``."""
    words = tuple(Word(" " + w, at + 0.4 * i, at + 0.3 + 0.4 * i, 0.9)
                  for i, w in enumerate(text.split()))
    return [Final(segment, text, words[0].start, words[-1].end, words, eou)]


def speak(hub: Hub, sid: str, text: str, eou: bool) -> None:
    t = hub.open(sid)
    for f in speaker_finals(text, len(t.finals), eou):
        hub.publish(t, f)
    hub.publish(t, Closed("client_close", 5.0))
    hub.end(t, 5.0)


def test_the_next_speaker_starts_a_new_line_and_cue_and_no_final_changes():
    hub = Hub()
    speak(hub, "chan", FIRST, eou=False)  # the close added no final, so no eou
    speak(hub, "chan", SECOND, eou=False)
    t = hub.get("chan")
    assert [f.eou for f in t.finals] == [False, False], "finals stay as they were sent"
    assert t.turns == [1]
    finals = subtitles.at_turns(t.finals, t.turns)
    assert subtitles.to_txt(finals) == f"{FIRST}\n{SECOND}\n"
    srt = subtitles.to_srt(finals)
    cues = check_cues(srt, vtt=False)
    assert [" ".join(c[2]) for c in cues] == [FIRST, SECOND], srt
    assert cues[1][0] >= 5.0, "the second speaker's cue is on the channel's clock"


def test_a_speaker_who_said_nothing_leaves_the_earlier_utterances_alone():
    hub = Hub()
    speak(hub, "chan", "one two three.", eou=True)
    t = hub.open("chan")  # a speaker who ends without a final
    hub.end(t, 1.0)
    speak(hub, "chan", "four five six.", eou=True)
    t = hub.get("chan")
    assert t.turns == [1, 1]
    assert subtitles.to_txt(subtitles.at_turns(t.finals, t.turns)) == \
        "one two three.\nfour five six.\n"


def test_the_cluster_directory_keeps_the_turns_too():
    """Under Ray Serve the channel lives in the Directory actor (driven here in process): its
    snapshot, which downloads read, carries the same turns, and its finals stay as sent."""

    async def go() -> dict:
        d = Directory()
        for text in (FIRST, SECOND):
            c = await d.claim("chan", "replica-a")
            events = [wire.encode(f) for f in speaker_finals(text, len(c["finals"]), False)]
            await d.publish("chan", c["claim"], 0, events, end=5.0)
        snap = await d.snapshot("chan")
        assert snap is not None
        return snap

    snap = asyncio.run(go())
    finals = [wire.decode(f) for f in snap["finals"]]
    assert snap["turns"] == [1] and [f.eou for f in finals] == [False, False]
    assert subtitles.to_txt(subtitles.at_turns(finals, snap["turns"])) == f"{FIRST}\n{SECOND}\n"


def test_an_utterance_end_after_a_final_breaks_the_line_everywhere():
    """Every word of "... for your country." was final before the speaker stopped, so no final
    carried the end; the ``utterance_end`` that said it went only to the speaker, and 4 s later
    "And so my fellow Americans." ran on in the same line of transcript.txt, the cues and the
    pages. Viewers now get it (on the channel's clock), and the transcript keeps it on the
    final it closed, so downloads and late viewers break there too."""
    hub = Hub()
    speak(hub, "chan", "one two three.", eou=True)  # (the channel's clock: 5 s before)
    t = hub.open("chan")
    live = hub.watch("chan")
    hub.publish(t, speaker_finals(FIRST, 1, False)[0])
    hub.publish(t, wire.UtteranceEnd(3.6))
    hub.publish(t, speaker_finals(SECOND, 2, False, at=7.2)[0])
    got = drained(live)
    ends = [m for m in got if isinstance(m, wire.UtteranceEnd)]
    assert ends == [wire.UtteranceEnd(8.6)], got
    assert [m.type for m in got] == ["channel", "final", "final", "utterance_end", "final"]
    assert subtitles.to_txt(subtitles.at_turns(t.finals, t.turns)) == \
        f"one two three.\n{FIRST}\n{SECOND}\n"
    cues = check_cues(subtitles.to_srt(subtitles.at_turns(t.finals, t.turns)), vtt=False)
    assert [" ".join(c[2]) for c in cues][-2:] == [FIRST, SECOND]
    late = [m for m in drained(hub.watch("chan")) if isinstance(m, Final)]
    assert [f.eou for f in late] == [True, True, False]
    assert [f.text for f in t.finals] == ["one two three.", FIRST, SECOND], "the text never changes"


def test_the_cluster_directory_keeps_the_utterance_end_too():
    """Under Ray Serve: the directory's log carries the ``utterance_end`` to the replicas
    that follow the channel, and its snapshot (downloads, late viewers) has the final closed."""

    snap, news = directory_after([speaker_finals(FIRST, 0, False)[0], wire.UtteranceEnd(3.6),
                                  speaker_finals(SECOND, 1, False, at=7.2)[0]])
    finals = [wire.decode(f) for f in snap["finals"]]
    assert [f.eou for f in finals] == [True, False]
    assert subtitles.to_txt(finals) == f"{FIRST}\n{SECOND}\n"
    assert [wire.decode(e).type for e in news["events"]] == ["final", "utterance_end", "final"]


def test_a_saved_file_breaks_where_an_utterance_end_came():
    """``stream``/``mic``/``captions --output`` render the finals they got: an
    ``utterance_end`` closes the final before it, as it does on the server's downloads."""
    a = speaker_finals(FIRST, 0, False)[0]
    b = speaker_finals(SECOND, 1, False, at=7.2)[0]
    finals = subtitles.utterances([a, wire.UtteranceEnd(3.6), wire.Partial(1, "in", 3.5, 3.8),
                                   b, wire.UtteranceEnd(3.3)])
    assert [f.eou for f in finals] == [True, True]
    assert subtitles.to_txt(finals) == f"{FIRST}\n{SECOND}\n"
    assert subtitles.utterances([wire.UtteranceEnd(0.0), a]) == [a], "an end before any final"


def test_a_viewer_away_when_the_utterance_ended_breaks_its_saved_file_there_too(monkeypatch):
    """``captions --output``: the utterance_end went out while the viewer was reconnecting, and
    the replay that brought the final closed (``eou``) was skipped as a final already shown:
    the saved file ran both utterances on in one line, where transcript.txt breaks. The
    viewer's transport is the hub's own outbox here (no socket), the rest as it runs."""
    from whisperwire.client import captions

    hub = Hub()
    t = hub.open("chan")
    a = speaker_finals(FIRST, 0, False)[0]
    b = speaker_finals(SECOND, 1, False, at=7.2)[0]
    calls: list[int] = []

    async def watch(url, session, on_message, token=None, *, follow=False, stop=None):  # type: ignore[no-untyped-def]
        calls.append(1)
        v = hub.watch(session)
        if len(calls) == 1:
            hub.publish(t, a)
        else:
            hub.publish(t, b)
            hub.publish(t, Closed("client_close", 9.0))
            stop.set()
        v.finish()
        out = []
        while (m := await v.next()) is not None:
            out.append(m)
            on_message(m)
        hub.unwatch(session, v)
        if len(calls) == 1:  # (the connection drops; the speaker's utterance ends meanwhile)
            hub.publish(t, wire.UtteranceEnd(a.end))
        return out

    monkeypatch.setattr(captions, "watch_when_live", watch)
    msgs: list = []

    async def go() -> None:
        await captions.follow_channel("ws://x", "chan", msgs.append, stop=asyncio.Event(),
                                      waits_s=(0.01,) * 3)

    asyncio.run(go())
    assert subtitles.to_txt(t.finals) == f"{FIRST}\n{SECOND}\n"
    assert subtitles.to_txt(subtitles.utterances(msgs)) == f"{FIRST}\n{SECOND}\n"
