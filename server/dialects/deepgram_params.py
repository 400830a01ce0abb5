"""Deepgram v1 query parameters: which ones WhisperWire honours, which it accepts as having
nothing to change, and which it refuses (with the reason) rather than silently ignore.

Deepgram's clients (its SDKs, LiveKit Agents, Pipecat) send many options; a request for a
feature WhisperWire does not have (diarization, redaction, several channels) is refused at
connect, so nobody believes they got it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .. import wire
from ..errors import ClientError

__all__ = ["CONFIGURABLE", "NEUTRAL_FEATURES", "OFF_ONLY", "DeepgramOptions", "parse_options"]

ENCODINGS = ("linear16", "mulaw", "alaw")
MIN_ENDPOINTING_MS = 300  # below this the VAD would split words apart (webrtcvad, 30 ms frames)

# accepted, nothing to change: either no effect on a Whisper transcript, or metadata only
_NEUTRAL = {"model", "version", "tag", "mip_opt_out", "extra", "no_delay", "numerals",
            "filler_words", "dictation", "measurements", "sentiment_threshold"}
# honoured (see DeepgramOptions)
_HONOURED = {"encoding", "sample_rate", "channels", "language", "interim_results", "endpointing",
             "utterance_end_ms", "vad_events", "punctuate", "smart_format", "keyterm",
             "keywords", "utterances", "paragraphs", "utt_split", "token"}
# features WhisperWire lacks: accepted only when they ask for nothing
OFF_ONLY = {"diarize", "multichannel", "profanity_filter", "detect_entities", "sentiment",
             "summarize", "topics", "intents", "detect_language", "detect_topics"}
# ``Configure``'s ``features``: those it accepts as the query does, changing nothing, and all it
# takes (a feature of OFF_ONLY it takes turned off)
NEUTRAL_FEATURES = {"numerals", "filler_words", "dictation", "measurements"}
CONFIGURABLE = {"punctuate", "smart_format"} | NEUTRAL_FEATURES
_REFUSED = {"redact", "search", "replace", "callback", "callback_method", "diarize_model",
            "custom_topic", "custom_topic_mode", "custom_intent", "custom_intent_mode",
            "language_hint"}


@dataclass(frozen=True)
class DeepgramOptions:
    params: wire.ListenParams
    encoding: str = "linear16"
    container_ok: bool = False  # no encoding given: a WAV header may lead the stream
    model: str = "whisper"
    interim_results: bool = False
    speech_final: bool = True  # endpointing=false: speech_final is never set
    # endpointing=N: speech_final once N ms of silence follow the last word (the VAD ends an
    # utterance after N ms too, but never later than its own hangover: see DeepgramConnection)
    endpointing_ms: int | None = None
    utterance_end_ms: int | None = None
    vad_events: bool = False
    punctuate: bool = False  # any of ``punctuating``
    # the features asked for that punctuate (punctuate, smart_format, paragraphs): Configure
    # turns one off without the others ("smart_format": false left punctuate=true's marks off)
    punctuating: frozenset[str] = frozenset()
    utterances: bool = False
    paragraphs: bool = False
    utt_split: float = 0.8  # seconds of pause that end an utterance (files)


def _bool(q: Mapping[str, str], key: str, default: bool = False) -> bool:
    v = q.get(key)
    if v is None:
        return default
    if v.lower() in ("true", "1"):
        return True
    if v.lower() in ("false", "0"):
        return False
    raise ClientError("bad_parameter", f"{key} must be true or false, got {v!r}")


def _int(q: Mapping[str, str], key: str, lo: int, hi: int) -> int | None:
    v = q.get(key)
    if v is None:
        return None
    n = wire.whole_number(v)
    if n is None:
        raise ClientError("bad_parameter", f"{key} must be an integer, got {v!r}")
    if not lo <= n <= hi:
        raise ClientError("bad_parameter", f"{key} must be {lo}..{hi}, got {n}")
    return n


def _check_names(q: Mapping[str, str], keys: list[str]) -> None:
    for key in keys:
        if key in _NEUTRAL or key in _HONOURED:
            continue
        if key in OFF_ONLY:
            if _bool(q, key):
                raise ClientError("unsupported_parameter", f"{key}=true is not supported by "
                                  "WhisperWire")
            continue
        if key in _REFUSED:
            raise ClientError("unsupported_parameter", f"{key} is not supported by WhisperWire")
        raise ClientError("unsupported_parameter", f"unknown parameter {key!r}")


# Deepgram's Chinese codes name the script as well: Taiwan's and Hong Kong's are traditional
def _language(q: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The language (en-US is en: Whisper knows languages, not regions) and the script
    zh-TW, zh-HK ask for; ``multi``: detected."""
    lang = q.get("language")
    if not lang or lang in ("multi", "auto"):
        return None, None
    return wire.language_tag(lang)


