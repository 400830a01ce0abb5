"""OpenAI realtime transcription: ``GET /v1/realtime?intent=transcription`` (WebSocket), so
``client.realtime.connect(extra_query={"intent": "transcription"})`` of the ``openai`` SDK
works with only ``base_url`` changed.

Turns are conversation items, in OpenAI's order: ``speech_started``, ``speech_stopped``,
``committed``, ``conversation.item.added`` and ``.done``, ``delta``..., ``completed``, once each
per item. With ``server_vad`` our VAD opens
and closes them (a client's ``commit`` closes the one under way); with ``turn_detection: null``
each ``commit`` makes a new one of the audio since the last commit or ``clear``. Each final word
goes to the turn it was spoken in, by time; words of a turn not yet committed wait for its
``committed``, then go out as ``delta`` events the moment they are final, so deltas are
append-only and an item's deltas joined are exactly its ``completed`` transcript. A ``clear``
discards the uncommitted audio's words as they become final (the session decodes on: committed
turns lose nothing). The session id is in ``session.created`` (``session.id``), for viewers and
transcript downloads. The items' rules are :mod:`.openai_turns` (no I/O); this module parses
the client's events, drives the session and writes.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket

from .. import wire
from ..errors import ClientError, ProtocolError, close_code_for
from ..listen import ListenConnection
from ..vad import SpeechEnd, SpeechStart, VadSegmenter, webrtc_classifier
from .common import g711_to_float, speaker_token
from .openai_audio import error_type
from .openai_turns import Event, Turns, new_id

log = logging.getLogger("whisperwire.server")

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["RealtimeConnection", "realtime"]

RATE = 24000
MAX_EVENT_CHARS = 15 << 20
_FORMATS = {"audio/pcm": ("pcm", RATE), "audio/pcmu": ("mulaw", 8000),
            "audio/pcma": ("alaw", 8000), "pcm16": ("pcm", RATE),
            "g711_ulaw": ("mulaw", 8000), "g711_alaw": ("alaw", 8000)}


_id = new_id


def _user_item(item_id: str) -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "message", "status": "completed",
            "role": "user", "content": [{"type": "input_audio", "transcript": None}]}


@dataclass(frozen=True)
class _Raw:
    body: dict[str, Any]


class RealtimeConnection(ListenConnection):
    """An OpenAI realtime transcription session on our session machinery."""

    api = "openai-realtime"
    rejoins = False  # its clients open a new stream after a drop

    def __init__(self, ws: WebSocket, server: WhisperWire, transcript: Any, model: str) -> None:
        params = wire.ListenParams(sample_rate=RATE)
        super().__init__(ws, params, server.engine, server.hub, transcript, server.config,
                         server.metrics)
        # base64 audio travels in JSON: up to OpenAI's 15 MiB per event (the SDK appends a
        # whole file in one), within the WebSocket layer's frame limit
        self.max_text_chars = min(MAX_EVENT_CHARS, server.config.max_frame_bytes)
        self.idle_timeout_s = server.config.realtime_idle_timeout_s
        self.model = model
        self.law = "pcm"
        self.fmt = {"type": "audio/pcm", "rate": RATE}
        self.turns: dict[str, Any] | None = {"type": "server_vad", "silence_duration_ms":
                                             server.config.vad.hangover_ms,
                                             "prefix_padding_ms": server.config.vad.pre_roll_ms,
                                             "threshold": 0.5}
        self.conversation = Turns(vad=True)
        # where the uncommitted buffer begins, in seconds of the input (the client's clock:
        # the resampler holds input back, and 120 ms of 24 kHz audio were 92 ms after it)
        self._buffer_from = 0.0
        # the client speaks the beta transcription_session.* events (it says so in its
        # OpenAI-Beta header, or by the first update it sends)
        self.beta = "realtime=v1" in ws.headers.get("openai-beta", "").replace(" ", "")
        self._language_tag: str | None = None  # transcription.language as the client sent it
        self._client_event: str | None = None  # the event_id of the client event in hand

    # -- events out ------------------------------------------------------------------------
    def event(self, kind: str, **body: Any) -> None:
        self.send(_Raw({"type": kind, "event_id": _id("event_"), **body}))

    def _send_turns(self, events: list[Event]) -> None:
        for kind, body in events:
            if kind == "input_audio_buffer.committed":  # (the VAD's: where its speech ended)
                self._buffer_from = max(self._buffer_from, self.conversation.cut)
            self.event(kind, **body)
            # the user item each turn is, as OpenAI announces it at the commit: added, and done
            # (a user's audio item is whole once committed; its transcript comes in the
            # transcription events), or in the beta ``conversation.item.created``
            if kind == "input_audio_buffer.committed":
                item = _user_item(body["item_id"])
                for name in (("conversation.item.created",) if self.beta else
                             ("conversation.item.added", "conversation.item.done")):
                    self.event(name, previous_item_id=body["previous_item_id"], item=item)

    def _session(self) -> dict[str, Any]:
        lang = self._language_tag or self.session.language
        tr = {"model": self.model, "language": None if lang == "auto" else lang,
              "prompt": self.session.user_prompt or None}
        if self.beta:  # the beta's flat session (a beta client read the GA one as all empty)
            fmt = {"mulaw": "g711_ulaw", "alaw": "g711_alaw"}.get(self.law, "pcm16")
            return {"id": self.sid, "object": "realtime.transcription_session",
                    "input_audio_format": fmt, "input_audio_transcription": tr,
                    "turn_detection": self.turns, "input_audio_noise_reduction": None,
                    "include": None}
        return {"type": "transcription", "id": self.sid, "object": "realtime.transcription_session",
                "audio": {"input": {"format": self.fmt, "transcription": tr,
                                    "turn_detection": self.turns, "noise_reduction": None}},
                "include": None}

    def greet(self) -> None:
        self.event("transcription_session.created" if self.beta else "session.created",
                   session=self._session())

    def encode(self, msg: Any) -> list[str]:
        if isinstance(msg, _Raw):
            return [json.dumps(msg.body, ensure_ascii=False)]
        return []

    def _error(self, e: wire.Error) -> _Raw:
        """OpenAI's error event, naming the client event that caused it (if it had an id)."""
        return _Raw({"type": "error", "event_id": _id("event_"), "error": {
            "type": error_type(e.code), "code": e.code, "message": e.message,
            "param": None, "event_id": self._client_event}})

    # -- input -----------------------------------------------------------------------------
    def take_audio(self, data: bytes) -> Any:
        raise ClientError("bad_audio", "send audio as input_audio_buffer.append events")

    def take_text(self, text: str) -> bool:
        """One client event. An error it causes names it (``error.event_id``): the id stays
        in hand until that error is sent, and is let go when the event went well."""
        self._client_event = None
        try:
            msg = wire.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ClientError("invalid_json", f"the event is not valid JSON text ({exc})"
                              ) from None
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise ClientError("invalid_event", "an event is a JSON object with a 'type'")
        kind = msg["type"]
        event_id = msg.get("event_id")
        self._client_event = event_id if isinstance(event_id, str) else None
        if kind == "input_audio_buffer.append":
            self._append(msg.get("audio"))
        elif kind in ("session.update", "transcription_session.update"):
            self.beta = kind.startswith("transcription_session")
            self._update(msg.get("session"))
        elif kind == "input_audio_buffer.commit":
            self._commit()
        elif kind == "input_audio_buffer.clear":
            self._clear()
        else:
            raise ClientError("invalid_event", f"unsupported event type {kind!r} in a "
                              "transcription session")
        self._client_event = None
        return False

    def _append(self, audio: Any) -> None:
        if not isinstance(audio, str):
            raise ClientError("invalid_audio", "input_audio_buffer.append needs 'audio' "
                              "(base64)")
        try:
            # (what b64decode(validate=True) does, without its copy of the text as bytes:
            # half the time of a 15 MiB event, on the event loop)
            data = binascii.a2b_base64(audio, strict_mode=True)
        except (binascii.Error, ValueError):
            raise ClientError("invalid_audio", "'audio' is not valid base64") from None
        if self.law != "pcm":
            x = g711_to_float(data, self.law)
        elif len(data) % 2:
            raise ClientError("invalid_audio", "pcm16 audio must be a whole number of samples")
        else:
            x = ListenConnection.take_audio(self, data)
        self.feed(x)

    def _commit(self) -> None:
        # OpenAI's own rule: at least 100 ms since the last commit (the client's or the VAD's)
        # or clear, on the stream's clock from where the buffer starts: a count of samples
        # started again at a VAD commit inside a long append lost the rest of that append,
        # and a commit after it was refused while seconds were uncommitted
        if self.taken_s - self._buffer_from < 0.1 - 1e-6:
            raise ClientError("input_audio_buffer_commit_empty",
                              "buffer too small: a commit needs at least 100 ms of audio")
        self._buffer_from = self.taken_s
        vad = self.conversation.vad
        self._send_turns(self.conversation.commit(self.session.audio_seconds))
        if vad:
            self.finalize()  # its words become final now; its end completes the turn
            return
        # manual turns: the VAD closes its utterance here, and the turn is complete once it is
        # all final
        self.session.finish()
        self.wake.set()
        # (finish may have made the words of an early end decode final: they go with this turn)
        self._publish(self.session.events())

    def _publish(self, events: list[wire.Message]) -> None:
        super()._publish(events)
        self._send_turns(self.conversation.settle(self.session.flushed))

    def _clear(self) -> None:
        """Discard the uncommitted audio, as OpenAI's buffer does: words heard in it are
        dropped when they become final (the session goes on decoding, so nothing committed
        is lost, and no decode is pulled from under the engine)."""
        self._buffer_from = self.taken_s
        self._send_turns(self.conversation.clear(self.session.audio_seconds))

    def on_vad(self, marks: list[Any]) -> None:
        for m in marks:
            t = m.sample / 16000
            if isinstance(m, SpeechStart):
                self._send_turns(self.conversation.speech_started(t))
            elif isinstance(m, SpeechEnd):
                self._send_turns(self.conversation.speech_stopped(t))

    def send(self, msg: Any) -> None:
        if isinstance(msg, wire.Final):
            self._send_turns(self.conversation.final(list(msg.words), msg.eou))
        elif isinstance(msg, wire.UtteranceEnd):
            self._send_turns(self.conversation.utterance_end(msg.end))
        elif isinstance(msg, wire.Error):
            super().send(msg)  # (counted, as every error is)
            self.outbox.put(self._error(msg))
            self._client_event = None
            return
        super().send(msg)

    def _update(self, s: Any) -> None:
        if not isinstance(s, dict):
            raise ClientError("invalid_session", "session.update needs a 'session' object")
        if s.get("type", "transcription") != "transcription":
            raise ClientError("invalid_session", "only transcription sessions are supported "
                              "(session.type 'transcription')")
        if self.beta:  # the beta event's flat fields
            inp = {"format": s.get("input_audio_format"),
                   "transcription": s.get("input_audio_transcription")}
            if "turn_detection" in s:
                inp["turn_detection"] = s["turn_detection"]
        else:
            audio = s.get("audio") or {}
            if not isinstance(audio, dict):
                raise ClientError("invalid_session", "session.audio must be an object")
            inp = audio.get("input") or {}
        if not isinstance(inp, dict):
            raise ClientError("invalid_session", "audio.input must be an object")
        if inp.get("format") is not None:
            self._format(inp["format"])
        if inp.get("transcription") is not None:
            self._transcription(inp["transcription"])
        if "turn_detection" in inp:
            self._turn_detection(inp["turn_detection"])
        if self.beta:
            self.event("transcription_session.updated", session=self._session())
        else:
            self.event("session.updated", session=self._session())

    def _format(self, fmt: Any) -> None:
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        if not isinstance(kind, str) or kind not in _FORMATS:
            raise ClientError("invalid_format", f"audio format {kind!r} is not supported; "
                              "use audio/pcm (24 kHz), audio/pcmu or audio/pcma")
        law, rate = _FORMATS[kind]
        if isinstance(fmt, dict) and fmt.get("rate") not in (None, rate):
            raise ClientError("invalid_format", f"{kind} is {rate} Hz")
        if rate != self.params.sample_rate:
            if self.session.samples_in:
                raise ClientError("invalid_format", "the audio format cannot change after "
                                  "audio has been sent")
            from ..audio import Resampler

            self.params = wire.ListenParams(sample_rate=rate)
            self.resampler = Resampler(rate)
        self.law = law
        self.fmt = {"type": kind, "rate": rate} if kind.startswith("audio/") else kind

    def _transcription(self, tr: Any) -> None:
        if not isinstance(tr, dict):
            raise ClientError("invalid_session", "transcription must be an object")
        lang = tr.get("language")
        if lang:
            try:  # (a tag as every API here reads it: "zh-TW" asks for traditional characters)
                base, script = wire.language_tag(str(lang))
            except ProtocolError:
                base, script = "", None
            if base not in self.engine.languages:
                raise ClientError("invalid_language", f"model {self.engine.model_name} does "
                                  f"not know language {lang!r}")
            self.session.language, self.session.zh_script = base, script
            self._language_tag = str(lang)  # (echoed as sent: "zh-TW", not "zh")
            self.tell_viewers_language()
        prompt = tr.get("prompt")
        if prompt is not None:
            if not isinstance(prompt, str):
                raise ClientError("invalid_prompt", "prompt must be a string")
            if len(prompt) > 1000:
                raise ClientError("invalid_prompt", "prompt is limited to 1000 characters")
            self.session.user_prompt = prompt
        if tr.get("model"):
            if not isinstance(tr["model"], str) or len(tr["model"]) > 200:
                raise ClientError("invalid_session", "transcription.model must be a model name")
            self.model = tr["model"]

    def _turn_detection(self, td: Any) -> None:
        if td is None:
            events, ended = self.conversation.to_manual(self.session.audio_seconds)
            self._send_turns(events)
            if ended:  # the turn under way ends here, as a commit would end it
                self.finalize()
            self.turns = None
            return
        if not isinstance(td, dict) or td.get("type") != "server_vad":
            raise ClientError("invalid_turn_detection", "turn_detection is server_vad or null "
                              "(semantic_vad is not supported)")
        silence = td.get("silence_duration_ms")
        if silence is not None:
            # (500.0 too: a JavaScript client's numbers are all floats)
            if isinstance(silence, bool) or not isinstance(silence, (int, float)) \
                    or not 200 <= silence <= 10000:
                raise ClientError("invalid_turn_detection",
                                  "silence_duration_ms must be 200..10000")
            self._hangover(int(round(silence)))
        threshold = td.get("threshold")  # (taken, as OpenAI's; our VAD has its own measure)
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(
                threshold, (int, float)) or not 0.0 <= threshold <= 1.0):
            raise ClientError("invalid_turn_detection", "threshold must be 0..1")
        self.turns = {**(self.turns or {}), **td}
        # the VAD's marks not yet taken first (a manual commit's end waits for the next
        # append): the manual buffer's turn is started here only if speech is under way
        self.on_vad(self.vad.take())
        # the uncommitted buffer of manual turns is part of the next VAD turn, as OpenAI's
        # (setting ``vad`` alone left its final words with no turn: they were lost)
        self._send_turns(self.conversation.to_vad(self.session.audio_seconds))

    def _hangover(self, ms: int) -> None:
        """The VAD ends utterances after ``ms`` of silence: set before any audio (stream
        positions start at the VAD's first sample)."""
        opts = self.vad.vad.opt
        if ms == opts.hangover_ms:
            return
        if self.session.samples_in:
            raise ClientError("invalid_turn_detection", "silence_duration_ms cannot change "
                              "after audio has been sent")
        opts = dataclasses.replace(opts, hangover_ms=ms)
        self.vad.vad = VadSegmenter(opts, webrtc_classifier(opts.aggressiveness))


