"""Whisper writes some words in pieces: "t" then "-shirt." (its tokens " t", "-", "shirt"), "mid"
then "-year.", "Wi" then "-Fi". A piece has no leading space; the text joins it to the word
before it ("t-shirt."), and so must every list of words a client reads: OpenAI's
``verbose_json`` words, Deepgram's words, utterances and paragraphs, and subtitle lines.
Before, they carried "t" and "-shirt." as two words, Deepgram wrote "t shirt" (a space inside
one word) and counted it twice, and a subtitle line broke inside the word."""

from __future__ import annotations

import json

from whisperwire.server import subtitles, wire
from whisperwire.server.dialects.common import FileResult
from whisperwire.server.dialects.deepgram import alternative
from whisperwire.server.dialects.deepgram_files import prerecorded
from whisperwire.server.dialects.deepgram_params import parse_options
from whisperwire.server.dialects.openai_audio import render


def words(*spec: tuple[str, float, float]) -> tuple[wire.Word, ...]:
    return tuple(wire.Word(w, a, b, 0.9) for w, a, b in spec)


FINALS = [
    wire.Final(0, "Look at Bob's t-shirt.", 0.0, 1.6,
               words((" Look", 0.0, 0.3), (" at", 0.3, 0.5), (" Bob's", 0.5, 0.9),
                     (" t", 0.9, 1.1), ("-shirt.", 1.1, 1.6)), eou=True),
    wire.Final(1, "A mid-year sale.", 2.0, 3.2,
               words((" A", 2.0, 2.2), (" mid", 2.2, 2.5), ("-year", 2.5, 2.8),
                     (" sale.", 2.8, 3.2)), eou=True),
]
WHOLE = ["Look", "at", "Bob's", "t-shirt.", "A", "mid-year", "sale."]
# a piece that starts with a mark, and a word split across two finals
PRICE = [wire.Final(0, "It costs $3.5 for", 0.0, 1.5,
                    words((" It", 0.0, 0.2), (" costs", 0.2, 0.6), (" $3", 0.6, 0.9),
                          (".5", 0.9, 1.2), (" for", 1.2, 1.5))),
         wire.Final(1, "a t", 1.5, 2.0, words((" a", 1.5, 1.7), (" t", 1.7, 2.0))),
         wire.Final(2, "-shirt.", 2.0, 2.4, words(("-shirt.", 2.0, 2.4)), eou=True)]


def test_openai_verbose_json_words_are_whole():
    res = FileResult("s", FINALS, "en", 3.5)
    body = json.loads(render(res, "verbose_json", ["word"], "transcribe", {}).body)
    assert [w["word"] for w in body["words"]] == WHOLE
    t = next(w for w in body["words"] if w["word"] == "t-shirt.")
    assert (t["start"], t["end"]) == (0.9, 1.6)
    # (and a segment's compression ratio is its text's, as Whisper computes it, not 1.0)
    seg = json.loads(render(res, "verbose_json", ["segment"], "transcribe", {}).body)
    from faster_whisper.transcribe import get_compression_ratio

    assert [x["compression_ratio"] for x in seg["segments"]] == [
        round(get_compression_ratio(f.text), 4) for f in FINALS]


def test_openai_segments_join_as_whispers_do():
    """Segments as Whisper's: an English one starts with its space, a Chinese one with none,
    and a word split across two finals ("t" | "-shirt.") stays whole when they are joined."""
    zh = [wire.Final(0, "我们走吧。", 0.0, 1.0, words(("我们", 0.0, 0.5), ("走吧。", 0.5, 1.0))),
          wire.Final(1, "好的。", 1.2, 1.8, words(("好的。", 1.2, 1.8)))]
    for finals, lang, want in ((PRICE, "en", [" It costs $3.5 for", " a t", "-shirt."]),
                               (zh, "zh", ["我们走吧。", "好的。"])):
        res = FileResult("s", finals, lang, 3.0)
        body = json.loads(render(res, "verbose_json", ["segment"], "transcribe", {}).body)
        assert [x["text"] for x in body["segments"]] == want
        assert "".join(x["text"] for x in body["segments"]).strip() == body["text"]


def test_deepgram_words_are_whole_and_hold_no_space():
    all_words = [w for f in FINALS for w in f.words]
    plain = alternative(all_words, "", punctuate=False)
    assert [w["word"] for w in plain["words"]] == ["look", "at", "bob's", "t-shirt", "a",
                                                   "mid-year", "sale"]
    assert plain["transcript"].split() == [w["word"] for w in plain["words"]]
    punct = alternative(all_words, "x", punctuate=True)
    assert [w["punctuated_word"] for w in punct["words"]] == WHOLE


