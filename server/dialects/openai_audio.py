"""OpenAI's audio API under ``/v1``: ``POST /v1/audio/transcriptions`` and
``/v1/audio/translations`` (multipart, every response format) and ``GET /v1/models``, so the
``openai`` SDK works with only ``base_url`` changed.

A file is decoded as a session of its own (:func:`.common.decode_file`); its id comes back in
the ``x-request-id`` and ``x-whisperwire-session`` headers, and its transcript stays
downloadable under that id like any other session's.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.types import Message

from .. import subtitles, wire
from ..errors import ClientError, retry_after
from ..text import append_piece, closes, glue_piece, glued, is_unspaced, whole_words
from .common import (ClientGone, FileResult, check_speaker, decode_file, load_media,
                     speaker_token, while_awaited)

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["list_models", "model_entries", "retrieve_model", "transcribe", "unknown_url"]

MAX_FILE_BYTES = 25 << 20  # OpenAI's limit, which its clients expect
FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
_STATUS = {"unauthorized": 401, "server_full": 429, "not_ready": 503, "shutting_down": 503,
           "file_too_large": 413, "decode_failed": 500, "forbidden_origin": 403,
           "method_not_allowed": 405, "model_not_found": 404, "unknown_url": 404}
# OpenAI's speech-to-text models, served here by the loaded one (a transcription takes any name;
# these are the ones an app may look up before it starts)
OPENAI_MODELS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
_TYPE = {401: "invalid_request_error", 429: "rate_limit_error", 503: "server_error",
         500: "server_error"}
# the request field an error is about (OpenAI's ``error.param``)
_PARAM = {"bad_file": "file", "file_too_large": "file", "missing_file": "file",
          "missing_model": "model", "bad_language": "language", "bad_temperature": "temperature",
          "unsupported_response_format": "response_format", "bad_prompt": "prompt",
          "bad_timestamp_granularities": "timestamp_granularities", "unsupported_task": "model"}
_NAMES = {"en": "english", "zh": "chinese", "de": "german", "es": "spanish", "fr": "french",
          "ja": "japanese", "it": "italian", "pt": "portuguese", "ru": "russian",
          "ko": "korean", "nl": "dutch", "ar": "arabic", "hi": "hindi", "pl": "polish"}


def tasks(engine: Any) -> list[str]:
    """A multilingual model also translates into English; an English-only one does not."""
    return ["transcribe", "translate"] if len(engine.languages) > 1 else ["transcribe"]


def model_entries(engine: Any) -> list[dict[str, Any]]:
    """The loaded model in OpenAI's shape, with the languages it knows and its tasks (the web
    page builds its language menu on these two fields)."""
    return [{"id": engine.model_name, "object": "model", "created": 0,
             "owned_by": "whisperwire", "languages": list(engine.languages),
             "tasks": tasks(engine)}]


def _refused(server: WhisperWire, request: Request) -> JSONResponse | None:
    """The models want a speak token where the server has tokens, as OpenAI's want a valid
    key (an app checks its key there; the web page sends its token): the refusal, or None."""
    try:
        check_speaker(server, speaker_token(request.headers, request.query_params))
    except ClientError as exc:
        return error(exc)
    return None


async def list_models(server: WhisperWire, request: Request) -> JSONResponse:
    """``GET /v1/models``."""
    return _refused(server, request) or JSONResponse(
        {"object": "list", "data": model_entries(server.engine)})


async def retrieve_model(server: WhisperWire, request: Request) -> JSONResponse:
    """``GET /v1/models/{model}``: the loaded model by its name, or by one of OpenAI's."""
    if (refused := _refused(server, request)) is not None:
        return refused
    name = request.path_params["model"]
    if name != server.engine.model_name and name not in OPENAI_MODELS:
        return error(ClientError("model_not_found", f"the model {name!r} does not exist here; "
                                 f"{server.engine.model_name} serves "
                                 f"{', '.join(OPENAI_MODELS)}"), "model")
    return JSONResponse({**model_entries(server.engine)[0], "id": name})


