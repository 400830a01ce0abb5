"""SRT/VTT/TXT from finals: line lengths, cue lengths, timing order."""

from __future__ import annotations

import json

from subtitle_check import check_cues
from whisperwire.server import subtitles
from whisperwire.server.text import split_units
from whisperwire.server.wire import Final, Word


def finals_from(text: str, t0: float = 0.0, word_s: float = 0.35, per_final: int = 6):
    words = text.split()
    out, t = [], t0
    for seg, i in enumerate(range(0, len(words), per_final)):
        ws = []
        for w in words[i : i + per_final]:
            ws.append(Word(" " + w, t, t + word_s, 0.9))
            t += word_s + 0.05
        out.append(Final(seg, " ".join(words[i : i + per_final]), ws[0].start, ws[-1].end,
                         tuple(ws), eou=(seg % 3 == 2)))
    return out


TEXT = (
    "Printing, in the only sense with which we are at present concerned, differs from most if "
    "not from all the arts and crafts represented in the Exhibition in being comparatively "
    "modern. For although the Chinese took impressions from wood blocks engraved in relief for "
    "centuries before the woodcutters of the Netherlands, by a similar process, produced the "
    "block books, which were the immediate predecessors of the true printed book."
)


def test_srt_and_vtt_are_valid_and_keep_every_word():
    f = finals_from(TEXT)
    for vtt in (False, True):
        text = subtitles.to_vtt(f) if vtt else subtitles.to_srt(f)
        cues = check_cues(text, vtt=vtt)
        assert " ".join(" ".join(c[2]) for c in cues).split() == TEXT.split()


def test_slow_speech_splits_on_time():
    f = finals_from("one two three four five six seven eight nine ten", word_s=1.5)
    cues = check_cues(subtitles.to_srt(f), vtt=False)
    assert len(cues) >= 3


def test_overlong_word_is_split_not_dropped():
    w = "x" * 100
    f = [Final(0, w, 0.0, 1.0, (Word(" " + w, 0.0, 1.0, 1.0),), True)]
    for vtt in (False, True):
        cues = check_cues(subtitles.to_vtt(f) if vtt else subtitles.to_srt(f), vtt=vtt)
        assert "".join("".join(c[2]) for c in cues) == w


def test_txt_and_json():
    f = finals_from(TEXT)
    txt = subtitles.to_txt(f)
    assert txt.split() == TEXT.split()
    assert txt.count("\n") == sum(x.eou for x in f) + (0 if f[-1].eou else 1)
    d = json.loads(subtitles.to_json("s1", f, live=True))
    assert d["session"] == "s1" and d["live"] and len(d["finals"]) == len(f)


def test_empty_transcript():
    assert subtitles.to_srt([]) == ""
    assert subtitles.to_vtt([]) == "WEBVTT\n\n"
    assert subtitles.to_txt([]) == ""


def zh_finals(text: str, per_final: int = 12, unit_s: float = 0.2):
    """Chinese finals as the server makes them: one unit per character (Latin words whole),
    no spaces."""
    units = split_units(text)
    out, t = [], 0.0
    for seg, i in enumerate(range(0, len(units), per_final)):
        chunk = units[i : i + per_final]
        ws = tuple(Word(c, t + k * unit_s, t + (k + 1) * unit_s, 0.9) for k, c in enumerate(chunk))
        t += len(chunk) * unit_s
        out.append(Final(seg, "".join(chunk), ws[0].start, ws[-1].end, ws, eou=i + per_final >= len(units)))
    return out


ZH = ("而对楼市成交抑制作用最大的限购，也成为地方政府的眼中钉。自六月底呼和浩特市率先宣布取消限购后，"
      "他称他制作了一个wifi门铃。大多数地区都能坐到舒适结实的日本coaster小巴车。")


def test_chinese_cues_have_no_spaces_fit_in_columns_and_break_at_punctuation():
    f = zh_finals(ZH)
    for vtt in (False, True):
        text = subtitles.to_vtt(f) if vtt else subtitles.to_srt(f)
        cues = check_cues(text, vtt=vtt)  # display width <= 42, no Han-space-Han
        assert "".join("".join(c[2]) for c in cues) == ZH
        assert " " not in text.split("-->")[-1].split("\n", 1)[1]
    lines = [line for c in check_cues(subtitles.to_srt(f), vtt=False) for line in c[2]]
    assert sum(line.endswith(("，", "。")) for line in lines) >= 3


def test_chinese_txt_and_json_join_without_spaces():
    f = zh_finals(ZH)
    assert subtitles.to_txt(f).replace("\n", "") == ZH
    assert json.loads(subtitles.to_json("s", f, live=False))["text"] == ZH


def test_a_latin_word_whisper_wrote_as_unspaced_tokens_stays_whole():
    ws = [Word(c, i * 0.3, i * 0.3 + 0.3, 0.9) for i, c in enumerate(["一", "个", "W", "i", "-Fi", "门", "铃"])]
    f = [Final(0, "一个Wi-Fi门铃", 0.0, 2.1, tuple(ws), True)]
    assert check_cues(subtitles.to_srt(f), vtt=False)[0][2] == ["一个Wi-Fi门铃"]
