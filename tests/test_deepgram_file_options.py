"""Deepgram pre-recorded options as Deepgram documents them (pure: the response is built from
finals, no model): ``paragraphs`` turns punctuation on and breaks only where a sentence ends,
and ``detect_language`` asks for the language to be detected."""

from __future__ import annotations

import datetime

import pytest
from starlette.datastructures import QueryParams

from whisperwire.server import wire
from whisperwire.server.dialects.common import FileResult
from whisperwire.server.dialects.deepgram_files import prerecorded
from whisperwire.server.dialects.deepgram_params import parse_options
from whisperwire.server.errors import ClientError


def opts(query: str, live: bool = False):  # type: ignore[no-untyped-def]
    q = QueryParams(query)
    return parse_options(q, {k: q.getlist(k) for k in q.keys()}, live=live)


class Engine:
    model_name, device, compute_type, languages = "tiny.en", "cpu", "int8", ("en",)


def final(seg: int, text: str, start: float) -> wire.Final:
    ws = tuple(wire.Word(" " + w, start + 0.3 * i, start + 0.3 * i + 0.25, 0.9)
               for i, w in enumerate(text.split()))
    return wire.Final(seg, text, start, ws[-1].end, ws, eou=True)


# jfk as a file: one sentence, said in three utterances with pauses of over a second
JFK = [final(0, "And so my fellow Americans,", 0.3), final(1, "ask not", 3.6),
       final(2, "what your country can do for you, ask what you can do for your country.", 5.6),
       final(3, "Thank you.", 11.0)]


def body(query: str) -> dict:
    return prerecorded(Engine(), FileResult("s", JFK, "en", 12.0), opts(query),
                       datetime.datetime.now(datetime.timezone.utc), "0")


def test_paragraphs_break_only_where_a_sentence_ends_and_turn_punctuation_on():
    """Before: jfk's one sentence was three paragraphs (one per pause), and without
    ``punctuate`` the transcript was bare, where Deepgram says paragraphs are found from
    punctuation and turn it on."""
    alt = body("paragraphs=true")["results"]["channels"][0]["alternatives"][0]
    paras = alt["paragraphs"]["paragraphs"]
    assert [[s["text"] for s in p["sentences"]] for p in paras] == [
        ["And so my fellow Americans, ask not what your country can do for you, ask what you "
         "can do for your country."], ["Thank you."]]
    assert [p["num_words"] for p in paras] == [22, 2]
    assert alt["transcript"].startswith("And so my fellow Americans,")
    assert alt["words"][0]["punctuated_word"] == "And"


def test_detect_language_is_honoured_for_files_and_refused_live():
    assert opts("detect_language=true&language=en").params.language is None
    assert opts("detect_language=false&language=en").params.language == "en"
    with pytest.raises(ClientError):
        opts("detect_language=true", live=True)


def test_text_without_sentence_ends_has_a_paragraph_per_utterance():
    """Whisper's Chinese may carry no punctuation at all: one paragraph for the whole file
    would say nothing; each utterance is one, as before."""
    plain = [final(0, "and so my fellow americans", 0.3), final(1, "ask not", 3.6)]
    b = prerecorded(Engine(), FileResult("s", plain, "en", 5.0), opts("paragraphs=true"),
                    datetime.datetime.now(datetime.timezone.utc), "0")
    paras = b["results"]["channels"][0]["alternatives"][0]["paragraphs"]["paragraphs"]
    assert [p["num_words"] for p in paras] == [5, 2]


def test_a_sentence_that_ends_inside_a_closing_quote_ends():
    """'He said, "Stop."' and '他说：“走。”' end in a quote mark, not a full stop: the sentence
    went on into the next utterance, and quoted speech (audiobooks; Whisper's Chinese often
    writes 。”) made one paragraph of everything after it."""
    from whisperwire.server.dialects.deepgram_files import _paragraphs

    def w(t: str, a: float) -> wire.Word:
        return wire.Word(t, a, a + 0.2, 0.9)

    for first, second in ([[w(" He", 0), w(" said,", .2), w(' "Stop."', .4)],
                           [w(" Then", 2), w(" he", 2.2), w(" left.", 2.4)]],
                          [[w("他说：", 0), w("“走。”", .2)], [w("然后", 2), w("走了。", 2.2)]]):
        paras = _paragraphs([first, second], True)["paragraphs"]
        assert [len(p["sentences"]) for p in paras] == [1, 1], paras