def test_deepgram_paragraphs_and_utterances_count_whole_words():
    from starlette.datastructures import QueryParams

    q = QueryParams("punctuate=true&paragraphs=true&utterances=true")
    opts = parse_options(q, {k: q.getlist(k) for k in q.keys()}, live=False)

    class Engine:
        model_name, device, compute_type = "tiny.en", "cpu", "int8"
        languages = ("en",)

    import datetime

    body = prerecorded(Engine(), FileResult("s", FINALS, "en", 3.5), opts,
                       datetime.datetime.now(datetime.timezone.utc), "0")
    alt = body["results"]["channels"][0]["alternatives"][0]
    assert sum(p["num_words"] for p in alt["paragraphs"]["paragraphs"]) == len(WHOLE)
    assert [len(u["words"]) for u in body["results"]["utterances"]] == [4, 3]


def test_a_subtitle_line_never_breaks_inside_a_word():
    for width in range(8, 30):
        cues = subtitles.cues(FINALS, subtitles.CueOptions(max_chars=width))
        lines = [line for c in cues for line in c.lines]
        assert not any(line.startswith(("-shirt", "-year")) for line in lines), (width, lines)
        assert " ".join(lines).split() == "Look at Bob's t-shirt. A mid-year sale.".split()


def test_pieces_that_start_with_a_mark_or_a_final_are_glued_too():
    res = FileResult("s", PRICE, "en", 3.0)
    body = json.loads(render(res, "verbose_json", ["word"], "transcribe", {}).body)
    assert [w["word"] for w in body["words"]] == ["It", "costs", "$3.5", "for", "a", "t-shirt."]
    plain = alternative([w for f in PRICE for w in f.words], "", punctuate=False)
    assert [w["word"] for w in plain["words"]] == ["it", "costs", "$3.5", "for", "a", "t-shirt"]
    from starlette.datastructures import QueryParams

    q = QueryParams("utterances=true&utt_split=0.1")
    opts = parse_options(q, {k: q.getlist(k) for k in q.keys()}, live=False)

    class Engine:
        model_name, device, compute_type = "tiny.en", "cpu", "int8"
        languages = ("en",)

    import datetime

    dg = prerecorded(Engine(), res, opts, datetime.datetime.now(datetime.timezone.utc), "0")
    assert [w["word"] for u in dg["results"]["utterances"] for w in u["words"]] == [
        "it", "costs", "$3.5", "for", "a", "t-shirt"]
    for width in range(9, 20):  # (a word wider than a line is cut: not this test's case)
        for lines in (1, 2):
            cues = subtitles.cues(PRICE, subtitles.CueOptions(max_chars=width, max_lines=lines))
            assert all(len(c.lines) <= lines for c in cues), (width, cues)
            got = [line for c in cues for line in c.lines]
            assert " ".join(got).split() == "It costs $3.5 for a t-shirt.".split(), (width, got)


def test_deepgram_words_are_never_punctuation_alone():
    """Whisper writes Chinese marks as units of their own ("，" "。"): with ``punctuate`` each
    was a Deepgram word of its own, ``word: ","`` with its own times, which Deepgram never
    sends; without it, Spanish and German opening marks stayed on the words ("¿qué",
    "„guten") and in the transcript."""
    w = [wire.Word(t, 0.1 * i, 0.1 * i + 0.1, 0.9) for i, t in enumerate(
        ["有", "孕", ",", "不", "能", "。", "「", "走", "」"])]
    alt = alternative(w, "有孕,不能。「走」", punctuate=True)
    assert [(d["word"], d["punctuated_word"]) for d in alt["words"]] == [
        ("有", "有"), ("孕", "孕,"), ("不", "不"), ("能", "能。"), ("走", "「走」")]
    assert alt["transcript"] == "有孕,不能。「走」"
    es = [wire.Word(t, 0.3 * i, 0.3 * i + 0.3, 0.9)
          for i, t in enumerate([" ¿Qué", " pasa?", " ¡Hola!", " „Guten", " Tag“"])]
    alt = alternative(es, "¿Qué pasa? ¡Hola! „Guten Tag“", punctuate=False)
    assert alt["transcript"] == "qué pasa hola guten tag"
    assert [d["word"] for d in alt["words"]] == ["qué", "pasa", "hola", "guten", "tag"]


def test_deepgram_marks_at_a_finals_edges_and_straight_quotes_go_with_their_word():
    """A final that starts with "，" (Whisper's comma committed after the word it closes) put
    it before the next word ("，我"); opening marks at a final's end were dropped; a straight
    quote after a space opens the word after it."""
    def punct(units: list[str]) -> list[str]:
        w = [wire.Word(t, 0.1 * i, 0.1 * i + 0.1, 0.9) for i, t in enumerate(units)]
        return [d["punctuated_word"] for d in alternative(w, "".join(units), True)["words"]]

    assert punct(["，", "我", "们"]) == ["我", "们"]
    assert punct([" He", " said", " ("]) == ["He", "said("]
    assert punct([" He", " said", " \"", "Stop", ".\""]) == ["He", "said", "\"Stop.\""]