async def realtime(server: WhisperWire, ws: WebSocket) -> None:
    """``GET /v1/realtime?intent=transcription`` (WebSocket)."""
    protocols = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",")]
    sub = "realtime" if "realtime" in protocols else None
    try:
        server.check_origin(ws)
        if ws.query_params.get("intent") != "transcription":
            raise ClientError("unsupported_intent", "only transcription sessions are served "
                              "here: connect with ?intent=transcription")
        token = speaker_token(ws.headers, ws.query_params)
        for p in protocols:
            if p.startswith("openai-insecure-api-key."):
                token = p.split(".", 1)[1]
        _, transcript = server.admit(token, lambda: wire.ListenParams(sample_rate=RATE))
    except ClientError as exc:
        server.metrics.errors.labels(exc.code).inc()
        log.info("event=refused api=openai-realtime code=%s message=%r", exc.code, exc.message)
        await ws.accept(subprotocol=sub)
        await ws.send_text(json.dumps({"type": "error", "event_id": _id("event_"), "error": {
            "type": error_type(exc.code), "code": exc.code, "message": exc.message,
            "param": None, "event_id": None}}))
        # (as our own socket closes: 1013 for a full server, which clients retry; it was
        # always 1008, a policy violation)
        await ws.close(close_code_for(exc.code), exc.message[:120])
        return
    await ws.accept(subprotocol=sub)
    model = ws.query_params.get("model") or server.engine.model_name
    await server.speak(RealtimeConnection(ws, server, transcript, model))
