"""A channel continued by a second speaker: the first speaker's end is an utterance end in the
downloads, even when its last final came without ``eou`` (made final before the client
closed). The real hub and subtitle builder, as the transcript download uses them."""

from __future__ import annotations

from subtitle_check import check_cues
from whisperwire.server import subtitles
from whisperwire.server.hub import Hub
from whisperwire.server.wire import Closed, Final, Word


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


def test_the_next_speaker_starts_a_new_line_and_cue():
    first, second = "Ask what you can do for your country.", "in being comparatively modern."
    hub = Hub()
    speak(hub, "chan", first, eou=False)  # the close added no final, so no eou
    speak(hub, "chan", second, eou=False)
    finals = list(hub.get("chan").finals)
    assert subtitles.to_txt(finals) == f"{first}\n{second}\n"
    srt = subtitles.to_srt(finals)
    cues = check_cues(srt, vtt=False)
    assert [" ".join(c[2]) for c in cues] == [first, second], srt
    assert cues[1][0] >= 5.0, "the second speaker's cue is on the channel's clock"


def test_a_speaker_who_said_nothing_leaves_the_earlier_utterances_alone():
    hub = Hub()
    speak(hub, "chan", "one two three.", eou=True)
    t = hub.open("chan")  # a speaker who ends without a final
    hub.end(t, 1.0)
    speak(hub, "chan", "four five six.", eou=True)
    finals = hub.get("chan").finals
    assert [f.eou for f in finals] == [True, True]
    assert subtitles.to_txt(finals) == "one two three.\nfour five six.\n"


def test_the_cluster_directory_breaks_at_a_speaker_too():
    """Under Ray Serve the channel lives in the Directory actor (driven here in process): the
    same break, in its finals and in the log late viewers replay."""
    import asyncio

    from whisperwire.server import wire
    from whisperwire.server.cluster_hub import Directory

    first, second = "Ask what you can do for your country.", "in being comparatively modern."

    async def go() -> list[Final]:
        d = Directory()
        for text in (first, second):
            c = await d.claim("chan", "replica-a")
            events = [wire.encode(f) for f in speaker_finals(text, len(c["finals"]), False)]
            await d.publish("chan", c["claim"], 0, events, end=5.0)
        ch = d.channels["chan"]
        assert [wire.decode(t) for _, t in ch.log] == [wire.decode(t) for t in ch.finals]
        return [wire.decode(t) for t in ch.finals]  # type: ignore[misc]

    finals = asyncio.run(go())
    assert [f.eou for f in finals] == [True, False]
    assert subtitles.to_txt(finals) == f"{first}\n{second}\n"
