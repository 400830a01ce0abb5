"""Deepgram query parameters, tokens and G.711 audio, as pure functions (no server, no model)."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.datastructures import QueryParams
from whisperwire.server.dialects.common import g711_to_float, speaker_token
from whisperwire.server.dialects.deepgram_params import parse_options
from whisperwire.server.errors import ClientError


def parse(query: str, live: bool = True):
    q = QueryParams(query)
    return parse_options(q, {k: q.getlist(k) for k in q.keys()}, live=live)


def test_what_livekit_and_pipecat_send_is_accepted():
    livekit = ("model=nova-3&punctuate=true&smart_format=false&no_delay=true&interim_results=true"
               "&encoding=linear16&vad_events=true&sample_rate=48000&channels=1&endpointing=25"
               "&filler_words=true&profanity_filter=false&numerals=false&mip_opt_out=false"
               "&keyterm=WhisperWire&keyterm=Deepgram&language=en-US")
    o = parse(livekit)
    assert o.params.sample_rate == 48000 and o.params.language == "en"
    assert o.endpointing_ms == 300, "25 ms endpointing is floored where the VAD can still work"
    assert o.punctuate and o.interim_results and o.vad_events and o.speech_final
    assert o.params.prompt == "WhisperWire, Deepgram."
    o = parse("model=nova-3-general&language=en&encoding=linear16&sample_rate=16000"
              "&interim_results=true&punctuate=true&smart_format=false&keywords=Gutenberg:2")
    assert o.params.prompt == "Gutenberg." and o.endpointing_ms is None


def test_options_map_onto_the_session():
    o = parse("encoding=mulaw&endpointing=false&utterance_end_ms=1500&interim_results=true"
              "&language=multi")
    assert o.encoding == "mulaw" and o.params.sample_rate == 8000
    assert not o.speech_final and o.utterance_end_ms == 1500 and o.params.language is None
    assert not parse("").punctuate, "Deepgram's default: no punctuation"
    assert parse("smart_format=true").punctuate
    f = parse("utterances=true&paragraphs=true&utt_split=1.5", live=False)
    assert f.utterances and f.paragraphs and f.utt_split == 1.5 and f.encoding == "linear16"


@pytest.mark.parametrize("query,code", [
    ("encoding=opus", "bad_encoding"),
    ("encoding=flac", "bad_encoding"),
    ("sample_rate=4000", "bad_parameter"),
    ("sample_rate=abc", "bad_parameter"),
    ("sample_rate=\uff11\uff16\uff10\uff10\uff10", "bad_parameter"),  # full-width digits
    ("sample_rate=16_000", "bad_parameter"),
    ("utt_split=\uff11", "bad_parameter"),
    ("channels=2", "unsupported_parameter"),
    ("diarize=true", "unsupported_parameter"),
    ("multichannel=true", "unsupported_parameter"),
    ("redact=pci", "unsupported_parameter"),
    ("search=hello", "unsupported_parameter"),
    ("callback=http://example.com", "unsupported_parameter"),
    ("made_up=1", "unsupported_parameter"),
    ("interim_results=maybe", "bad_parameter"),
    ("endpointing=soon", "bad_parameter"),
    ("utterance_end_ms=500&interim_results=true", "bad_parameter"),
    ("utterance_end_ms=1000", "bad_parameter"),  # Deepgram: needs interim_results
    ("language=en_US!", "bad_language"),
    ("keyterm=" + "x" * 1001, "bad_prompt"),
    ("utt_split=0", "bad_parameter"),
])
def test_unsupported_and_bad_values_are_refused(query, code):
    with pytest.raises(ClientError) as err:
        parse(query)
    assert err.value.code == code, err.value.message
    assert err.value.message


def test_features_left_off_are_fine():
    parse("diarize=false&multichannel=false&profanity_filter=false&detect_entities=false")


def test_tokens_in_every_form_a_client_sends():
    q: dict[str, str] = {}
    assert speaker_token({"authorization": "Token abc"}, q) == "abc"
    assert speaker_token({"authorization": "bearer abc"}, q) == "abc"
    assert speaker_token({"sec-websocket-protocol": "token, abc"}, q) == "abc"
    assert speaker_token({}, {"token": "abc"}) == "abc"
    assert speaker_token({"authorization": "Basic abc"}, q) is None
    assert speaker_token({"authorization": "Token "}, q) is None


def test_g711_decodes_to_the_standard_values():
    mu = g711_to_float(bytes([0xFF, 0x7F, 0x00, 0x80]), "mulaw") * 32768
    assert mu.tolist() == [0, 0, -32124, 32124]
    a = g711_to_float(bytes([0xD5, 0x55, 0xAA, 0x2A]), "alaw") * 32768
    assert a.tolist() == [8, -8, 32256, -32256]
    for law in ("mulaw", "alaw"):  # the sign bit mirrors; within a sign, values are ordered
        t = g711_to_float(bytes(range(256)), law)
        assert np.array_equal(t[np.arange(256) ^ 0x80], -t)
        assert len(set(np.abs(t).tolist())) >= 127 and np.abs(t).max() < 1.0


def test_chinese_results_have_no_spaces_and_whole_latin_words():
    """Deepgram's defaults (no punctuate) joined our per-character words with spaces: "他 们 仍
    在", "w i fi 门 铃", and kept "。" as a word."""
    from whisperwire.server.dialects.deepgram import alternative
    from whisperwire.server.wire import Word

    units = ["他", "制", "作", "了", "W", "i", "Fi", "门", "铃", "。"]
    words = [Word(u, i * 0.2, i * 0.2 + 0.2, 0.9) for i, u in enumerate(units)]
    plain = alternative(words, "他制作了WiFi门铃。", punctuate=False)
    assert plain["transcript"] == "他制作了wifi门铃"
    assert [w["word"] for w in plain["words"]] == ["他", "制", "作", "了", "wifi", "门", "铃"]
    wifi = plain["words"][4]
    assert (wifi["start"], wifi["end"]) == (0.8, 1.4)
    punct = alternative(words, "他制作了WiFi门铃。", punctuate=True)
    assert punct["transcript"] == "他制作了WiFi门铃。"
    # ("。" is the punctuation of the word before it, never a word of its own)
    assert [w["punctuated_word"] for w in punct["words"]][4:] == ["WiFi", "门", "铃。"]
    english = [Word(" Ask", 0, 0.3, 0.9), Word(" not.", 0.3, 0.6, 0.9)]
    assert alternative(english, "Ask not.", punctuate=False)["transcript"] == "ask not"
    # a symbol that is said is a word, punctuation or not (faster-whisper makes "%" one)
    said = [Word(w, i * 0.2, i * 0.2 + 0.2, 0.9) for i, w in enumerate(
        [" 3", " +", " 4", " =", " 7", " by", " 50", "%", "..."])]
    assert alternative(said, "", punctuate=False)["transcript"] == "3 + 4 = 7 by 50%"


