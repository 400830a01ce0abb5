"""Wire protocol v1: every message of WhisperWire, defined once.

The server, the Python client and the JS client (``web/wire.js``) follow this module; the
README documents it. Each message is a frozen dataclass with a ``type`` name, ``to_json()`` for
its dict form and :func:`encode`/:func:`decode` for its text form. Parsing never trusts input:
anything malformed raises :class:`~whisperwire.server.errors.ProtocolError`, never ``KeyError``
or ``AssertionError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from .errors import ProtocolError

__all__ = [
    "ENCODINGS",
    "MAX_SAMPLE_RATE",
    "MIN_SAMPLE_RATE",
    "TASKS",
    "Channel",
    "Close",
    "Closed",
    "Error",
    "Final",
    "Finalize",
    "Language",
    "ListenParams",
    "Partial",
    "Ready",
    "Said",
    "Status",
    "UtteranceEnd",
    "Word",
    "decode",
    "loads",
    "encode",
    "valid_session_id",
]

MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 48000
ENCODINGS = ("pcm_s16le", "pcm_f32le")
TASKS = ("transcribe", "translate")
# traditional: Taiwan's standard forms (為 裡 群 著); traditional_hk: Hong Kong's (為 裏 羣 着).
# OpenCC's own standard (爲 裏 羣 着, "s2t") is neither place's, and a Taiwan streamer's captions
# read 羣 for the 群 every Taiwanese text has
ZH_SCRIPTS = ("simplified", "traditional", "traditional_hk", "as_is")
BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4}
# ASCII only (the id goes into file names and Content-Disposition headers), never only dots
# ("." and ".." are path segments)
SESSION_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9._-]{1,64}\Z")
_TIMES = ("start", "end", "audio_seconds", "lag", "backlog")


_TRADITIONAL = {"tw", "hant", "cht"}  # subtags asking for traditional ("zh-CHT")
_HONG_KONG = {"hk", "mo"}  # ... in Hong Kong's (and Macau's) forms
_CHINESE = {"zh", "cmn", "zho", "chi"}  # (Google's tags are "cmn-Hans-CN", "cmn-Hant-TW")


def language_tag(tag: str) -> tuple[str, str | None]:
    """A language tag as Whisper's language and the Chinese script it asks for: "en-US" is
    "en", "zh-TW" and "zh-Hant-TW" Chinese in Taiwan's traditional characters, "zh-HK" in
    Hong Kong's, "ZH" "zh", "cmn-Hans-CN" "zh", and "zh_TW" (a locale's form) as "zh-TW" (every API takes tags the
    same way; ours refused "zh-TW" and "ZH" that Deepgram's took, OpenAI's wrote "zh-TW" in
    simplified, and "zh-Hant-TW" came out simplified). Raises ProtocolError ``bad_language``."""
    parts = tag.replace("_", "-").lower().split("-")
    base = parts[0]
    if not (base.isascii() and base.isalpha() and 2 <= len(base) <= 3) or not all(
            p.isascii() and p.isalnum() and len(p) <= 8 for p in parts[1:]):  # ("en_US!")
        raise ProtocolError("bad_language", f"unsupported language {tag!r}")
    if base not in _CHINESE:
        return base, None
    rest = set(parts[1:])
    if "hans" in rest or not rest & (_TRADITIONAL | _HONG_KONG):
        return "zh", None
    return "zh", ("traditional_hk" if rest & _HONG_KONG else "traditional")


def valid_session_id(session: str) -> bool:
    return SESSION_ID.match(session) is not None


def whole_number(text: str) -> int | None:
    """A query's whole number in ASCII digits, or None: ``int()`` also takes "１６０００",
    " 16000" and "16_000", which no client means."""
    return int(text) if text.isascii() and text.isdigit() else None


def _t(x: float) -> float:
    """Times travel as seconds rounded to milliseconds."""
    return round(float(x), 3)


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float
    probability: float

    def to_json(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "start": _t(self.start),
            "end": _t(self.end),
            "probability": round(float(self.probability), 4),
        }

    @classmethod
    def from_json(cls, d: Any) -> Word:
        if not isinstance(d, Mapping):
            raise ProtocolError("bad_message", "a word must be an object")
        return cls(
            word=_req(d, "word", str),
            start=_req(d, "start", float),
            end=_req(d, "end", float),
            probability=_req(d, "probability", float),
        )


class _Message:
    type: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if v is None:
                continue  # optional fields are omitted when unset
            if f.name in _TIMES:
                v = _t(v)
            elif f.name == "words":
                v = [w.to_json() for w in v]
            elif isinstance(v, Word):
                v = v.to_json()
            out[f.name] = v
        return out


@dataclass(frozen=True)
class Finalize(_Message):
    """Client → server: turn everything heard so far into finals; the session stays open."""

    type: ClassVar[str] = "finalize"


@dataclass(frozen=True)
class Close(_Message):
    """Client → server: finalize, then the server sends ``closed`` and closes with 1000."""

    type: ClassVar[str] = "close"


@dataclass(frozen=True)
class Said(_Message):
    """Client → server, before a stream's first audio: its first ``seconds`` were made final
    already (a speaker back on a server that restarted, or on a channel that goes on in a new
    stream, sends them again so that the word after them is heard whole); they are decoded as
    context, and no word in them is said again. At most ``MAX_SAID_S``. On a channel with a
    clock before the stream (``offset`` > 0) the stream's time 0 moves back by them, so that
    its finals go on where the channel's did."""

    type: ClassVar[str] = "said"
    seconds: float
    # the last word the speaker was shown final, on this stream's clock (it ends about where
    # ``seconds`` do): a server that restarted has no channel to read it from, and the word
    # a drain cut and made final, heard whole again, was said twice ("go. | go.")
    last: Word | None = None