async def unknown_url(request: Request) -> JSONResponse:
    """Any other path under ``/v1``: OpenAI's error shape, where the web page's static files
    answered a plain-text 404 that the SDKs report without a reason; a path served to other
    methods is a 405 (Starlette prefers this route's full match to that route's partial one)."""
    from starlette.routing import Match

    if any(route.matches(request.scope)[0] == Match.PARTIAL for route in request.app.routes):
        return error(ClientError("method_not_allowed", f"{request.method} is not allowed on "
                                 f"{request.url.path}"))
    return error(ClientError("unknown_url", f"invalid URL ({request.method} "
                                            f"{request.url.path}): not served here"))


def error_type(code: str) -> str:
    """OpenAI's ``error.type`` for one of our error codes (the realtime socket's too)."""
    return _TYPE.get(_STATUS.get(code, 400), "invalid_request_error")


def error(exc: ClientError, param: str | None = None) -> JSONResponse:
    status = _STATUS.get(exc.code, 400)
    # (OpenAI sends a request id with every answer, errors too: the SDK's ``e.request_id``)
    headers = {**retry_after(exc.code), "x-request-id": "req_" + secrets.token_hex(12)}
    return JSONResponse({"error": {"message": exc.message,
                                   "type": error_type(exc.code),
                                   "param": param, "code": exc.code}}, status_code=status,
                        headers=headers)


