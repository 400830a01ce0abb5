"""The text rules of every script, driven by strings: spacing, widths, line breaks, script."""

from __future__ import annotations

import pytest

from whisperwire.server.text import (
    cjk_marks,
    convert_words,
    display_width,
    join_texts,
    needs_space,
    script_for,
    split_units,
    tidy,
    to_script,
    wrap_units,
)
from whisperwire.server.wire import Word


@pytest.mark.parametrize("raw, want", [
    ("你 好", "你好"),
    ("一 个 wifi 门 铃", "一个wifi门铃"),
    ("他称 ， 他制作了", "他称，他制作了"),
    ("日本 coaster 小巴车", "日本coaster小巴车"),
    ("I use Google Docs every day", "I use Google Docs every day"),
    ("我用 Google Docs 写", "我用Google Docs写"),
    ("  こんにちは 世界  ", "こんにちは世界"),
])
def test_tidy(raw, want):
    assert tidy(raw) == want


@pytest.mark.parametrize("parts, want", [
    (["你好", "世界"], "你好世界"),
    (["Hello there.", "How are you?"], "Hello there. How are you?"),
    (["他制作了一个", "wifi", "门铃。"], "他制作了一个wifi门铃。"),
    (["It works", ",", "mostly"], "It works, mostly"),
    (["", "  ", "好"], "好"),
    # punctuation that opens what follows keeps its space (it lost it: 'He said"We choose')
    (["He said,", "\"We choose to go", "to the moon", "in the", "'60s.\""],
     "He said, \"We choose to go to the moon in the '60s.\""),
    (["The sign said", "\"Closed\"."], "The sign said \"Closed\"."),
    (["Rock", "'n' roll", "¿Qué?", "#1 hit", "& more", "@home"],
     "Rock 'n' roll ¿Qué? #1 hit & more @home"),
    (["Wait", "...", "what", "?!"], "Wait... what?!"),
])
def test_join_texts(parts, want):
    assert join_texts(parts) == want


def test_needs_space():
    assert needs_space("hello", "world")
    assert not needs_space("你", "好") and not needs_space("wifi", "门") and not needs_space("个", "wifi")
    assert not needs_space("word", ".")


def test_display_width():
    assert display_width("abc") == 3
    assert display_width("你好") == 4
    assert display_width("，") == 2  # full-width comma
    assert display_width("e\u0301") == 1  # combining accent


def test_split_units():
    assert split_units(" 他称他 wifi, hello world。") == [
        "他", "称", "他", " wifi,", " hello", " world", "。"]


def test_wrap_breaks_chinese_at_punctuation_within_the_width():
    text = "而对楼市成交抑制作用最大的限购，也成为地方政府的眼中钉，自六月底呼和浩特市率先宣布取消限购后"
    lines = wrap_units(split_units(text), 42)
    assert "".join(lines) == text
    assert all(display_width(x) <= 42 for x in lines)
    assert lines[0].endswith("，")  # a clause end, not wherever 21 characters fall


def test_wrap_english_is_unchanged_by_width_rules():
    words = split_units("the quick brown fox jumps over the lazy dog")
    assert wrap_units(words, 20) == ["the quick brown fox", "jumps over the lazy", "dog"]


def test_script():
    assert script_for("zh", None) == "simplified"
    assert script_for("en", None) == "as_is" and script_for(None, None) == "as_is"
    assert script_for("zh", "traditional") == "traditional"
    assert to_script("門鈴們說話", "simplified") == "门铃们说话"
    assert to_script("门铃说话", "traditional") == "門鈴說話"
    assert to_script("門鈴", "as_is") == "門鈴"
    # each place's own forms, not OpenCC's standard (爲 裏 羣 着): Taiwan writes 為 裡 群 著,
    # Hong Kong 為 裏 羣 着 (a zh-TW stream read "街頭黔女已著羣裝")
    assert to_script("为了群众里着", "traditional") == "為了群眾裡著"
    assert to_script("爲了羣衆裏着", "traditional") == "為了群眾裡著"
    assert to_script("为了群众里着", "traditional_hk") == "為了羣眾裏着"
    assert to_script("hello", "simplified") == "hello"


def test_convert_words_keeps_times_and_spaces_by_the_rules():
    words = [Word(" 他稱", 0, 1, 0.9), Word("製作", 1, 2, 0.9), Word(" wifi", 2, 3, 0.9),
             Word(" 門鈴", 3, 4, 0.9), Word(" and", 4, 5, 0.9), Word(" more", 5, 6, 0.9)]
    out = convert_words(words, "simplified", before="前面")
    assert [w.word for w in out] == ["他称", "制作", "wifi", "门铃", "and", " more"]
    assert [(w.start, w.end) for w in out] == [(w.start, w.end) for w in words]
    assert [w.word for w in convert_words([Word(" hi", 0, 1, 1)], "as_is", "there")] == [" hi"]
    glued = [Word("个", 0, 1, 1), Word("W", 1, 2, 1), Word("i", 2, 3, 1), Word("-Fi", 3, 4, 1)]
    assert "".join(w.word for w in convert_words(glued, "simplified")) == "个Wi-Fi"


