"""Deepgram v1 under ``/deepgram``: the live WebSocket and pre-recorded POST of
``/deepgram/v1/listen``, so Deepgram's SDKs and the frameworks built on them (LiveKit Agents,
Pipecat) work with only their base URL changed.

A live stream is an ordinary session: our finals become ``Results`` with ``is_final`` (and
``speech_final`` when the utterance ended, ``from_finalize`` when a ``Finalize`` asked for them),
our partials interim ``Results``. The session id is Deepgram's request id (the ``dg-request-id``
response header, and ``request_id`` in every message), so viewers and transcript downloads can
follow a Deepgram stream like any other.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import hashlib
import json
import logging
import struct
import unicodedata
import uuid
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from .. import wire
from ..errors import ClientError, retry_after
from ..audio import Resampler
from ..listen import ListenConnection
from ..vad import SpeechEnd, SpeechStart, VadSegmenter, webrtc_classifier
from ..text import join_texts, whole_words
from .common import (g711_to_float, speaker_token)
from .deepgram_gaps import Gaps
from .deepgram_params import (CONFIGURABLE, NEUTRAL_FEATURES, OFF_ONLY, DeepgramOptions,
                              parse_options)

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["DeepgramConnection", "alternative", "containerized", "error_body", "iso_time",
           "listen_live", "model_info", "model_uuid"]

log = logging.getLogger("whisperwire.server")

MAX_FILE_BYTES = 512 << 20
_CONTAINERS = (b"OggS", b"fLaC", b"\x1aE\xdf\xa3", b"caff")  # Ogg, FLAC, WebM/Matroska, CAF
IDLE_TIMEOUT_S = 10.0  # Deepgram closes a stream that sends nothing for 10 s (NET-0001)
_STATUS = {"unauthorized": 401, "server_full": 429, "not_ready": 503, "shutting_down": 503,
           "file_too_large": 413, "decode_failed": 500, "method_not_allowed": 405}
_ERR_CODE = {401: "INVALID_AUTH", 429: "TOO_MANY_REQUESTS", 503: "SERVICE_UNAVAILABLE",
             413: "PAYLOAD_TOO_LARGE", 500: "INTERNAL_SERVER_ERROR",
             405: "METHOD_NOT_ALLOWED"}


def model_uuid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "whisperwire:" + name))


def model_info(engine: Any) -> dict[str, str]:
    return {"name": engine.model_name, "version": "whisperwire", "arch": "whisper"}


def containerized(data: bytes) -> str | None:
    """How a file's bytes start: as a container or tagged stream does ("magic": WAV, Ogg,
    FLAC, WebM, CAF, AIFF, MP4, ID3-tagged MP3), as an MPEG audio frame ("mpeg"), or neither
    (None). Deepgram reads a container as such whatever ``encoding`` says. Raw PCM may start
    like an MPEG frame header by chance, never with a magic: only "mpeg" may still be raw."""
    head = data[:12]
    if head[:4] in _CONTAINERS or head[:4] in (b"RIFF", b"RF64", b"FORM") \
            or head[:3] == b"ID3" or head[4:8] == b"ftyp":
        return "magic"
    if len(head) < 3 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return None
    version, layer = head[1] >> 3 & 3, head[1] >> 1 & 3
    bitrate, rate = head[2] >> 4, head[2] >> 2 & 3
    return "mpeg" if version != 1 and layer != 0 and bitrate not in (0, 15) and rate != 3 \
        else None


def error_body(exc: ClientError, request_id: str) -> tuple[int, dict[str, str]]:
    status = _STATUS.get(exc.code, 400)
    return status, {"err_code": _ERR_CODE.get(status, "Bad Request"),
                    "err_msg": exc.message, "request_id": request_id, "category": exc.code}


def _word(w: wire.Word, punctuate: bool) -> dict[str, Any]:
    # lower case, the marks that only punctuate gone from its ends and what is inside kept:
    # "t-shirt." is "t-shirt", "$3.5" stays, "50%" too (said), "U.S." is "u.s" (one word,
    # never a space inside)
    core = w.word.strip()
    plain = unicodedata.normalize("NFKC", core).lower().strip(_MARK_CHARS) or core
    out = {"word": plain, "start": round(w.start, 3), "end": round(w.end, 3),
           "confidence": round(w.probability, 4)}
    if punctuate:
        out["punctuated_word"] = w.word.strip()
    return out


# marks that only punctuate: without ``punctuate`` Deepgram writes none of them as a word (a
# symbol that is said, "%", "+", "$", stays)
_MARKS = set(".,!?;:…、。，！？；：\"'“”‘’()[]{}«»‹›„‚¿¡「」『』【】—–-")
_MARK_CHARS = "".join(sorted(_MARKS))
_OPENERS = set("¿¡„‚“‘«‹([{「『【")  # marks that go with the word after them


def _whole(words: list[wire.Word], punctuate: bool) -> list[wire.Word]:
    """Deepgram's words: pieces of one word glued back (in a Chinese session our units are
    characters, and a Latin word among them comes as its tokens: "W" "i" "Fi"), and no word
    that is punctuation marks only: Whisper writes "，" and "。" as units of their own, and
    Deepgram's words never are; with ``punctuate`` the marks go into the ``punctuated_word``
    of the word they follow (an opening mark: of the word after it)."""
    out: list[wire.Word] = []
    opening = ""  # opening marks waiting for their word
    for w in whole_words(words):
        core = w.word.strip()
        if not core:
            continue
        if set(core) <= _MARKS:
            if not punctuate:
                continue
            # (a straight quote after a space opens: ' "' before a word, '"' after one closes)
            opens = set(core) <= _OPENERS or (w.word[:1].isspace() and set(core) <= set("\"'"))
            if opens:
                opening += core
            elif out:
                out[-1] = _with_marks(out[-1], core, w.end)
            # (else a final that starts with a closing mark: it closes the last final's word)
            continue
        if opening:
            lead = w.word[: len(w.word) - len(w.word.lstrip())]
            w = wire.Word(lead + opening + w.word.lstrip(), w.start, w.end, w.probability)
            opening = ""
        out.append(w)
    if opening and out:  # (opening marks at the end, "He said (": kept on the last word)
        out[-1] = _with_marks(out[-1], opening, out[-1].end)
    return out


def _with_marks(w: wire.Word, marks: str, end: float) -> wire.Word:
    """``w`` with ``marks`` written after it (its confidence stays its own)."""
    return wire.Word(w.word + marks, w.start, max(w.end, end), w.probability)


def alternative(words: list[wire.Word], text: str, punctuate: bool) -> dict[str, Any]:
    """Deepgram's ``alternatives[0]``: the transcript (without punctuation and case unless
    ``punctuate`` or ``smart_format`` asked for them, as Deepgram does) and its words.
    Words are spaced as text is (none between Chinese characters)."""
    whole = _whole(words, punctuate)
    dw = [_word(w, punctuate) for w in whole]
    transcript = text.strip() if punctuate else join_texts(d["word"] for d in dw)
    conf = sum(w.probability for w in words) / len(words) if words else 0.0
    return {"transcript": transcript, "confidence": round(conf, 4), "words": dw}


def _guess_words(p: wire.Partial) -> list[wire.Word]:
    """A partial's words with times spread over its span (a partial carries text only; the
    times of an interim result are estimates, its confidence unknown: 0)."""
    parts = p.text.split()
    step = (p.end - p.start) / max(1, len(parts))
    return [wire.Word(" " + t, p.start + i * step, p.start + (i + 1) * step, 0.0)
            for i, t in enumerate(parts)]


def _riff_chunks(data: bytes) -> dict[bytes, int]:
    """Where each chunk of a WAV header starts, walked by the chunks' sizes up to ``data``
    (whose size a stream leaves unknown). A search for b"data" found those letters inside a
    LIST chunk's comment ("xmetadata") and read the header's rest as audio: no words, no error."""
    at, out = 12, {}
    while at + 8 <= len(data):
        tag, size = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        out.setdefault(tag, at)
        if tag == b"data":
            break
        at += 8 + size + (size & 1)  # (a chunk of odd size is padded to an even one)
    return out


@dataclasses.dataclass(frozen=True)
class _Flushed:
    """A final produced for a ``Finalize``: Deepgram marks it ``from_finalize``."""

    final: wire.Final | wire.UtteranceEnd  # utterance_end: nothing was left to flush
    more: int = 0  # Finalize messages it answers besides the first (each gets a reply)
    goes_on: bool = False  # speech after it was still to be decoded when it was made


@dataclasses.dataclass(frozen=True)
class _Silence:
    """The silence after an utterance's end grew: ``speech_final`` or ``UtteranceEnd`` may be
    due (decided when it is written, in order with the finals)."""


@dataclasses.dataclass(frozen=True)
class _Raw:
    """A Deepgram message that has no counterpart in our protocol."""

    body: dict[str, Any]


class DeepgramConnection(ListenConnection):
    """A Deepgram live stream on our session machinery: Deepgram's messages in and out."""

    api = "deepgram"
    rejoins = False  # its clients open a new stream after a drop

    def __init__(self, ws: WebSocket, opts: DeepgramOptions, server: WhisperWire,
                 transcript: Any) -> None:
        cfg = server.config
        vad_opts = cfg.vad
        if opts.endpointing_ms is not None:  # a shorter end, never a longer one (the gaps)
            vad_opts = dataclasses.replace(
                vad_opts, hangover_ms=min(opts.endpointing_ms, vad_opts.hangover_ms))
        super().__init__(ws, opts.params, server.engine, server.hub, transcript, cfg,
                         server.metrics,
                         vad=VadSegmenter(vad_opts, webrtc_classifier(vad_opts.aggressiveness)))
        self.opts = opts
        self.idle_timeout_s = min(IDLE_TIMEOUT_S, cfg.idle_timeout_s)
        self._odd = b""  # a linear16 frame's last byte, when it ended inside a sample
        self._silence_out = False  # a _Silence waits in the outbox
        self._tiled = 0.0  # where the last final Results ended: an empty one starts there
        self._gaps = Gaps((opts.endpointing_ms or 0) / 1000 if opts.speech_final else None,
                          None if opts.utterance_end_ms is None else opts.utterance_end_ms / 1000)
        self._uuid = model_uuid(self.engine.model_name)
        self._sha = hashlib.sha256()
        self._created = datetime.datetime.now(datetime.timezone.utc)

    # -- input -----------------------------------------------------------------------------
    def greet(self) -> None:
        pass  # Deepgram says nothing first; the session id went out as dg-request-id

    def take_audio(self, data: bytes) -> Any:
        self._sha.update(data)
        if self.opts.container_ok and not self.session.samples_in and data:
            data = self._unwrap(data)
        if self.opts.encoding in ("mulaw", "alaw"):
            return g711_to_float(data, self.opts.encoding)
        # a byte stream, as Deepgram reads it: a frame may end inside a sample (ffmpeg piped)
        data, self._odd = self._odd + data, b""
        if len(data) % 2:
            data, self._odd = data[:-1], data[-1:]
        return super().take_audio(data)

    def _unwrap(self, data: bytes) -> bytes:
        """Without ``encoding`` the stream may start with a WAV header (Deepgram reads the
        container): its rate is taken and the header skipped. Other containers cannot be
        streamed here, and are refused rather than heard as noise."""
        self.opts = dataclasses.replace(self.opts, container_ok=False)
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            chunks = _riff_chunks(data)
            fmt, pcm = chunks.get(b"fmt "), chunks.get(b"data")
            if fmt is None or pcm is None or len(data) < fmt + 24:
                raise ClientError("bad_audio", "the WAV header must arrive in one frame")
            tag, channels, rate = struct.unpack("<HHI", data[fmt + 8 : fmt + 16])
            bits = struct.unpack("<H", data[fmt + 22 : fmt + 24])[0]
            if (tag, channels, bits) != (1, 1, 16):
                raise ClientError("bad_audio", "a streamed WAV must be 16-bit PCM mono")
            if rate != self.params.sample_rate:
                if not wire.MIN_SAMPLE_RATE <= rate <= wire.MAX_SAMPLE_RATE:
                    raise ClientError("bad_sample_rate", f"unsupported WAV rate {rate}")
                self.params = dataclasses.replace(self.params, sample_rate=rate)
                self.resampler = Resampler(rate)
            return data[pcm + 8 :]
        if data[:4] in _CONTAINERS or data[:3] == b"ID3" or data[:2] == b"\xff\xfb":
            raise ClientError("bad_audio", "compressed or containerized audio cannot be "
                              "streamed live here: send encoding=linear16 (raw PCM)")
        return data

    def _take(self, msg: dict) -> bool:
        if msg.get("bytes") == b"":  # Deepgram's first way to close (deprecated, still sent)
            return True
        return super()._take(msg)

    def take_text(self, text: str) -> bool:
        try:
            msg = wire.loads(text)
        except (ValueError, RecursionError):
            msg = None
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "CloseStream":
            return True
        if kind == "Finalize":
            self._publish(self.session.events())  # finals input made and the pump has not sent
            self.finalize()
        elif kind == "Configure":
            self._configure(msg)
        elif kind != "KeepAlive":
            raise ClientError("SchemaError", f"unknown message {text[:200]!r}; expected "
                              "KeepAlive, Finalize, Configure or CloseStream")
        return False

    def _configure(self, msg: dict[str, Any]) -> None:
        """``Configure``: new keyterms become Whisper's prompt from the next decode on, and
        ``features`` turn punctuation on or off; a feature this server lacks is refused with
        ``ConfigureFailure`` (it was answered ``ConfigureSuccess`` and ignored)."""
        terms, features = msg.get("keyterms"), msg.get("features")
        if terms is not None:
            if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
                raise ClientError("SchemaError", "keyterms must be a list of strings")
            prompt = ", ".join(t.strip() for t in terms if t.strip())
            if len(prompt) > 1000:
                return self._configure_failed("CONFIGURE_KEYTERM_LIMIT_EXCEEDED",
                                              "keyterms are limited to 1000 characters")
        if features is not None:
            if not isinstance(features, dict) or not all(
                    isinstance(k, str) and isinstance(v, bool) for k, v in features.items()):
                raise ClientError("SchemaError", "features must map feature names to booleans")
            lacking = sorted(k for k, v in features.items() if k not in CONFIGURABLE and (
                v or k not in OFF_ONLY))
            if lacking:
                return self._configure_failed(
                    "CONFIGURE_FEATURE_NOT_SUPPORTED", f"features not supported here: "
                    f"{', '.join(lacking)[:200]} (punctuate and smart_format can be changed; "
                    f"{', '.join(sorted(NEUTRAL_FEATURES))} are accepted and change nothing)")
            asked = {k for k in ("punctuate", "smart_format") if features.get(k)}
            kept = {k for k in self.opts.punctuating if k not in features}
            self.opts = dataclasses.replace(self.opts, punctuating=frozenset(asked | kept),
                                            punctuate=bool(asked | kept))
        if terms is not None:
            self.session.user_prompt = prompt + "." if prompt else ""
        body: dict[str, Any] = {"type": "ConfigureSuccess", "request_id": self.sid}
        if terms is not None:
            body["keyterms"] = terms
        self.send(_Raw(body))

    def _configure_failed(self, code: str, why: str) -> None:
        self.send(_Raw({"type": "ConfigureFailure", "request_id": self.sid, "code": code,
                        "description": why}))

    def on_vad(self, marks: list[Any]) -> None:
        for m in marks:
            if isinstance(m, SpeechStart):
                # (where the speech began, not its pre-roll: a 0.33 s pause after "me." read
                # as 0.03 s, and endpointing=300 said no speech_final between two speakers)
                t = (m.sample if m.onset is None else m.onset) / 16000
                self._gaps.speech(t)
                if self.opts.vad_events:
                    self.send(_Raw({"type": "SpeechStarted", "channel": [0, 1],
                                    "timestamp": round(t, 3)}))
            elif isinstance(m, SpeechEnd):
                self._gaps.silence()

    def feed(self, x: Any) -> None:
        super().feed(x)
        if not self._silence_out and self._gaps.ripe(self.session.audio_seconds):
            self._silence_out = True  # the silence after an end is long enough now
            self.send(_Silence())

    def send(self, msg: Any) -> None:
        if isinstance(msg, (wire.Final, wire.UtteranceEnd)) and (n := self.session.answers(msg)):
            msg = _Flushed(msg, n - 1, self.session.undecided)
        super().send(msg)

    def close_frame(self, reason: str) -> tuple[int, str]:
        if reason == "idle_timeout":  # Deepgram's frame names the error, as its Error did
            return 1011, (f"NET-0001: no audio data or text message within the "
                          f"{self.idle_timeout_s:g} s timeout window")
        return (1011, "decode failed") if reason == "decode_failed" else (1000, "")

    # -- output ----------------------------------------------------------------------------
    def _results(self, alt: dict[str, Any], start: float, end: float, *, is_final: bool,
                 speech_final: bool = False, from_finalize: bool = False) -> str:
        if is_final:
            self._tiled = max(self._tiled, end)
        return json.dumps({
            "type": "Results", "channel_index": [0, 1], "duration": round(end - start, 3),
            "start": round(start, 3), "is_final": is_final, "speech_final": speech_final,
            "from_finalize": from_finalize, "channel": {"alternatives": [alt]},
            "metadata": {"request_id": self.sid, "model_info": model_info(self.engine),
                         "model_uuid": self._uuid}}, ensure_ascii=False)

    def _final(self, f: wire.Final, from_finalize: bool, goes_on: bool = False) -> list[str]:
        """A final ``Results``; ``speech_final`` if it ends an utterance and the silence after
        it is already as long as ``endpointing`` asks (else it comes later: :meth:`_silence`)."""
        if f.words:
            self._gaps.words(f.words[0].start, f.words[-1].end)
        if f.eou:
            self._gaps.ended(goes_on)
        final, end = self._gaps.due(self.session.audio_seconds)
        out = [self._results(alternative(list(f.words), f.text, self.opts.punctuate), f.start,
                             f.end, is_final=True, speech_final=final,
                             from_finalize=from_finalize)]
        return out + (self._utterance_end() if end else [])

    def _ended(self, e: wire.UtteranceEnd, from_finalize: bool, goes_on: bool = False
               ) -> list[str]:
        """An utterance end no final carried: every word of it was final already (or it was
        noise). Deepgram says it with an empty final ``Results`` (``speech_final``, and
        ``from_finalize`` for a ``Finalize``: LiveKit ends the user's speech on the one,
        Pipecat confirms its ``Finalize`` by the other), as for a final with ``eou``."""
        self._gaps.ended(goes_on)
        return self._silence(from_finalize)

    def _silence(self, from_finalize: bool = False) -> list[str]:
        """What the silence after an utterance's last word now says: an empty final
        ``Results`` with ``speech_final`` (or answering a ``Finalize``), ``UtteranceEnd``."""
        final, end = self._gaps.due(self.session.audio_seconds)
        out = []
        if final or from_finalize:
            at = self._gaps.last_word_end if self._gaps.quiet_from is None else self._gaps.quiet_from
            # (Results tile the audio: from the words, to the audio received or to the speech
            # the VAD heard start after them: sent faster than real time, that speech's words
            # come later, and an empty result over them would reach back over their final)
            # (and never back over an empty one written before: a Finalize said twice)
            at = max(at, self._tiled)
            t = max(at, min([self.session.audio_seconds, *self._gaps.starts]))
            out.append(self._results(alternative([], "", self.opts.punctuate), at, t,
                                     is_final=True, speech_final=final,
                                     from_finalize=from_finalize))
        return out + (self._utterance_end() if end else [])

    def _utterance_end(self) -> list[str]:
        return [json.dumps({"type": "UtteranceEnd", "channel": [0, 1],
                            "last_word_end": round(self._gaps.quiet_from or 0.0, 3)})]

    def encode(self, msg: Any) -> list[str]:
        if isinstance(msg, _Raw):
            return [json.dumps(msg.body)]
        if isinstance(msg, _Flushed):
            out = (self._final(msg.final, True, msg.goes_on) if isinstance(msg.final, wire.Final)
                   else self._ended(msg.final, True, msg.goes_on))
            t = max(self._tiled, self.session.audio_seconds)
            return out + [self._results(alternative([], "", self.opts.punctuate), t, t,
                                        is_final=True, from_finalize=True)] * msg.more
        if isinstance(msg, wire.Final):
            return self._final(msg, False)
        if isinstance(msg, wire.UtteranceEnd):
            return self._ended(msg, False)
        if isinstance(msg, _Silence):
            self._silence_out = False
            return self._silence()
        if isinstance(msg, wire.Partial):
            if not self.opts.interim_results or not msg.text:
                return []
            alt = alternative(_guess_words(msg), msg.text, self.opts.punctuate)
            return [self._results(alt, msg.start, msg.end, is_final=False)]
        if isinstance(msg, wire.Error):
            variant = "NET-0001" if msg.code == "idle_timeout" else msg.code
            return [json.dumps({"type": "Error", "variant": variant,
                                "description": msg.message, "message": msg.message})]
        if isinstance(msg, wire.Closed):
            return [json.dumps(self._metadata(msg.audio_seconds))]
        return []  # ready and status have no Deepgram counterpart

    def _metadata(self, seconds: float) -> dict[str, Any]:
        return {"type": "Metadata", "transaction_key": "deprecated", "request_id": self.sid,
                "sha256": self._sha.hexdigest(), "created": iso_time(self._created),
                "duration": round(seconds, 3), "channels": 1, "models": [self._uuid],
                "model_info": {self._uuid: model_info(self.engine)}}