async def _form(request: Request) -> tuple[dict[str, Any], bytes]:
    """The multipart fields (lists for ``name[]``) and the file's bytes, within the limit."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_FILE_BYTES + (64 << 10):
        raise ClientError("file_too_large", f"Maximum content size limit ({MAX_FILE_BYTES}) "
                          "exceeded")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ClientError("bad_request", "expected a multipart/form-data body")
    try:
        form = await _capped(request, MAX_FILE_BYTES + (64 << 10)).form(max_files=1, max_fields=32)
    except ClientError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed body is the client's fault
        raise ClientError("bad_request", f"could not parse the multipart body: {exc}") from None
    fields: dict[str, Any] = {}
    for key in form:
        values = form.getlist(key)
        fields[key] = values if key.endswith("[]") else values[-1]
    upload = fields.pop("file", None)
    if not isinstance(upload, UploadFile):
        raise ClientError("missing_file", "the 'file' field with the audio is required")
    data = await upload.read(MAX_FILE_BYTES + 1)
    await form.close()
    if len(data) > MAX_FILE_BYTES:
        raise ClientError("file_too_large",
                          f"Maximum content size limit ({MAX_FILE_BYTES}) exceeded")
    return fields, data


def _capped(request: Request, limit: int) -> Request:
    """The request, its body refused once past ``limit`` bytes: a chunked upload says no
    length, and the form parser would spool all of it to disk first."""
    seen = 0

    async def receive() -> Message:
        nonlocal seen
        message = await request.receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise ClientError("file_too_large",
                              f"Maximum content size limit ({MAX_FILE_BYTES}) exceeded")
        return message

    return Request(request.scope, receive)


def _options(fields: dict[str, Any], task: str, engine: Any) -> tuple[str, list[str], Any]:
    if not str(fields.get("model") or "").strip():  # (OpenAI's 400; any name is taken here)
        raise ClientError("missing_model", "you must provide a model parameter (any name: "
                          f"{engine.model_name} does the work)")
    fmt = str(fields.get("response_format") or "json")
    if fmt not in FORMATS:
        raise ClientError("unsupported_response_format",
                          f"response_format must be one of {', '.join(FORMATS)}")
    if _stream_asked(fields, task) and fmt not in ("json", "text"):
        # (OpenAI's streaming models take only these; the SDK read the plain body as a
        # stream of no events, and the transcript was silently lost)
        raise ClientError("unsupported_response_format", f"response_format '{fmt}' is not "
                          "compatible with stream=true. Use 'json' or 'text' instead.")
    grans = [str(g) for g in fields.get("timestamp_granularities[]", [])] or ["segment"]
    if any(g not in ("word", "segment") for g in grans):
        raise ClientError("bad_timestamp_granularities",
                          "timestamp_granularities[] are 'word' and 'segment'")
    if task not in tasks(engine):
        raise ClientError("unsupported_task", f"model {engine.model_name} cannot translate")
    try:
        temperature = float(fields.get("temperature") or 0.0)
    except ValueError:
        raise ClientError("bad_temperature", "temperature must be a number") from None
    if not 0.0 <= temperature <= 1.0:  # (NaN too)
        raise ClientError("bad_temperature", "temperature is between 0 and 1")
    tag = str(fields.get("language") or "")
    lang, script = wire.language_tag(tag) if tag else (None, None)  # zh-TW: traditional
    prompt = str(fields.get("prompt") or "") or None
    if prompt is not None and len(prompt) > 1000:
        raise ClientError("bad_prompt", "prompt is limited to 1000 characters")
    return fmt, grans, (lang, prompt, script)


async def transcribe(server: WhisperWire, request: Request, task: str) -> Response:
    """``POST /v1/audio/transcriptions`` (task ``transcribe``) and ``/translations``."""
    started = time.monotonic()
    try:
        server.check_origin(request)
        token = speaker_token(request.headers, request.query_params)
        check_speaker(server, token)
        fields, data = await _form(request)
        fmt, grans, (lang, prompt, script) = _options(fields, task, server.engine)
        audio = await load_media(data, server.config.max_session_s)
        if _streams(fields, task, fmt):
            return await _stream(server, token, audio, lang, prompt, script)
        res = await while_awaited(request.receive, decode_file(
            server, token, audio, language=lang, task=task, prompt=prompt, zh_script=script,
            api="openai-file"))
    except ClientGone:
        return Response(status_code=499)  # (nobody reads it)
    except ClientError as exc:
        server.metrics.errors.labels(exc.code).inc()
        return error(exc, _PARAM.get(exc.code))
    headers = {"x-request-id": res.session, "x-whisperwire-session": res.session,
               "openai-processing-ms": str(int((time.monotonic() - started) * 1000))}
    return render(res, fmt, grans, task, headers)


def _reader_words(words: Iterable[wire.Word]) -> list[wire.Word]:
    """Whole words, a closing mark glued to the word before it, as "country." has its full
    stop: a Chinese transcript listed "，" as a word of its own (a unit of its own to the
    streaming core, and its word is a character)."""
    out: list[wire.Word] = []
    for w in whole_words(words):
        if out and closes(w.word) and not w.word[:1].isspace():
            out[-1] = glue_piece(out[-1], w)
        else:
            out.append(w)
    return out


def _streams(fields: dict[str, Any], task: str, fmt: str) -> bool:
    """``stream=true`` as OpenAI reads it: server-sent events of the transcript as it is made,
    for transcriptions in json or text; ignored for ``whisper-1`` (so the SDK says) and for
    the other formats and translations, which OpenAI does not stream either."""
    return _stream_asked(fields, task) and fmt in ("json", "text")


def _stream_asked(fields: dict[str, Any], task: str) -> bool:
    """``stream=true`` on a transcription by a model that streams (not ``whisper-1``)."""
    return (str(fields.get("stream", "false")).lower() == "true" and task == "transcribe"
            and str(fields.get("model") or "") != "whisper-1")


async def _stream(server: WhisperWire, token: str | None, audio: Any, lang: str | None,
                  prompt: str | None, script: str | None) -> Response:
    """``transcript.text.delta`` for each final as the file's session makes it, then
    ``transcript.text.done``. The session is admitted before the response starts, so a
    refusal is still an HTTP error."""
    box: list[Any] = []
    admitted = asyncio.Event()

    def taken(transcript: Any) -> None:
        box.append(transcript)
        admitted.set()

    job = asyncio.create_task(decode_file(server, token, audio, language=lang, prompt=prompt,
                                          zh_script=script, api="openai-file",
                                          admitted=taken))
    # (a client that hangs up leaves the file to finish as a session; its failure is logged)
    job.add_done_callback(lambda t: t.cancelled() or t.exception())
    waiter = asyncio.create_task(admitted.wait())
    await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if not admitted.is_set():
        job.result()  # its refusal (ClientError), said as an HTTP error
    transcript = box[0]

    def event(body: dict[str, Any]) -> str:
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    async def events() -> Any:
        sent, text = 0, ""
        while True:
            transcript.grew.clear()  # (before reading: a final from here on wakes the wait)
            done = job.done()
            finals = list(transcript.finals)
            for f in finals[sent:]:
                piece = append_piece(text, f.text, glued(f.words))[len(text):]
                text += piece
                yield event({"type": "transcript.text.delta", "delta": piece, "logprobs": None})
            sent = len(finals)
            if done:
                break
            grew = asyncio.ensure_future(transcript.grew.wait())
            await asyncio.wait({grew, job}, return_when=asyncio.FIRST_COMPLETED)
            grew.cancel()
        if job.cancelled() or job.exception() is not None:
            exc = None if job.cancelled() else job.exception()
            if not isinstance(exc, ClientError):
                exc = ClientError("decode_failed", "decoding failed; try again")
            yield event({"type": "error", "error": {"type": "server_error", "code": exc.code,
                                                     "message": exc.message}})
            return
        seconds = len(audio) / 16000
        yield event({"type": "transcript.text.done", "text": text, "logprobs": None,
                     "usage": {"type": "duration", "seconds": round(seconds, 3)}})

    return StreamingResponse(events(), media_type="text/event-stream", headers={
        "x-request-id": transcript.session, "x-whisperwire-session": transcript.session,
        "cache-control": "no-cache"})


def render(res: FileResult, fmt: str, grans: list[str], task: str,
           headers: dict[str, str]) -> Response:
    if fmt == "text":
        return PlainTextResponse(res.text + "\n", headers=headers)
    if fmt == "srt":
        return PlainTextResponse(subtitles.to_srt(res.finals, audio_end=res.seconds),
                                 headers=headers)
    if fmt == "vtt":
        return PlainTextResponse(subtitles.to_vtt(res.finals, audio_end=res.seconds),
                                 headers=headers)
    usage = {"type": "duration", "seconds": round(res.seconds, 3)}
    if fmt == "json":
        body: dict[str, Any] = {"text": res.text}
        if task == "transcribe":
            body["usage"] = usage
        return JSONResponse(body, headers=headers)
    body = {"task": task, "language": _NAMES.get(res.language, res.language),
            "duration": round(res.seconds, 3), "text": res.text}
    if "segment" in grans:
        body["segments"] = [_segment(i, f, t) for i, (f, t) in
                            enumerate(zip(res.finals, _pieces(res.finals)))]
    if "word" in grans and task == "transcribe":
        body["words"] = [{"word": w.word.strip(), "start": round(w.start, 3),
                          "end": round(w.end, 3)}
                         for w in _reader_words(w for f in res.finals for w in f.words)]
    if task == "transcribe":
        body["usage"] = usage
    return JSONResponse(body, headers=headers)


def _pieces(finals: list[wire.Final]) -> list[str]:
    """Each final's text as Whisper writes a segment's: with the space before it where the
    joined text has one (the first too, before a spaced script's word), so that the segments
    joined as they are give the text."""
    out, text = [], ""
    for f in finals:
        piece = append_piece(text, f.text, glued(f.words))[len(text):]
        text += piece
        lead = not out and piece and not is_unspaced(piece[0])
        out.append(" " + piece if lead else piece)
    return out


def _segment(i: int, f: wire.Final, text: str) -> dict[str, Any]:
    """One final as a ``verbose_json`` segment: ``avg_logprob`` from its words' probabilities,
    ``compression_ratio`` of its text as Whisper computes it (what hallucination filters read);
    ``no_speech_prob`` 0.0, since a final is speech the server kept."""
    import math

    from faster_whisper.transcribe import get_compression_ratio

    lp = [math.log(max(w.probability, 1e-6)) for w in f.words]
    return {"id": i, "seek": 0, "start": round(f.start, 3), "end": round(f.end, 3),
            "text": text, "tokens": [], "temperature": 0.0,
            "avg_logprob": round(sum(lp) / len(lp), 4) if lp else 0.0,
            "compression_ratio": round(get_compression_ratio(f.text.strip()), 4)
            if f.text.strip() else 0.0, "no_speech_prob": 0.0}