MAX_SAID_S = 5.0


@dataclass(frozen=True)
class Ready(_Message):
    """First message to a speaker. ``view_token`` (only when auth is on) lets viewers, the
    overlay and downloads see this session's channel, and nothing else. ``rejoined`` (only
    when true): this connection goes on in the stream a dropped one left, which the server
    kept (``rejoin_grace_s``); else the stream is new, on a new channel or on one that goes on
    (a speaker back after the grace, or on another Ray replica), and a speaker back after a
    drop sends ``said`` with the audio before the channel's ``offset`` it sends again."""

    type: ClassVar[str] = "ready"
    session: str
    model: str
    device: str
    compute_type: str
    sample_rate: int
    view_token: str | None = None
    rejoined: bool | None = None


@dataclass(frozen=True)
class Partial(_Message):
    """The current hypothesis for all audio after the last final; may still change."""

    type: ClassVar[str] = "partial"
    segment: int
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Final(_Message):
    """Immutable caption text; replaces the partial of the same ``segment``."""

    type: ClassVar[str] = "final"
    segment: int
    text: str
    start: float
    end: float
    words: tuple[Word, ...] = field(default_factory=tuple)
    eou: bool = False


@dataclass(frozen=True)
class UtteranceEnd(_Message):
    """Server → speaker: an utterance ended (the VAD heard the speaker stop, or a ``finalize``
    or ``close`` asked for finals) and no final carries its ``eou``, because every word of it
    was already final (or it had none: noise); also the answer to a ``finalize`` with nothing
    left to make final. An utterance end is said by a final's ``eou`` or by this, not both.
    ``end``: where the last final word ends (stream seconds)."""

    type: ClassVar[str] = "utterance_end"
    end: float


@dataclass(frozen=True)
class Error(_Message):
    type: ClassVar[str] = "error"
    code: str
    message: str