def _prompt(q: Mapping[str, list[str]]) -> str | None:
    """Key terms and keywords (``word:boost``) become the start of Whisper's prompt."""
    terms = [t.strip() for t in q.get("keyterm", []) if t.strip()]
    terms += [k.rsplit(":", 1)[0].strip() for k in q.get("keywords", []) if k.strip()]
    if not terms:
        return None
    prompt = ", ".join(terms) + "."
    if len(prompt) > 1000:
        raise ClientError("bad_prompt", "keyterms and keywords are limited to 1000 characters")
    return prompt


def _seconds(q: Mapping[str, str], key: str, default: float) -> float:
    v = q.get(key)
    if v is None:
        return default
    try:
        x = float(v) if v.isascii() else -1.0  # (float() takes "１.５" too)
    except ValueError:
        x = -1.0
    if not 0.05 <= x <= 60.0:
        raise ClientError("bad_parameter", f"{key} must be seconds, 0.05..60, got {v!r}")
    return x


def parse_options(query: Mapping[str, str], multi: Mapping[str, list[str]], *,
                  live: bool) -> DeepgramOptions:
    """Validate a Deepgram query (``multi``: every value of repeated keys). Raises
    ClientError naming the parameter."""
    # a file's language may be detected (``detect_language``, Deepgram's pre-recorded
    # feature); a live stream asks for it as ``language=multi``
    detect = not live and _bool(query, "detect_language")
    _check_names(query, [k for k in multi if live or k != "detect_language"])
    if (_int(query, "channels", 1, 64) or 1) != 1:
        raise ClientError("unsupported_parameter", "only channels=1 is supported")
    enc = query.get("encoding")
    container_ok = enc is None
    if live and enc is None:
        enc = "linear16"
    if enc is not None and enc not in ENCODINGS:
        raise ClientError("bad_encoding", f"encoding {enc!r} is not supported; use one of "
                          f"{', '.join(ENCODINGS)} (or, for files, none)")
    default_rate = 8000 if enc in ("mulaw", "alaw") else 16000
    rate = _int(query, "sample_rate", wire.MIN_SAMPLE_RATE, wire.MAX_SAMPLE_RATE) or default_rate
    hangover: int | None = None
    ep = query.get("endpointing")
    if ep is not None and ep.lower() != "false":
        hangover = max(MIN_ENDPOINTING_MS, _int(query, "endpointing", 0, 60000) or 0)
    ue = _int(query, "utterance_end_ms", 1000, 60000)
    if ue is not None and not _bool(query, "interim_results"):
        raise ClientError("bad_parameter", "utterance_end_ms needs interim_results=true")
    lang, script = _language(query)
    params = wire.ListenParams(sample_rate=rate, language=None if detect else lang,
                               prompt=_prompt(multi), zh_script=script)
    # Deepgram finds paragraphs from punctuation, and ``paragraphs`` turns it on
    paragraphs = _bool(query, "paragraphs")
    punctuating = frozenset(k for k in ("punctuate", "smart_format", "paragraphs")
                            if _bool(query, k))
    return DeepgramOptions(
        params=params, encoding=enc or "linear16", container_ok=container_ok, model=query.get("model") or "whisper",
        interim_results=_bool(query, "interim_results"),
        speech_final=(ep or "").lower() != "false", endpointing_ms=hangover,
        utterance_end_ms=ue, vad_events=_bool(query, "vad_events"),
        punctuate=bool(punctuating), punctuating=punctuating, utterances=_bool(query, "utterances"), paragraphs=paragraphs,
        utt_split=_seconds(query, "utt_split", 0.8))


def with_rate(opts: DeepgramOptions, rate: int) -> DeepgramOptions:
    return dataclasses.replace(opts, params=dataclasses.replace(opts.params, sample_rate=rate))
