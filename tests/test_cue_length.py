"""Subtitle cues stay on screen long enough to read (server/subtitles.py, no server): "他稱",
an utterance of its own, was a cue of 0.48 s. Subtitle guides (Netflix: 5/6 s, the BBC's alike)
keep every cue up at least that long: a short cue is extended into the gap after it (never
over the next cue, nor past the audio's end), or joined to a neighbour it still fits a cue
with; no text is lost or moved."""

from __future__ import annotations

import random

from subtitle_check import check_cues

from whisperwire.server.subtitles import CueOptions, cues, to_srt
from whisperwire.server.text import join_texts
from whisperwire.server.wire import Final, Word

OPT = CueOptions()
MIN = 5 / 6
MS = 0.001  # (times travel rounded to milliseconds)


def zh(seg: int, text: str, start: float, per: float = 0.24, eou: bool = False) -> Final:
    """A Chinese final as Whisper sends it: a word per character, a Latin word whole."""
    units = ["Wi-Fi" if ch == "W" else ch for ch in text.replace("Wi-Fi", "W")]
    ws = [Word(u, start + i * per, start + (i + 1) * per, 0.9) for i, u in enumerate(units)]
    return Final(segment=seg, text="".join(units), start=start, end=ws[-1].end, words=ws, eou=eou)


def en(seg: int, text: str, start: float, per: float = 0.3, eou: bool = False) -> Final:
    """An English final: each word with its leading space."""
    ws = [Word(" " + w, start + i * per, start + (i + 1) * per - 0.05, 0.9)
          for i, w in enumerate(text.split())]
    return Final(segment=seg, text=text, start=start, end=ws[-1].end, words=ws, eou=eou)


def texts(out) -> list[str]:  # type: ignore[no-untyped-def]
    return [join_texts(list(c.lines)) for c in out]


def same_text(out, finals: list[Final]) -> bool:  # type: ignore[no-untyped-def]
    """Every word of the finals, in order, and nothing else (spaces aside)."""
    return "".join(texts(out)).replace(" ", "") == "".join(f.text for f in finals).replace(" ", "")


def no_overlap(out) -> bool:  # type: ignore[no-untyped-def]
    return all(b.start >= a.end - 1e-9 for a, b in zip(out, out[1:]))


def test_a_short_utterance_with_no_room_after_it_joins_the_next_cue():
    """zh-06: "他稱" came as an utterance of its own (the VAD heard a pause), 0.48 s, with
    the rest of the sentence 0.12 s after it: no room to stay up longer."""
    finals = [zh(0, "台灣的夜市文化也推動了土地市場的火爆。", 0.0, eou=True),
              zh(1, "他稱", 5.0, eou=True),
              zh(2, "他製作了一個Wi-Fi門鈴，", 5.6),
              zh(3, "在網上賣得很好。", 8.5, eou=True)]
    out = cues(finals, OPT)
    assert "他稱" not in texts(out), "a cue of its own, gone in half a second"
    assert any(t.startswith("他稱他製作了") for t in texts(out)), texts(out)
    assert all(c.end - c.start >= MIN - MS for c in out), out
    assert same_text(out, finals) and no_overlap(out)


def test_a_short_cue_stays_up_into_the_gap_after_it():
    finals = [en(0, "Did you hear that?", 0.0, eou=True),
              en(1, "Yes.", 2.0, eou=True),  # 0.25 s
              en(2, "Then we go on from here.", 4.0, eou=True)]
    out = cues(finals, OPT)
    assert texts(out) == ["Did you hear that?", "Yes.", "Then we go on from here."]
    assert abs(out[1].start - 2.0) < MS and abs(out[1].end - (2.0 + MIN)) < MS, out[1]
    assert out[2].start == finals[2].start


