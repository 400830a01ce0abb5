"""Protocol v1: every message round-trips; malformed input raises ProtocolError, never more."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from whisperwire.server import wire
from whisperwire.server.errors import ProtocolError

MESSAGES = [
    wire.Finalize(),
    wire.Close(),
    wire.Ready("abc", "tiny.en", "cpu", "int8", 16000),
    wire.Ready("abc", "tiny.en", "cpu", "int8", 16000, view_token="v1.abc"),
    wire.Status(12.5, 1.25, 0.5),
    wire.Partial(3, "hello wor", 1.25, 2.5),
    wire.Final(4, "hello world", 1.0, 2.0, (wire.Word(" hello", 1.0, 1.5, 0.9),
                                           wire.Word(" world", 1.5, 2.0, 0.8)), True),
    wire.Error("bad_audio", "odd length"),
    wire.Closed("client_close", 12.5),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m.type)
def test_round_trip(msg):
    text = wire.encode(msg)
    assert json.loads(text)["type"] == msg.type
    assert wire.decode(text) == msg


def test_final_json_form_is_documented_shape():
    d = json.loads(wire.encode(next(m for m in MESSAGES if isinstance(m, wire.Final))))
    assert d == {
        "type": "final", "segment": 4, "text": "hello world", "start": 1.0, "end": 2.0,
        "words": [{"word": " hello", "start": 1.0, "end": 1.5, "probability": 0.9},
                  {"word": " world", "start": 1.5, "end": 2.0, "probability": 0.8}],
        "eou": True,
    }


@pytest.mark.parametrize(
    "text, code",
    [
        ("not json", "bad_json"),
        ("[1, 2]", "bad_message"),
        ('{"type": "launch"}', "unknown_type"),
        ("{}", "unknown_type"),
        ('{"type": 5}', "unknown_type"),
        ('{"type": "partial", "segment": "x", "text": "", "start": 0, "end": 0}', "bad_message"),
        ('{"type": "partial", "segment": 1, "text": "", "start": NaN, "end": 0}', "bad_message"),
        ('{"type": "final", "segment": 1, "text": "", "start": 0, "end": 0, "words": 3}',
         "bad_message"),
        ('{"type": "ready"}', "bad_message"),
        ("[" * 1000 + "]" * 1000, "bad_json"),
        ('{"a":' * 5000 + "1" + "}" * 5000, "bad_json"),
        ('{"type":"ready","session":"x","model":"m","device":"d","compute_type":"c",'
         '"sample_rate":16000,"view_token":5}', "bad_message"),
    ],
)
def test_malformed(text, code):
    with pytest.raises(ProtocolError) as e:
        wire.decode(text)
    assert e.value.code == code


def test_allowed_limits_client_messages():
    assert wire.decode('{"type":"close"}', allowed=wire.CLIENT_MESSAGES) == wire.Close()
    with pytest.raises(ProtocolError):
        wire.decode(wire.encode(MESSAGES[2]), allowed=wire.CLIENT_MESSAGES)


@given(st.text(max_size=200))
def test_decode_never_raises_anything_else(text):
    try:
        wire.decode(text)
    except ProtocolError:
        pass


@pytest.mark.parametrize(
    "query, code",
    [
        ({"sample_rate": "7999"}, "bad_sample_rate"),
        ({"sample_rate": "48001"}, "bad_sample_rate"),
        ({"sample_rate": "abc"}, "bad_sample_rate"),
        ({"sample_rate": "\uff11\uff16\uff10\uff10\uff10"}, "bad_sample_rate"),  # full width
        ({"sample_rate": " 16000"}, "bad_sample_rate"),
        ({"sample_rate": "16_000"}, "bad_sample_rate"),
        ({"encoding": "mp3"}, "bad_encoding"),
        ({"task": "summarise"}, "bad_task"),
        ({"language": "english!"}, "bad_language"),
        ({"language": "éé"}, "bad_language"),
        ({"language": "-TW"}, "bad_language"),
        ({"session": "a b"}, "bad_session"),
        ({"session": "会議"}, "bad_session"),
        ({"session": "x\u0660"}, "bad_session"),  # a Unicode digit
        ({"session": "."}, "bad_session"),
        ({"session": ".."}, "bad_session"),
        ({"session": "a" * 65}, "bad_session"),
        ({"session": "a/b"}, "bad_session"),
        ({"prompt": "x" * 1001}, "bad_prompt"),
    ],
)
def test_listen_params_rejected(query, code):
    with pytest.raises(ProtocolError) as e:
        wire.ListenParams.from_query(query)
    assert e.value.code == code


@pytest.mark.parametrize("tag, lang, script", [
    ("zh", "zh", None), ("ZH", "zh", None), ("zh-CN", "zh", None), ("zh-TW", "zh", "traditional"),
    ("zh-hk", "zh", "traditional_hk"), ("zh-Hant", "zh", "traditional"), ("en-US", "en", None),
    ("auto", "auto", None), ("zh-Hant-TW", "zh", "traditional"), ("zh_TW", "zh", "traditional"),
    ("cmn-Hant-TW", "zh", "traditional"), ("cmn-Hans-CN", "zh", None), ("zh-Hans-HK", "zh", None),
    ("cmn", "zh", None), ("en-TW", "en", None), ("pt_BR", "pt", None), ("zh-CHT", "zh", "traditional"),
    ("zh-CHS", "zh", None), ("zh-MO", "zh", "traditional_hk"), ("zh-Hant-HK", "zh", "traditional_hk"),
])
def test_language_tags_are_read_as_every_api_reads_them(tag, lang, script):
    """Ours refused "zh-TW", "zh-CN" and "ZH", which the Deepgram endpoint took (and OpenAI's
    wrote "zh-TW" in simplified characters); "zh-Hant-TW" came out simplified, and "zh_TW"
    (a locale's form) and Google's "cmn-Hant-TW" were refused."""
    p = wire.ListenParams.from_query({"language": tag})
    assert (p.language, p.zh_script) == (lang, script)
    assert wire.ListenParams.from_query({"language": tag, "zh_script": "as_is"}).zh_script \
        == "as_is"  # (asked for in so many words: that wins)


def test_optional_fields_are_omitted_when_unset():
    d = json.loads(wire.encode(wire.Ready("s", "m", "cpu", "int8", 16000)))
    assert "view_token" not in d
    assert json.loads(wire.encode(wire.Status(1.0, 0.5, 0.25))) == {
        "type": "status", "audio_seconds": 1.0, "lag": 0.5, "backlog": 0.25}


@pytest.mark.parametrize("sid", ["a", "A.b-c_9", "...a", "x" * 64])
def test_session_ids_accepted(sid):
    assert wire.ListenParams.from_query({"session": sid}).session == sid


def test_listen_params_defaults_and_round_trip():
    p = wire.ListenParams.from_query({})
    assert (p.sample_rate, p.encoding, p.language, p.task) == (16000, "pcm_s16le", None, "transcribe")
    q = wire.ListenParams(48000, "pcm_f32le", "auto", "translate", "Kubernetes", "room-1")
    assert wire.ListenParams.from_query(q.to_query()) == q
    assert q.bytes_per_sample == 4


def test_a_deepgram_encoding_on_our_path_points_to_the_deepgram_one():
    """A Deepgram client pointed at /v1/listen (Deepgram's own path, host swapped) got only
    'encoding must be one of pcm_s16le, pcm_f32le'."""
    with pytest.raises(ProtocolError) as e:
        wire.ListenParams.from_query({"encoding": "linear16", "sample_rate": "16000"})
    assert e.value.code == "bad_encoding" and "/deepgram/v1/listen" in e.value.message