def test_split_words_keeps_latin_runs_whole_and_times_in_order():
    from whisperwire.server.text import split_words

    out = split_words([Word(" Wi-Fi门铃", 1.0, 2.4, 0.8), Word(" hello", 2.4, 3.0, 0.9)])
    assert [w.word for w in out] == [" Wi-Fi", "门", "铃", " hello"]
    assert out[0].start == 1.0 and abs(out[2].end - 2.4) < 1e-9
    assert all(a.end <= b.start + 1e-9 for a, b in zip(out, out[1:]))


def test_cer_counts_han_characters_and_latin_runs():
    from whisperwire.server.text import cer, cer_tokens

    assert cer_tokens("他称，他制作了一个Wi-Fi门铃 123") == [
        "他", "称", "他", "制", "作", "了", "一", "个", "wifi", "门", "铃", "123"]
    ref = "他称他制作了一个wifi门铃"
    assert cer(ref, "他稱,他製作了一個Wi-Fi門鈴", "simplified") == 0.0
    assert cer(ref, "他稱,他製作了一個Wi-Fi門鈴") == 5 / 11  # 稱 製 個 門 鈴: as written
    assert cer(ref, "") == 1.0


def test_terminal_captions_flow_chinese_without_spaces_and_wrap_by_columns():
    from whisperwire.client.printer import Flow

    f = Flow(width=20)
    out = (f.final("他们仍在努力确定这次撞击的规模", 0, 1) + f.final("以及对地球的影响。", 1.1, 2)
           + f.final("Hello there, how are you today my friend?", 2, 3) + f.end())
    assert out == ("他们仍在努力确定这次\n撞击的规模以及对地球\n的影响。\n"
                   "Hello there, how are\nyou today my friend?\n")


def test_join_units_keeps_whispers_glued_latin_tokens_together():
    from whisperwire.server.text import join_units

    assert join_units(["一", "个", "W", "i", "-Fi", "门", "铃"]) == "一个Wi-Fi门铃"
    assert join_units(["The", " quick", " fox", ","]) == "The quick fox,"
    assert join_units(["日本", " coaster", "小巴"]) == "日本coaster小巴"


def _final(seg: int, words: list[str], t: float, eou: bool = False):
    from whisperwire.server.wire import Final

    ws = tuple(Word(w, t + i * 0.2, t + i * 0.2 + 0.2, 0.9) for i, w in enumerate(words))
    return Final(seg, "".join(words).strip(), ws[0].start, ws[-1].end, ws, eou)


# zh-07 streamed: "Costas" split across two finals, its tokens without leading spaces
SPLIT = [_final(0, ["日", "本", "C", "ost"], 0.0), _final(1, ["as", "小", "巴", "车"], 1.0, True),
         _final(2, [" Then", " Wi"], 3.0), _final(3, ["-Fi", " works."], 4.0, True)]


def test_a_word_split_across_two_finals_is_one_word_in_every_transcript():
    """Whisper splits a word across two finals ("Cost" | "as"); the TXT and JSON transcripts,
    a file's text, OpenAI's deltas and the terminal glue it back, as the subtitles did."""
    import json

    from whisperwire.client.printer import flow_lines
    from whisperwire.server.dialects.openai_turns import Item
    from whisperwire.server.subtitles import to_json, to_txt

    assert to_txt(SPLIT) == "日本Costas小巴车\nThen Wi-Fi works.\n"
    assert json.loads(to_json("s", SPLIT, False))["text"] == "日本Costas小巴车Then Wi-Fi works."
    item = Item("item_1")
    deltas = [item.add(list(f.words)) for f in SPLIT[2:]]
    assert deltas == ["Then Wi", "-Fi works."] and item.text == "Then Wi-Fi works."
    assert flow_lines(SPLIT, width=80) == ["日本Costas小巴车", "Then Wi-Fi works."]


def test_a_chinese_partial_follows_its_line_without_a_space():
    from whisperwire.client.printer import Flow

    f = Flow(width=40, tty=True)
    f.final("他们的夜市能", 0, 1)
    assert "能 " not in f.partial("力很强")
    f.final("Hello", 2, 3)
    assert "Hello \x1b" in f.partial("there")


def test_ascii_marks_after_chinese_are_full_width_and_nowhere_else():
    """Whisper mixes "," with "。" in Chinese ("有孕,不能。"); a Latin word's marks, numbers'
    separators and text before a Chinese character stay as they are."""
    words = [Word(t, 0.1 * i, 0.1 * i + 0.1, 0.9) for i, t in enumerate(
        ["有", "孕", ",", "不", "能", "。", " Python", ",", " ok", "好", ":", "1,000", "吗", "?"])]
    got = cjk_marks(words)
    assert "".join(w.word for w in got) == "有孕，不能。 Python, ok好：1,000吗？"
    assert [(w.start, w.end) for w in got] == [(w.start, w.end) for w in words]
    assert cjk_marks([Word(",", 0, 0.1, 0.9), Word("对", 0.1, 0.2, 0.9)], before="是的")[0].word \
        == "，"