@dataclass(frozen=True)
class Status(_Message):
    """Periodic health of a speaking session: ``lag`` is speech received but not yet final
    (seconds); it stays bounded under overload, where captions get coarser instead of later.
    ``backlog`` is the part of it not yet sent to the decoder at all (seconds)."""

    type: ClassVar[str] = "status"
    audio_seconds: float
    lag: float
    backlog: float = 0.0


@dataclass(frozen=True)
class Language(_Message):
    """Server → speaker, for ``language=auto``: the language the session is now transcribed
    in, detected once from the first seconds of speech (``start``: where that speech begins,
    stream seconds), and again when speech resumes after a long pause. Server → viewer: the
    language of the captions from ``start`` on (each speaker's, known when it starts or once
    detected; English for a translation), which the page and the overlay mark the text with.
    ``script``: for Chinese, the script the text is written in (:data:`ZH_SCRIPTS`)."""

    type: ClassVar[str] = "language"
    language: str
    probability: float
    start: float
    script: str | None = None


@dataclass(frozen=True)
class Closed(_Message):
    type: ClassVar[str] = "closed"
    reason: str
    audio_seconds: float


@dataclass(frozen=True)
class Channel(_Message):
    """First message to a viewer: the channel it follows, and which life of that id
    (``instance``). A restarted server's channel, or one opened again after it expired, begins
    anew with its finals numbered from 0: a viewer that was counting another life's finals
    (to skip the ones the server replays when it comes back) starts its count over, or it
    would take the new life's first finals for replays and never show them. A viewer that
    puts the lives on one clock (``captions --output``) starts the new one ``said`` before
    where the old one was final to, as the speaker's own file does (it ran 1 s late)."""

    type: ClassVar[str] = "channel"
    session: str
    instance: str
    # (only when set) this life's first seconds, which its speaker sent again as ``said``
    # after an earlier life of the id made them final: its 0 lies that long before where
    # that life was final to (a restarted server). Sent again when the speaker says it.
    said: float | None = None


Message = (Finalize | Close | Said | Ready | Partial | Final | UtteranceEnd | Error | Status | Language
           | Closed | Channel)
_BY_TYPE: dict[str, type] = {
    c.type: c for c in (Finalize, Close, Said, Ready, Partial, Final, UtteranceEnd, Error, Status,
                        Language, Closed, Channel)
}
CLIENT_MESSAGES = ("finalize", "close", "said")


def encode(msg: Message) -> str:
    return json.dumps(msg.to_json(), ensure_ascii=False, separators=(",", ":"))


def _req(d: Mapping[str, Any], key: str, kind: type) -> Any:
    if key not in d:
        raise ProtocolError("bad_message", f"missing field {key!r}")
    v = d[key]
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ProtocolError("bad_message", f"field {key!r} must be a finite number")
        return float(v)
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ProtocolError("bad_message", f"field {key!r} must be an integer")
        return v
    if not isinstance(v, kind):
        raise ProtocolError("bad_message", f"field {key!r} must be {kind.__name__}")
    return v


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes) -> Any:
    """``json.loads`` for text from a client, which raises ValueError for a lone UTF-16
    surrogate too: ``"\\ud800"`` is valid JSON, but no UTF-8 can carry it, so a prompt holding
    one failed every decode of the session and an echo of it stopped all writes to the client."""
    value = json.loads(text)
    if isinstance(text, str) and _SURROGATE_ESCAPE.search(text) and _lone_surrogate(value):
        raise ValueError("the text holds a lone UTF-16 surrogate (\\ud800-\\udfff)")
    return value


def _lone_surrogate(v: Any) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(v, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_lone_surrogate(x) for x in v)
    return False