def iso_time(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


_DENIED: contextvars.ContextVar[bool] = contextvars.ContextVar("deepgram_denied",
                                                               default=False)


class _DenialIsComplete(logging.Filter):
    """uvicorn's sans-I/O WebSocket logs a refused upgrade (an HTTP response instead of 101)
    as "returned without completing handshake": an error that is none, for a refusal we sent
    on purpose (the log call runs in the task that ran the app, so it sees our mark)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_DENIED.get() and "without completing handshake" in str(record.msg))


_FILTER = _DenialIsComplete()


async def _deny(ws: WebSocket, exc: ClientError) -> None:
    """Refuse the upgrade with Deepgram's HTTP status and JSON body (its SDKs raise an error
    with that status); where the server cannot send one, an ``Error`` message and a close."""
    status, body = error_body(exc, str(uuid.uuid4()))
    # (the reason said: Deepgram's SDK drops the body and dg-error, so an operator of a
    # Pipecat or LiveKit agent reads which parameter was refused only here)
    log.info("event=refused api=deepgram code=%s message=%r", exc.code, exc.message)
    uv = logging.getLogger("uvicorn.error")
    if _FILTER not in uv.filters:
        uv.addFilter(_FILTER)
    _DENIED.set(True)
    try:
        # the message may quote the query: printable ASCII only, never a line break
        safe = "".join(c if " " <= c <= "~" else "?" for c in exc.message[:200])
        await ws.send_denial_response(JSONResponse(body, status_code=status, headers={
            "dg-error": safe, **retry_after(exc.code)}))
    except RuntimeError:
        await ws.accept()
        await ws.send_text(json.dumps({"type": "Error", "variant": exc.code,
                                       "description": exc.message, "message": exc.message}))
        await ws.close(1008)


async def listen_live(server: WhisperWire, ws: WebSocket) -> None:
    """``GET /deepgram/v1/listen`` (WebSocket)."""
    try:
        server.check_origin(ws)
        q = ws.query_params
        multi = {k: q.getlist(k) for k in q.keys()}
        holder: dict[str, DeepgramOptions] = {}

        def parse() -> wire.ListenParams:
            holder["o"] = parse_options(q, multi, live=True)
            return holder["o"].params

        _, transcript = server.admit(speaker_token(ws.headers, q), parse)
    except ClientError as exc:
        server.metrics.errors.labels(exc.code).inc()
        await _deny(ws, exc)
        return
    protocols = [p.strip().lower() for p in ws.headers.get("sec-websocket-protocol", "").split(",")]
    await ws.accept(subprotocol=protocols[0] if protocols[0] in ("token", "bearer") else None,
                    headers=[(b"dg-request-id", transcript.session.encode())])
    await server.speak(DeepgramConnection(ws, holder["o"], server, transcript))
