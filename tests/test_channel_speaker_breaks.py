"""A channel continued by a second speaker: the first speaker's end is an utterance end in the
downloads, even when its last final went out without ``eou`` (made final before the client
closed), and the finals themselves stay as they were sent. The real hub, cluster directory and
subtitle builder, as the transcript download uses them."""

from __future__ import annotations

import asyncio

from subtitle_check import check_cues
from whisperwire.server import subtitles, wire
from whisperwire.server.cluster_hub import Directory
from whisperwire.server.hub import Hub
from whisperwire.server.wire import Closed, Final, Word

FIRST, SECOND = "Ask what you can do for your country.", "in being comparatively modern."


def speaker_finals(text: str, segment: int, eou: bool) -> list[Final]:
    """One final of ``text``, a word every 0.4 s from stream time 0.5."""
    words = tuple(Word(" " + w, 0.5 + 0.4 * i, 0.8 + 0.4 * i, 0.9)
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