def decode(text: str | bytes, *, allowed: tuple[str, ...] | None = None) -> Message:
    """Parse one JSON text message; ``allowed`` limits which types are acceptable here."""
    try:
        d = loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError("bad_json", f"message is not valid JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("bad_json", "message is nested too deeply") from None
    if not isinstance(d, dict):
        raise ProtocolError("bad_message", "message must be a JSON object")
    kind = d.get("type")
    if not isinstance(kind, str) or kind not in _BY_TYPE or (allowed and kind not in allowed):
        raise ProtocolError("unknown_type", f"unknown message type {kind!r}")
    cls = _BY_TYPE[kind]
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "words":
            raw = d.get("words", [])
            if not isinstance(raw, list):
                raise ProtocolError("bad_message", "field 'words' must be a list")
            kwargs["words"] = tuple(Word.from_json(w) for w in raw)
        elif f.name == "last":
            raw = d.get("last")
            kwargs["last"] = None if raw is None else Word.from_json(raw)
        elif f.name == "eou":
            kwargs["eou"] = bool(d.get("eou", False))
        elif f.default is not MISSING and d.get(f.name) is None:
            kwargs[f.name] = f.default  # optional, and absent
        else:
            typ = {"int": int, "float": float, "str": str, "bool": bool}[
                str(f.type).split(" |")[0]]
            kwargs[f.name] = _req(d, f.name, typ)
    return cls(**kwargs)


BAD_SESSION = "a session id is 1 to 64 of A-Z a-z 0-9 . _ - (not only dots)"


@dataclass(frozen=True)
class ListenParams:
    """Query parameters of ``GET /v1/listen``."""

    sample_rate: int = 16000
    encoding: str = "pcm_s16le"
    language: str | None = None
    task: str = "transcribe"
    prompt: str | None = None
    session: str | None = None
    # Chinese text in simplified or traditional characters, or as the model writes it
    # (None: simplified for language=zh and for Chinese detected by language=auto)
    zh_script: str | None = None

    @property
    def bytes_per_sample(self) -> int:
        return BYTES_PER_SAMPLE[self.encoding]

    @classmethod
    def from_query(cls, q: Mapping[str, str]) -> ListenParams:
        """Validate the query; raises ProtocolError with a code the client can act on."""
        rate = whole_number(q.get("sample_rate", "16000"))
        if rate is None:
            raise ProtocolError("bad_sample_rate", "sample_rate must be an integer")
        if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
            raise ProtocolError(
                "bad_sample_rate",
                f"sample_rate must be {MIN_SAMPLE_RATE}..{MAX_SAMPLE_RATE}, got {rate}",
            )
        enc = q.get("encoding", "pcm_s16le")
        if enc not in ENCODINGS:
            hint = (" (a Deepgram client: use /deepgram/v1/listen)"
                    if enc in ("linear16", "mulaw", "alaw") else "")
            raise ProtocolError("bad_encoding",
                                f"encoding must be one of {', '.join(ENCODINGS)}{hint}")
        task = q.get("task", "transcribe")
        if task not in TASKS:
            raise ProtocolError("bad_task", f"task must be one of {', '.join(TASKS)}")
        lang, tag_script = q.get("language") or None, None
        if lang is not None and lang != "auto":
            lang, tag_script = language_tag(lang)
        session = q.get("session") or None
        if session is not None and not valid_session_id(session):
            raise ProtocolError("bad_session", BAD_SESSION)
        prompt = q.get("prompt") or None
        if prompt is not None and len(prompt) > 1000:
            raise ProtocolError("bad_prompt", "prompt is limited to 1000 characters")
        script = q.get("zh_script") or None
        if script is not None and script not in ZH_SCRIPTS:
            raise ProtocolError("bad_zh_script", f"zh_script must be one of {', '.join(ZH_SCRIPTS)}")
        return cls(rate, enc, lang, task, prompt, session, script or tag_script)

    def to_query(self) -> dict[str, str]:
        out = {"sample_rate": str(self.sample_rate), "encoding": self.encoding, "task": self.task}
        for k in ("language", "prompt", "session", "zh_script"):
            v = getattr(self, k)
            if v:
                out[k] = v
        return out