@pytest.mark.parametrize("lang,script", [("zh-TW", "traditional"), ("zh-HK", "traditional_hk"),
                                         ("zh-CN", None), ("zh", None)])
def test_taiwan_and_hong_kong_chinese_are_written_in_traditional_characters(lang, script):
    o = parse(f"language={lang}")
    assert o.params.language == "zh" and o.params.zh_script == script


def test_a_prerecorded_chinese_file_has_no_spaces_in_utterances_or_paragraphs():
    import datetime
    from types import SimpleNamespace

    from whisperwire.server.dialects.common import FileResult
    from whisperwire.server.dialects.deepgram_files import prerecorded
    from whisperwire.server.wire import Final, Word

    units = ["他", "们", "仍", "在", "努", "力", "。"]
    words = tuple(Word(u, i * 0.2, i * 0.2 + 0.2, 0.9) for i, u in enumerate(units))
    res = FileResult("s", [Final(0, "他们仍在努力。", 0.0, 1.4, words, True)], "zh", 2.0)
    opts = parse("language=zh-TW&punctuate=true&utterances=true&paragraphs=true", live=False)
    body = prerecorded(SimpleNamespace(model_name="base"), res, opts,
                       datetime.datetime.now(datetime.timezone.utc), "0" * 64)
    results = body["results"]
    assert results["utterances"][0]["transcript"] == "他们仍在努力。"
    paras = results["channels"][0]["alternatives"][0]["paragraphs"]
    assert paras["transcript"] == "\n他们仍在努力。"
    assert opts.params.zh_script == "traditional"  # (the file's session writes it so)