def test_a_short_cue_stays_up_only_until_the_next_and_the_audio_end():
    """Neighbours both full (two lines): "嗯。" keeps its cue, as long as the room allows; the
    last cue stops at the audio's end."""
    full = "一二三四五六七八九十" * 4 + "一。"  # two lines of 42 columns
    finals = [zh(0, full, 0.0, per=0.15, eou=True),
              zh(1, "嗯。", 6.4, eou=True),  # 0.48 s, the next cue 0.6 s after its start
              zh(2, full, 7.0, per=0.15, eou=True),
              zh(3, "好。", 13.6, eou=True)]
    out = cues(finals, OPT, audio_end=14.2)
    assert texts(out) == [full, "嗯。", full, "好。"]
    assert abs(out[1].end - out[2].start) < MS, "up until the next cue, not over it"
    assert abs(out[3].end - 14.2) < MS, "not past the audio"
    assert no_overlap(out)
    # with the audio's end unknown, the last cue gets its full time
    assert abs(cues(finals, OPT)[-1].end - (13.6 + MIN)) < MS


def test_a_short_cue_joins_the_previous_when_the_next_is_full():
    long = ("and the one that has never been surpassed by later work since the earliest book "
            "printed with movable types")
    finals = [en(0, "We choose to go to the moon.", 0.0, per=0.25, eou=True),
              en(1, "Really.", 2.1, eou=True),  # 0.25 s, the next cue 0.4 s after
              en(2, long, 2.5, per=0.3, eou=True)]
    out = cues(finals, OPT)
    assert texts(out)[0] == "We choose to go to the moon. Really.", texts(out)
    assert all(c.end - c.start >= MIN - MS for c in out), out
    assert same_text(out, finals) and no_overlap(out)


def test_cues_from_many_real_shaped_finals_are_readable_and_keep_every_word():
    """Utterances of one to twenty units, in Chinese and English, pauses of 0.05 to 1.5 s:
    a cue shorter than the minimum is one with no room after it (the next cue starts where it
    ends) and no neighbour it fits with; every limit holds; no text moves."""
    rng = random.Random(7)
    zh_text = "台灣的夜市文化也推動了土地市場的火爆他稱他製作了一個門鈴在網上賣得很好"
    en_words = "so we go on and then the one that has never been surpassed by later work".split()
    for _ in range(40):
        finals, t = [], 0.0
        for seg in range(30):
            n = rng.choice([1, 2, 2, 3, 6, 12, 20])
            if rng.random() < 0.5:
                i = rng.randrange(len(zh_text) - n)
                f = zh(seg, zh_text[i:i + n] + rng.choice(["", "，", "。"]), t,
                       per=rng.uniform(0.12, 0.3), eou=rng.random() < 0.5)
            else:
                f = en(seg, " ".join(rng.choice(en_words) for _ in range(max(1, n // 2))) + ".",
                       t, per=rng.uniform(0.2, 0.4), eou=rng.random() < 0.5)
            finals.append(f)
            t = f.end + rng.uniform(0.05, 1.5)
        out = cues(finals, OPT)
        assert same_text(out, finals) and no_overlap(out)
        # (a closing mark stays with the text before it, its cue a little over 7 s: the
        # cue builder's rule, older than this one)
        check_cues(to_srt(finals, OPT), vtt=False, max_seconds=OPT.max_seconds + 0.4)
        for a, b in zip(out, out[1:]):
            assert a.end - a.start >= MIN - MS or abs(a.end - b.start) < MS, (a, b)
        assert out[-1].end - out[-1].start >= MIN - MS


def test_a_file_apis_short_last_cue_stays_within_the_audio():
    """The OpenAI file API's srt and vtt: "Yes." said at 0.6-0.9 s of a 1.1 s file is kept up
    5/6 s, but not past the file's end."""
    from whisperwire.server.dialects.common import FileResult
    from whisperwire.server.dialects.openai_audio import render

    res = FileResult("s", [Final(0, "Yes.", 0.6, 0.9, (Word(" Yes.", 0.6, 0.9, 0.9),), True)],
                     "en", 1.1)
    srt = render(res, "srt", [], "transcribe", {}).body.decode()
    assert "00:00:00,600 --> 00:00:01,100" in srt, srt
    vtt = render(res, "vtt", [], "transcribe", {}).body.decode()
    assert "00:00:00.600 --> 00:00:01.100" in vtt, vtt
